"""A linted file's libcst tree and analyses are freed by reference counting, as soon as
``lint_text`` returns: nothing the lint builds stays in a reference cycle, which only Python's
cyclic garbage collector would free (after traversing the whole tree it holds).

The one cycle the analyses keep by design (a method's ``FunctionInfo`` and its class's
``ClassInfo``) is broken by ``FileContext.close``, which the engine calls once the rules ran.
A local ``def`` that the score-provenance analysis runs by value is another (its ``FuncRef``
closes over the environment that binds it: Python closures bind late); it holds that frame's
values only, and the modules below have none.
"""
from __future__ import annotations

import gc
import importlib.util
import textwrap
from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

from attncheck.lint import project
from attncheck.lint.analysis.index import ModuleIndex
from attncheck.lint.context import FileContext
from attncheck.lint.engine import Layer, lint_paths, lint_text, resolve_selection
from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = all_rules()
ALL = resolve_selection(REGISTRY, [Layer(select=("ALL",))])
#: attention modules: the lint fixtures (buggy and correct layers) and, when transformers is
#: installed, modeling files of it (read as text, never imported)
FIXTURES = sorted((ROOT / "fixtures" / "lint").rglob("*.py"))


def _transformers_files() -> list[Path]:
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return []
    base = Path(list(spec.submodule_search_locations)[0]) / "models"
    names = ["llama/modeling_llama.py", "bert/modeling_bert.py", "vit/modeling_vit.py",
             "mixtral/modeling_mixtral.py"]
    return [base / n for n in names if (base / n).exists()]


def _cyclic_garbage(run) -> tuple[object, Counter]:
    """``run()``'s result and, by type name, the libcst nodes and attncheck objects that only
    the cyclic collector frees after it."""
    gc.collect()  # what earlier code left
    enabled = gc.isenabled()
    gc.disable()  # no automatic collection while ``run`` runs: it would hide the cycles
    try:
        result = run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
    finally:
        gc.set_debug(0)
        if enabled:
            gc.enable()
    found = Counter(type(o).__name__ for o in gc.garbage
                    if isinstance(o, cst.CSTNode) or type(o).__module__.startswith("attncheck."))
    gc.garbage.clear()
    gc.collect()
    return result, found


def _key(findings) -> list[dict]:
    return [f.to_dict() for f in findings]


def test_lint_text_leaves_no_tree_to_the_cyclic_collector():
    paths = FIXTURES + _transformers_files()
    texts = [p.read_text(encoding="utf-8") for p in paths]

    def lint_all():  # one collection for all (each traverses the test process's whole heap)
        return [lint_text(t, p.name, ALL, REGISTRY).parsed for p, t in zip(paths, texts)]

    parsed, garbage = _cyclic_garbage(lint_all)
    assert len(parsed) > 40 and all(parsed)
    assert garbage == Counter()


# a method and its class (the index's cycle), a same-named class shadowing another
_LAYER = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Attention(nn.Module):
        def forward(self, q, k, v):
            return v


    class Attention(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            self.n_heads = n_heads
            self.head_dim = d_model // n_heads

        def forward(self, q, k, v, mask):
            scores = q @ k.transpose(-2, -1) / self.n_heads ** 0.5
            scores = scores.masked_fill(mask, float("-inf"))
            return torch.softmax(scores, dim=-2) @ v
''')


def test_teardown_frees_the_index_and_changes_no_finding(monkeypatch):
    out, garbage = _cyclic_garbage(lambda: lint_text(_LAYER, "layer.py", ALL, REGISTRY))
    assert {f.code for f in out.findings} >= {"ATT102", "ATT301"}  # scale, softmax axis
    assert garbage == Counter()
    # without the teardown, each method and its class stay in a cycle, holding their nodes
    monkeypatch.setattr(FileContext, "close", lambda self: None)
    kept, garbage = _cyclic_garbage(lambda: lint_text(_LAYER, "layer.py", ALL, REGISTRY))
    assert _key(kept.findings) == _key(out.findings)
    assert garbage["FunctionInfo"] == 3 and garbage["ClassInfo"] == 2
    assert garbage["FunctionDef"] == 3 and garbage["ClassDef"] == 2


def test_nested_definitions_walk_leaves_no_cycle():
    module = cst.parse_module(textwrap.dedent('''
        def outer(x):
            def inner(y):
                def innermost(z):
                    return z
                return innermost(y)

            def sibling(y):
                return y
            return inner(x) + sibling(x)
    '''))

    def walk():
        index = ModuleIndex(module)
        return [f.qual for f in index.nested(index.functions["outer"])]

    quals, garbage = _cyclic_garbage(walk)
    assert sorted(quals) == ["outer.inner", "outer.innermost", "outer.sibling"]
    assert quals.index("outer.innermost") == quals.index("outer.inner") + 1  # inside it
    assert garbage == Counter()


_HELPERS = textwrap.dedent('''
    import torch


    class Masks:
        def causal(self, n):
            return torch.tril(torch.ones(n, n, dtype=torch.bool))


    def causal_mask(n):
        return torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1)
''')

_CALLER = textwrap.dedent('''
    import torch
    from .utils import causal_mask


    def attend(q, k, v):
        scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
        scores = scores.masked_fill(~causal_mask(q.size(-2)), float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
''')


def test_imported_helpers_file_stays_usable_and_nothing_is_left_in_cycles(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(_HELPERS)
    (pkg / "layer.py").write_text(_CALLER)
    first, garbage = _cyclic_garbage(lambda: lint_paths([pkg], isolated=True))
    assert [(Path(f.path).name, f.code) for f in first.findings] == [("layer.py", "ATT202")]
    assert garbage == Counter()
    # the helper file's context, kept for later callers, still has its tree and index
    utils = (pkg / "utils.py").resolve()
    loaded = [ctx for _, ctx, _ in project._LOADED.values()
              if ctx is not None and ctx.path is not None and Path(ctx.path).resolve() == utils]
    assert loaded and all("causal_mask" in ctx.index.functions for ctx in loaded)
    again, garbage = _cyclic_garbage(lambda: lint_paths([pkg], isolated=True))
    assert _key(again.findings) == _key(first.findings)
    assert garbage == Counter()
