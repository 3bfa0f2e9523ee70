"""Lint engine: parse once, run all enabled rules in one batched visit.

MINIMAL VERSION — the engine owner extends this (discovery, prefilter, suppression, selection,
config, cache, parallelism).  The signature of :func:`lint_source` is what rule authors and
tests call and must stay.
"""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
from libcst.metadata import MetadataWrapper

from attncheck.lint.context import FileContext
from attncheck.lint.finding import Finding
from attncheck.lint.rule import Rule, all_rules


def run_rules(source: str, path: str, rules: Iterable[type[Rule]], settings=None) -> list[Finding]:
    """Parse ``source`` once and run ``rules`` (classes) over it; return sorted findings.

    Raises ``libcst.ParserSyntaxError`` when the source does not parse (the engine turns that
    into an ATT000 finding).
    """
    module = cst.parse_module(source)
    ctx = FileContext(module, source, path, settings=settings)
    instances = [r(ctx) for r in rules]
    if not instances:
        return []
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    wrapper.visit_batched(instances)
    findings = [f for r in instances for f in r.findings]
    return sorted(set(findings), key=lambda f: f.sort_key)


def lint_source(source: str, path: str = "<string>", select: Iterable[str] | None = None) -> list[Finding]:
    """Lint one file's text with the default rules (or the codes/prefixes in ``select``)."""
    registry = all_rules()
    if select is None:
        chosen = [r for r in registry.values() if r.default_enabled]
    else:
        sel = tuple(select)
        chosen = [r for c, r in registry.items() if c.startswith(sel)]
    return run_rules(source, path, chosen)
