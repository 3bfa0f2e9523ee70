"""Small helpers that build :class:`~attncheck.lint.finding.Fix` edits from libcst nodes.

Positions come from libcst's ``PositionProvider`` (1-based lines, 0-based columns, end
exclusive) shifted by ``ctx.line_offset`` (the engine may parse a region of a file).
"""
from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from attncheck.lint import walk
from attncheck.lint.analysis.layout import arg
from attncheck.lint.finding import Edit, Fix

#: the argument bound to keyword ``kw`` or positional index ``pos`` (``None`` past a ``*args``)
call_arg = arg


def _span(rule: Any, node: cst.CSTNode) -> tuple[int, int, int, int]:
    p = rule.get_metadata(PositionProvider, node)
    off = rule.ctx.line_offset
    return p.start.line + off, p.start.column, p.end.line + off, p.end.column


def replace(rule: Any, node: cst.CSTNode, content: str) -> Edit:
    """Replace the text of ``node`` with ``content``."""
    a, b, c, d = _span(rule, node)
    return Edit(a, b, c, d, content)


def add_arg(rule: Any, call: cst.Call, text: str) -> Edit | None:
    """Append the argument ``text`` (e.g. ``"dim=-1"``) to ``call``; ``None`` when there is no
    safe place (a ``**kwargs`` argument last, or the source does not close the call with ``)``)."""
    if call.args:
        last = call.args[-1]
        if last.star == "**":
            return None
        _, _, line, col = _span(rule, last.value)
        return Edit(line, col, line, col, ", " + text)
    _, _, line, col = _span(rule, call)
    lines = rule.ctx.module.code.splitlines()
    i = line - rule.ctx.line_offset - 1
    if col < 1 or not (0 <= i < len(lines)) or lines[i][col - 1:col] != ")":
        return None
    return Edit(line, col - 1, line, col - 1, text)


def unsafe(message: str, *edits: Edit | None) -> Fix | None:
    """An ``unsafe`` fix from ``edits`` (``None`` when any edit is missing)."""
    if not edits or any(e is None for e in edits):
        return None
    return Fix(message, tuple(edits), "unsafe")  # type: ignore[arg-type]


def enclosing(rule: Any, node: cst.CSTNode, kind: type = cst.FunctionDef) -> cst.CSTNode | None:
    """The innermost ``kind`` node (FunctionDef / ClassDef) whose source range contains ``node``."""
    v = _Enclosing(rule, kind, _span(rule, node))
    walk.visit(rule.ctx.module, v)
    return v.best


class _Enclosing(cst.CSTVisitor):
    """Finds the innermost ``kind`` node whose span contains ``target`` (a module-level class: a
    class made per call is freed by the cyclic collector only, with what its methods hold)."""

    def __init__(self, rule: Any, kind: type, target: tuple[int, int, int, int]) -> None:
        super().__init__()
        self.rule, self.kind, self.target = rule, kind, target
        self.best: cst.CSTNode | None = None

    def on_visit(self, n: cst.CSTNode) -> bool:
        if isinstance(n, self.kind):
            s, target = _span(self.rule, n), self.target
            if (s[0], s[1]) <= (target[0], target[1]) and (target[2], target[3]) <= (s[2], s[3]):
                self.best = n
            else:
                return False
        return True
