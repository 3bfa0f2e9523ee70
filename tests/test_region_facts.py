"""The shortcuts of the region selection's searches give what the full ``ast`` facts give.

The selection finds candidate units by a text search before building their facts
(:func:`attncheck.lint.regions._attribute_at` for attribute names), reads a unit's nested ``def``
names and import bindings from its statements alone (``_nested_statements``) and the names of a
right-hand side with a leaf-skipping walk (``_name_ids``); each must agree with the full walk.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attncheck.lint import regions

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "tests" / "regions_cases").glob("*.py"))

#: attribute names spelled every way the grammar allows around the ``.``
ODD_ATTRIBUTES = '''\
import torch as t
from a.b import c as d, e
x = t . nn.functional . softmax
y = (t.
     nn  # a comment after the dot's line
     .functional)
z = t.\\
    cuda
w = getattr(x, "softmax") + getattr(y, 'dim', 1) + hasattr(z, r"is_available")
class A:
    def forward(self, q):
        self.scale = q.size(-1) ** -0.5
        from torch.nn import functional as F
        def inner():
            import math, os.path
        return F.softmax(q * self.scale, -1)  # forward pass
'''


def _offset(text: str, line: int, col: int) -> int:
    """Offset of ``ast``'s (1-based line, UTF-8 byte column)."""
    lines = text.split("\n")
    start = sum(len(x) + 1 for x in lines[:line - 1])
    return start + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8"))


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _sources() -> list[str]:
    """The odd spellings above and every case file ``ast`` reads (some hold syntax errors)."""
    texts = [ODD_ATTRIBUTES] + [p.read_text(encoding="utf-8") for p in CASES]
    return [t for t in texts if _parses(t)]


def test_every_attribute_name_passes_the_text_check():
    checked = 0
    for text in _sources():
        for node in ast.walk(ast.parse(text)):
            if type(node) is ast.Attribute:
                # the attribute's name is the last token of the node
                end = _offset(text, node.end_lineno, node.end_col_offset)
                assert text[end - len(node.attr):end] == node.attr
                assert regions._attribute_at(text, end - len(node.attr)), (node.attr, node.lineno)
                checked += 1
            elif type(node) is ast.Call and type(node.func) is ast.Name \
                    and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2 \
                    and type(node.args[1]) is ast.Constant and isinstance(node.args[1].value, str):
                s = node.args[1]
                end = _offset(text, s.end_lineno, s.end_col_offset) - 1  # before the quote
                name = s.value
                assert text[end - len(name):end] == name
                assert regions._attribute_at(text, end - len(name))
                checked += 1
    assert checked > 100


@pytest.mark.parametrize("line, word, expected", [
    (11, "forward", False),         # ``def forward``: a definition, not an attribute
    (16, "forward", False),         # in a comment after code
    (16, "softmax", True),          # ``F.softmax``
    (12, "scale", True),            # ``self.scale``
    (3, "softmax", True),           # ``t . nn.functional . softmax``
    (5, "nn", True),                # first on its line, after ``t.`` and a line break
    (8, "cuda", True),              # after a backslash continuation
    (1, "torch", False),            # an imported module's name
])
def test_text_check_of_attribute_names(line, word, expected):
    text = ODD_ATTRIBUTES
    lines = text.split("\n")
    at = sum(len(x) + 1 for x in lines[:line - 1]) + lines[line - 1].index(word)
    assert regions._attribute_at(text, at) is expected


def test_nested_statements_give_the_facts_nested_defs_and_imports():
    units = 0
    for text in _sources():
        idx = regions.index(text)
        assert idx is not None
        for u in idx.units:
            own = u.nodes[0] if u.kind in ("func", "meth") else None
            facts = regions._Facts(u, u.nodes, u.base)
            assert regions._nested_statements(u.nodes, own) == (facts.nested, facts.imports)
            units += 1
    assert units > 200


def test_name_ids_are_the_names_of_the_full_walk():
    for text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.expr, ast.stmt)):
                want = {x.id for x in regions._walk([node]) if type(x) is ast.Name}
                assert regions._name_ids([node]) == want
