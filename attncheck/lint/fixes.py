"""Applying :class:`~attncheck.lint.finding.Fix` edits to source text.

Edits use the finding coordinates: 1-based lines, 0-based columns counted in characters (code
points), end exclusive.  Fixes are applied in source order; a fix any of whose edits overlaps
an edit already accepted in this pass is skipped (the engine re-lints and applies it in a later
pass if it still applies), as ruff does.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable

from attncheck.lint.finding import Edit, Finding, Fix


def _line_starts(source: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(source):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def _offset(starts: list[int], line: int, col: int, n: int) -> int:
    if line < 1:
        return 0
    if line > len(starts):
        return n
    return min(starts[line - 1] + col, n)


def applicable(finding: Finding, unsafe: bool) -> bool:
    """Whether ``finding`` has a fix that may be applied (``safe``, or any with ``unsafe``)."""
    fix = finding.fix
    return fix is not None and bool(fix.edits) and (unsafe or fix.applicability == "safe")


def apply_fixes(source: str, fixes: Iterable[Fix]) -> tuple[str, int]:
    """Apply non-overlapping ``fixes`` to ``source``; return (new source, number applied)."""
    starts = _line_starts(source)
    n = len(source)

    def span(e: Edit) -> tuple[int, int]:
        a = _offset(starts, e.line, e.col, n)
        b = _offset(starts, e.end_line, e.end_col, n)
        return (a, max(a, b))

    ordered = sorted(
        (f for f in fixes if f.edits),
        key=lambda f: min(span(e) for e in f.edits))
    taken: list[tuple[int, int]] = []
    edits: list[tuple[int, int, str]] = []
    applied = 0
    seen: set[tuple] = set()
    for fix in ordered:
        spans = [(span(e), e.content) for e in fix.edits]
        key = tuple(spans)
        if key in seen:  # the same fix reported twice (e.g. by two findings)
            continue

        def overlaps(a: int, b: int) -> bool:
            return any(a < tb and ta < b or (a == b == ta == tb) for ta, tb in taken)

        if any(overlaps(a, b) for (a, b), _ in spans):
            continue
        seen.add(key)
        for (a, b), content in spans:
            taken.append((a, b))
            edits.append((a, b, content))
        applied += 1
    out = source
    for a, b, content in sorted(edits, reverse=True):
        out = out[:a] + content + out[b:]
    return out, applied


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff of ``old`` → ``new`` labelled with ``path``."""
    out = []
    for line in difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     fromfile=f"a/{path}", tofile=f"b/{path}"):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


