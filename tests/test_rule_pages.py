"""Every registered rule has a catalog page whose examples are tests (ruff's "mdtest" idea).

- the page ``rules/<CODE>.md`` exists, starts with ``# <CODE> <name>``, has the metadata line
  ``Severity: <severity> · Default: on|off · Fix: none|safe|unsafe`` agreeing with the rule class,
  and every required section;
- the first ```python block under *Example* raises exactly its ``# expect: CODE[, CODE]`` lines
  (as ``(line, code)`` pairs, restricted to registered codes) and expects at least the page's own
  code;
- the first ```python block under *Use instead* raises nothing.

Blocks are linted with the default rules plus the page's own rule (so info rules are tested
too), and with a no-op rule that has no tokens so that every block is parsed (a syntax error in
a block is an ATT000 finding, whatever the prefilter would do).
ATT001 (internal error) has no code that triggers it: its *Example* shows output instead.
"""
from __future__ import annotations

import re

import pytest

from attncheck.lint import catalog
from attncheck.lint.engine import Layer, lint_text, resolve_selection
from attncheck.lint.rule import Rule, all_rules

REGISTRY = all_rules()
NO_PYTHON_EXAMPLE = {"ATT001"}
EXPECT_RE = re.compile(r"#\s*expect:\s*([A-Z0-9 ,]+)")


class _ParseEverything(Rule):
    code = "ATT990"
    name = "test-parse-everything"
    tokens = ()


def _expected(block: str) -> set[tuple[int, str]]:
    out = set()
    for i, line in enumerate(block.splitlines(), 1):
        m = EXPECT_RE.search(line)
        if m:
            out |= {(i, c.strip()) for c in m.group(1).split(",") if c.strip()}
    return out


def _lint(block: str, code: str) -> set[tuple[int, str]]:
    registry = dict(REGISTRY, ATT990=_ParseEverything)
    enabled = resolve_selection(REGISTRY, [Layer(extend_select=(code,))]) | {"ATT990"}
    out = lint_text(block, f"{code}.md", frozenset(enabled), registry)
    return {(f.line, f.code) for f in out.findings}


def _page(code: str) -> str:
    text = catalog.page(code)
    assert text is not None, f"rules/{code}.md is missing"
    return text


@pytest.mark.parametrize("code", list(REGISTRY))
def test_page_structure(code):
    rule = REGISTRY[code]
    text = _page(code)
    head = catalog.header(text)
    assert head.get("code") == code and head.get("name") == rule.name, text.splitlines()[0]
    assert head.get("severity") == rule.severity
    assert head.get("default") == ("on" if rule.default_enabled else "off")
    assert head.get("fix") in ("none", "safe", "unsafe")
    secs = catalog.sections(text)
    missing = [s for s in catalog.REQUIRED_SECTIONS if not secs.get(s, "").strip()]
    assert not missing, f"{code}: missing or empty sections {missing}"


@pytest.mark.parametrize("code", [c for c in REGISTRY if c not in NO_PYTHON_EXAMPLE])
def test_page_example_raises_exactly_expected(code):
    blocks = catalog.code_blocks(catalog.sections(_page(code)).get("Example", ""))
    assert blocks, f"{code}: no ```python block under ## Example"
    expected = {(ln, c) for ln, c in _expected(blocks[0]) if c in REGISTRY}
    assert any(c == code for _, c in expected), f"{code}: Example has no `# expect: {code}`"
    assert _lint(blocks[0], code) == expected


@pytest.mark.parametrize("code", [c for c in REGISTRY if c not in NO_PYTHON_EXAMPLE])
def test_page_use_instead_is_clean(code):
    blocks = catalog.code_blocks(catalog.sections(_page(code)).get("Use instead", ""))
    assert blocks, f"{code}: no ```python block under ## Use instead"
    assert _lint(blocks[0], code) == set()


def test_sections_parser_keeps_fenced_headings():
    text = "# ATT9 x\n## Example\n```python\n## not a heading\nx = 1\n```\n## Use instead\ny\n"
    secs = catalog.sections(text)
    assert secs["Example"] == "```python\n## not a heading\nx = 1\n```"
    assert catalog.code_blocks(secs["Example"]) == ["## not a heading\nx = 1\n"]
    assert secs["Use instead"] == "y"
