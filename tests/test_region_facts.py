"""A unit's nested ``def`` names and import bindings, read from its statements alone
(``regions._nested_statements``, what the selection asks before it needs a unit's full facts),
are those of the full ``ast`` facts (``regions._Facts``)."""
from __future__ import annotations

import ast
from pathlib import Path

from attncheck.lint import regions

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "tests" / "regions_cases").glob("*.py"))

#: imports and defs nested in methods, branches and handlers
NESTED = '''\
import torch as t
from a.b import c as d, e
class A:
    def forward(self, q):
        from torch.nn import functional as F
        def inner():
            import math, os.path
        try:
            from .local import *
        except ImportError:
            async def fallback():
                pass
        return F.softmax(q, -1)
def helper(x):
    if x:
        from torch import nn
    return x
'''


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def test_nested_statements_give_the_facts_nested_defs_and_imports():
    texts = [NESTED] + [p.read_text(encoding="utf-8") for p in CASES]
    units = 0
    for text in filter(_parses, texts):  # some case files hold syntax errors on purpose
        idx = regions.index(text)
        assert idx is not None
        for u in idx.units:
            own = u.nodes[0] if u.kind in ("func", "meth") else None
            facts = regions._Facts(u, u.nodes, u.base)
            assert regions._nested_statements(u.nodes, own) == (facts.nested, facts.imports)
            units += 1
    assert units > 200


def test_nested_statements_of_a_method():
    idx = regions.index(NESTED)
    forward = next(u for u in idx.units if u.name == "forward")
    assert regions._nested_statements(forward.nodes, forward.nodes[0]) == (
        {"inner", "fallback"}, {"F", "math", "os"})
