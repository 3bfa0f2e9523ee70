"""Test-only rules for the engine tests (registered per test, never in the package)."""
from __future__ import annotations

import libcst as cst
import pytest

from attncheck.lint.finding import Edit, Fix
from attncheck.lint.rule import _REGISTRY, Rule


class LiteralDimSoftmax(Rule):
    """``x.softmax(<int>)`` with an int other than -1 → finding with a safe fix to ``-1``."""

    code = "ATT991"
    name = "test-literal-dim"
    severity = "warning"
    summary = "test rule: softmax over a literal non-last dim"
    tokens = ("softmax",)

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if (isinstance(f, cst.Attribute) and f.attr.value == "softmax" and len(node.args) == 1
                and isinstance(node.args[0].value, cst.Integer)):
            from libcst.metadata import PositionProvider

            pos = self.get_metadata(PositionProvider, node.args[0].value)
            fix = Fix("use dim=-1", (Edit(pos.start.line, pos.start.column, pos.end.line,
                                          pos.end.column, "-1"),), "safe")
            self.report(node, f"softmax over dim {node.args[0].value.value}", fix)


class Crashing(Rule):
    """Raises on any call to ``boom()``."""

    code = "ATT992"
    name = "test-crash"
    severity = "error"
    summary = "test rule that crashes"
    tokens = ("boom",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "boom":
            raise ZeroDivisionError("division by zero")


class InfoSoftmax(Rule):
    """Info rule (off by default): every ``softmax`` attribute call."""

    code = "ATT993"
    name = "test-info"
    severity = "info"
    default_enabled = False
    summary = "test info rule"
    tokens = ("softmax",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "softmax":
            self.report(node, "softmax seen")


TEST_RULES = (LiteralDimSoftmax, Crashing, InfoSoftmax)


@pytest.fixture
def test_rules(monkeypatch):
    """Register the test-only rules for the duration of one test."""
    from attncheck.lint.rule import all_rules

    all_rules()  # import the real rule modules first
    for r in TEST_RULES:
        monkeypatch.setitem(_REGISTRY, r.code, r)
    yield TEST_RULES
