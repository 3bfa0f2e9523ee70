"""Method-level region selection, rule triggers and the read-only tree walker.

The end-to-end guarantee (findings equal a whole-file parse) is checked in
``test_engine_perf.py`` on every fixture and on real modeling files; these tests pin the pieces:
how files are cut into units, what the triggers match, what the closure keeps, and that the
walker visits exactly what libcst's own traversal visits, in the same order.
"""
from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncheck.lint import engine, regions, walk
from attncheck.lint import triggers as T
from attncheck.lint.engine import Layer, lint_text, resolve_selection
from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = all_rules()
ALL = resolve_selection(REGISTRY, [Layer(select=("ALL",))])
DEFAULT = resolve_selection(REGISTRY, [Layer()])


def _search(patterns, text: str) -> bool:
    return any((re.compile(p) if isinstance(p, str) else p).search(text) for p in patterns)


# ------------------------------------------------------------------------------- triggers

@pytest.mark.parametrize("text, hit", [
    ("F.dropout(x, p=0.1)", True), ("nn.functional.dropout(x, 0.1, True)", True),
    ("torch.dropout(x, 0.1, True)", True), ("dropout(x, 0.1)", True),
    ("F.dropout2d(x)", True), ("F.alpha_dropout(x)", True),
    ("self.dropout(x)", False), ("self.attn_dropout(x)", False), ("attn_dropout(x)", False),
])
def test_functional_dropout_trigger(text, hit):
    assert _search(T.F_DROPOUT, text) is hit


@pytest.mark.parametrize("text, hit", [
    ("s = q @ k.transpose(-2, -1)", True), ("s = q@k.mT", True), ("(a)@(b)", True),
    ("s = q @k.mT", True), ("s @= k", True), ("x = y\n@dec\ndef f(): pass", False),
    ("torch.matmul(q, k)", True), ("torch.einsum('bhid,bhjd->bhij', q, k)", True),
    ("    @torch.no_grad()\n    def forward(self):", False), ("@property", False),
])
def test_matmul_trigger_skips_decorators(text, hit):
    assert _search(T.MATMUL, text) is hit


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_1é @()[]\t\n#", max_size=16), st.integers(0, 17))
def test_matmul_operator_search_matches_its_regex(text, pos):
    """The ``@`` scan finds the same match (span) as the regular expression it stands for, from
    any start position."""
    op = T.MATMUL[1]
    got, want = op.search(text, pos), op.regex.search(text, pos)
    assert (got and got.span()) == (want and want.span())


@pytest.mark.parametrize("pattern, literals", [
    (r"softmax|Softmax", ("softmax", "Softmax")),
    (r"\.view\s*\(|reshape\s*\(", (".view", "reshape")),
    (r"abc\(|abcd|x[yz]q", ("x", "abc(", "abcd")), (r"abc|[xy]q", None),  # a class first
    (r"n_?rep|group", ("n", "group")),         # a quantified character ends the literal
    (r"Trans(?:former)?|Transformer\(|Tra+x", ("Tr",)),  # all start with ``Tr``
    (r"(?:ab|cd)|ef", None), (r"ab|", None), (r"a[|]b|c\|d", ("a", "c|d")),
])
def test_literal_starts_of_alternatives(pattern, literals):
    assert regions._literal_starts(pattern) == literals


_LITERAL_START_PATTERNS = [T.SOFTMAX[0], r"\.view\s*\(|reshape\s*\(", T.F_DROPOUT[0], T.REPEAT[0], T.MHA[0],
                           r"abab(?!c)|baa\b|aaab*"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_c. (\nsofStmaxdrpuvwie", max_size=40),
       st.lists(st.integers(0, 41), max_size=6), st.sampled_from(_LITERAL_START_PATTERNS))
def test_literal_starts_search_matches_its_regex(text, positions, pattern):
    """Searched from the literals, an alternation finds the same match (span) as the regular
    expression, from any start position and along a run of positions (increasing or not), and
    over the trigger patterns' own words."""
    words = ["softmax", "Softmax", ".view(", "reshape (", "dropout(", "self.dropout(",
             "alpha_dropout(", ".repeat(", "tile(", "Transformer(", "MultiheadAttention"]
    text = "".join(w if c == "." else c for c, w in zip(text, words * 4)) + text
    p = regions.compile_trigger(pattern)
    assert isinstance(p, regions.LiteralStarts)
    search = p.searcher(text)
    for pos in positions:
        got, want = search(pos), p.regex.search(text, pos)
        assert (got and got.span()) == (want and want.span())
        assert (p.search(text, pos) and got.span()) == (want and want.span())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0169._eExX +-*/(\t\n?a\u0663\u00e9", max_size=30), st.integers(0, 31),
       st.sampled_from(range(len(T.BIG_LITERAL))))
def test_number_pattern_search_matches_its_regex(text, pos, which):
    """Searched where its folded hint matches, a literal pattern finds the same match (span)
    as its regular expression from any position, other scripts' digits (``\\d``) included."""
    p = T.BIG_LITERAL[which]
    got, want = p.search(text, pos), p.regex.search(text, pos)
    assert (got and got.span()) == (want and want.span())


@pytest.mark.parametrize("literal, overflows", [
    ("-1e9", True), ("-1E10", True), ("-1.0e+05", True), ("-100000", True), ("-65505.0", True),
    ("-1_000_000", True), ("float('-1e30')", True), ("-9e4", True), ("-0xFFFF", True),
    ("-0x1_0000", True), ("-0o177777", True), ("-0b11111111111111111", True),
    ("-1000 * 1000", True), ("-(10 ** 6)", True), ("-1 / 1e-9", True), ("-40000 - 40000", True),
])
def test_big_literal_trigger_covers_fp16_overflow(literal, overflows):
    value = eval(literal)
    assert (value < -65504) is overflows
    assert _search(T.BIG_LITERAL, f"x.masked_fill(m, {literal})") is overflows


def test_self_assign_trigger():
    for text in ("self.x = 1", "self.x += 1", "self.x: int = 3", "self.x, y = f()", "a, self.x = 1"):
        assert _search(T.SELF_ASSIGN, text), text
    for text in ("f(self.x, y=3)", "self.x == 2", "g(self.x)"):
        assert not _search(T.SELF_ASSIGN, text), text


def test_every_rule_has_a_trigger_that_compiles():
    for code, rule in REGISTRY.items():
        if getattr(rule, "engine_only", False):
            continue
        t = regions.trigger_of(rule)
        assert t is not None and t.patterns, code


def test_rule_pages_fire_only_where_their_trigger_matches():
    """Every finding in the rule pages' bad examples lies in a unit the rule's trigger selects:
    the region run (threshold lowered) reports the same as the whole-file run."""
    from attncheck.lint import catalog

    regions_min = regions.MIN_LINES
    regions.MIN_LINES = 0
    try:
        n = 0
        for code in REGISTRY:
            text = catalog.page(code)
            if not text:
                continue
            secs = catalog.sections(text)
            for kind in ("Example", "Use instead"):
                for src in catalog.code_blocks(secs.get(kind, "")):
                    whole = lint_text(src, "x.py", ALL, REGISTRY, regions=False).findings
                    part = lint_text(src, "x.py", ALL, REGISTRY, regions=True).findings
                    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole], (code, kind)
                    n += kind == "Example" and any(f.code == code for f in whole)
        assert n >= 20
    finally:
        regions.MIN_LINES = regions_min


# ------------------------------------------------------------------------------- units

def _lines(src: str) -> list[str]:
    return src.split("\n")


def _units(src: str) -> list[tuple[str, str | None, int, int]]:
    idx = regions.index(src)
    assert idx is not None
    return [(u.kind, u.name, u.start, u.end) for u in idx.units]


def test_module_code_is_cut_into_statements():
    src = ('"""Doc\nin column 0\n"""\n'       # 0-2: one statement (triple-quoted string)
           "import torch\n"                   # 3
           "if X:\n    y = 1\nelse:\n    y = 2\n"   # 4-7: if/else is one statement
           "try:\n    import a\nexcept ImportError:\n    a = None\n"  # 8-11
           "NEG = -1e9; POS = 1\n"            # 12: statements sharing a line are one unit
           "Z = (\n1); W = 2\n")              # 13-14: also when the first spans lines
    n = len(src.split("\n"))
    assert _units(src) == [("mod", None, 0, 3), ("mod", None, 3, 4), ("mod", None, 4, 8),
                           ("mod", None, 8, 12), ("mod", None, 12, 13), ("mod", None, 13, n)]
    idx = regions.index(src)
    # what module-level statements bind, for the closure (the ``try`` binds ``a`` twice over)
    assert idx.binds["NEG"] == idx.binds["POS"] == [4]
    assert idx.binds["a"] == [3] and idx.binds["y"] == [2] and idx.binds["W"] == [5]
    assert idx.torch_imports == [1]


def test_class_is_cut_into_shell_and_methods():
    src = ("# header comment\n"
           "@dataclass(\n    frozen=True)\n"
           "class A(\n    Base,\n):\n"
           '    """doc"""\n'
           "    scale = 2\n"
           "    @property\n    def p(self):\n        return 1\n"
           "    def forward(self, x):\n        return x\n"
           "def f(): return 1\n"
           "class B: x = 1\n")
    n = len(src.split("\n"))
    assert _units(src) == [("class", None, 0, 6), ("class", None, 6, 7), ("class", None, 7, 8),
                           ("meth", "p", 8, 11), ("meth", "forward", 11, 13),
                           ("func", "f", 13, 14), ("class", None, 14, n)]
    idx = regions.index(src)
    assert idx.units[0].header and not idx.units[1].header and idx.units[-1].header
    assert idx.tops == [("A", True), ("f", False), ("B", True)]
    assert idx.class_bases == {0: {"Base"}, 2: set()}


def test_index_refuses_what_ast_cannot_read():
    assert regions.index("def f(:\n    pass\n") is None
    assert regions.index("x = 1\ry = 2\n") is None  # lone CR: other line numbers than split("\n")
    assert regions.index("x = 1\r\ny = 2\r\n") is not None


def test_large_files_are_read_in_pieces(monkeypatch):
    """Above ``WHOLE_BELOW`` the file is parsed in pieces cut before a column-0 statement; a
    cut inside a statement (a triple-quoted string, a bracket, a decorated ``def``) extends the
    piece.  The units are those of a whole parse."""
    src = "".join(
        f"X{i} = {i}\n" if i % 7 else
        f'S{i} = """\nY = 1\n"""\n@dec\ndef f{i}(a,\nb):\n    return (a,\nb)\n' for i in range(200))
    whole = _units(src)
    monkeypatch.setattr(regions, "WHOLE_BELOW", 10)
    monkeypatch.setattr(regions, "PIECE", 25)
    assert _units(src) == whole
    assert regions.index(src.replace("(a,\nb)", "(a,\nb", 1)) is None


def _attn_module(n_filler: int) -> str:
    filler = "".join(f"    def helper{i}(self, x):\n        return x + {i}\n\n" for i in range(n_filler))
    return ("import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
            "NEG_INF = -1e9\nUNUSED = [1, 2, 3]\n\n"
            "class Attn(nn.Module):\n"
            "    def __init__(self, d):\n        super().__init__()\n        self.d = d\n"
            "        self.sm = nn.Softmax(dim=-1)\n\n"
            + filler +
            "    def forward(self, q, k, v):\n"
            "        s = q @ k.transpose(-2, -1)\n"
            "        return self.sm(s) @ v\n\n"
            "    def fill(self, s, m):\n"
            "        return s.masked_fill(m, NEG_INF)\n")


def test_selection_blanks_unrelated_methods_and_follows_aliases():
    regions_min = regions.MIN_LINES
    regions.MIN_LINES = 0
    try:
        text = _attn_module(30)
        sel = regions.select(text, regions.triggers_of([REGISTRY["ATT101"]]))
        assert sel is not None
        # forward reaches softmax through self.sm, an alias bound in __init__
        assert sel.kept_defs == ["Attn"] and sel.kept_methods == [["__init__", "forward"]]
        assert "helper3" not in sel.text and "UNUSED" not in sel.text
        sel = regions.select(text, regions.triggers_of([REGISTRY["ATT204"]]))
        # the literal is bound at module level: the method that uses NEG_INF is a seed
        assert sel is not None and sel.kept_methods == [["__init__", "fill"]]
        assert "NEG_INF = -1e9" in sel.text
        assert len(sel.text.split("\n")) == len(text.split("\n"))
        whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
        assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
        assert {f.code for f in whole} >= {"ATT101", "ATT204"}
    finally:
        regions.MIN_LINES = regions_min


def test_def_line_inside_a_class_string_is_harmless(monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\n"
            "class A:\n"
            '    DOC = """\n'
            "    def fake(self): x\n"
            '    """\n'
            "    def forward(self, q, k, v):\n"
            "        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")
    assert [u.name for u in regions.index(text).units if u.kind == "meth"] == ["forward"]
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert "ATT101" in {f.code for f in whole}


def _parses(text: str) -> bool:
    try:
        cst.parse_module(text)
        return True
    except cst.ParserSyntaxError:
        return False


# ------------------------------------------------------------------------------- screen

def test_compile_only_errors_are_not_parse_errors():
    """``return`` outside a function fails bytecode compilation but is valid syntax (libcst and
    ``ast`` accept it): not ATT000.  A real syntax error is ATT000 at CPython's position."""
    ok = "return 1\n"
    assert engine._syntax_check(ok, "x.py") is None
    bad = engine._syntax_check("def f(:\n    pass\n", "x.py")
    assert bad is not None and bad.code == "ATT000" and (bad.line, bad.col) == (1, 6)


# ------------------------------------------------------------------------------- walker

class _Recorder(cst.BatchableCSTVisitor):
    """Records every visit/leave of the node types rules use."""

    TYPES = ("Module", "ClassDef", "FunctionDef", "Call", "If", "IfExp", "Assign", "AnnAssign",
             "AugAssign", "BinaryOperation", "Name", "Attribute", "Subscript", "Lambda",
             "Return", "For", "With", "Param", "Arg", "Integer", "Float", "SimpleString")

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str, int]] = []
        for t in self.TYPES:
            setattr(self, f"visit_{t}", self._rec("v", t))
            setattr(self, f"leave_{t}", self._rec("l", t))

    def _rec(self, kind, t):
        def f(node):
            self.log.append((kind, t, id(node)))
        return f

    def get_visitors(self):
        return {n: getattr(self, n) for n in dir(self) if n.startswith(("visit_", "leave_"))
                and n.split("_", 1)[1] in self.TYPES}


class _FewRecorder(_Recorder):
    """Visitors of a few node types only: the walker passes over the nodes nothing visits."""

    TYPES = ("FunctionDef", "Call", "Assign", "Subscript")


def _walk_logs(src: str, recorder: type[_Recorder] = _Recorder):
    from libcst._batched_visitor import _BatchedCSTVisitor

    module = cst.parse_module(src)
    a, b = recorder(), recorder()
    methods = {}
    for n, f in a.get_visitors().items():
        methods.setdefault(n, []).append(f)
    assert walk.supports(methods)
    walk.Walker(methods).walk(module)
    methods_b = {}
    for n, f in b.get_visitors().items():
        methods_b.setdefault(n, []).append(f)
    module.visit(_BatchedCSTVisitor(methods_b))
    return a.log, b.log


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures").rglob("*.py"))[:60],
                         ids=lambda p: p.name)
def test_walker_visits_like_libcst(path):
    a, b = _walk_logs(path.read_text(encoding="utf-8"))
    assert a == b and len(a) > 10
    a, b = _walk_logs(path.read_text(encoding="utf-8"), _FewRecorder)
    assert a == b


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["x = f(a)[1:2] @ g(*b, **c)", "@dec(1)\nasync def f(a: int = 2) -> T:\n    return [y for y in a if y]",
                        "class C(B, metaclass=M):\n    x: int = 1\n    def m(self):\n        with a as b, c:\n            del self.x",
                        "try:\n    pass\nexcept (E, F) as e:\n    raise X from e\nelse:\n    y = lambda q: q\nfinally:\n    z = {1: 2, **d}",
                        "while a < b <= c and not d:\n    a += 1 if e else -2\n    print(f'{a!r:>{w}}')"]))
def test_walker_matches_libcst_on_varied_syntax(src):
    a, b = _walk_logs(src)
    assert a == b
    a, b = _walk_logs(src, _FewRecorder)
    assert a == b


def test_walker_refuses_visitors_of_skipped_nodes():
    assert not walk.supports({"visit_Comma": []})
    assert not walk.supports({"visit_FunctionDef_body": []})
    assert walk.supports({"visit_Call": [], "leave_FunctionDef": []})


def test_walker_and_libcst_give_the_same_findings(monkeypatch):
    text = (ROOT / "fixtures").joinpath("cases").glob("*.py")
    for path in sorted(text):
        src = path.read_text(encoding="utf-8")
        monkeypatch.setattr(engine, "WALKER", True)
        fast = lint_text(src, str(path), ALL, REGISTRY).findings
        monkeypatch.setattr(engine, "WALKER", False)
        slow = lint_text(src, str(path), ALL, REGISTRY).findings
        assert [f.to_dict() for f in fast] == [f.to_dict() for f in slow], path.name


@pytest.mark.parametrize("bad", ["unparseable", "other methods"])
def test_untrusted_selection_falls_back_to_whole_file(bad, monkeypatch):
    """The engine notices a selection it cannot trust (the blanked text does not parse, or libcst
    finds other methods than the kept ones) and parses the whole file."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\nclass A:\n"
            "    def other(self):\n        return 2\n"
            "    def forward(self, q, k, v):\n"
            "        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")
    real = regions.select

    def broken(t, triggers, why=None, walk=None, idx=None):
        sel = real(t, triggers, why, walk, idx)
        if bad == "unparseable":
            sel.text = sel.text.replace("return torch", "return (torch", 1)
        else:
            sel.kept_methods = [["other", "forward"]]
        return sel

    monkeypatch.setattr(regions, "select", broken)
    assert engine._parse_regions(text, [REGISTRY["ATT101"]]) is None
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert "ATT101" in {f.code for f in whole}


def test_names_in_strings_and_comments_keep_nothing(monkeypatch):
    """Names are read from the ``ast``: a helper named only in a docstring, a comment or a
    string is not a call, and a parameter that shadows a module constant does not read it."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\nLIMIT = 3\n\n"
            "def helper(x):\n    return x\n\n"
            "def attn(q, k, LIMIT=None):\n"
            '    """Unlike helper(q), this ..."""\n'
            "    s = q @ k.transpose(-2, -1)  # helper(s) would ...\n"
            '    print("helper(s)")\n'
            "    return torch.softmax(s, dim=-1)\n")
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT101"]]))
    assert sel is not None and sel.kept_defs == ["attn"]
    assert "LIMIT = 3" not in sel.text
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]


def test_walk_skips_definitions_without_a_visiting_seed(monkeypatch):
    """Rules that visit nodes (ATT501 here) are walked only through definitions their trigger
    selects; the analysis rules still see everything kept.  Findings equal a whole-file run."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = _attn_module(3) + (
        "\n\nclass Drop(nn.Module):\n"
        "    def forward(self, q, k):\n"
        "        w = torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1)\n"
        "        return F.dropout(w, p=0.1)\n")
    active = engine.prefilter(text, [REGISTRY[c] for c in sorted(DEFAULT)
                                     if not getattr(REGISTRY[c], "engine_only", False)])
    skip: set[int] = set()
    module = engine._parse_regions(text, active, skip)
    assert module is not None
    names = {s.name.value for s in module.body if id(s) in skip}
    assert names == {"Attn"}  # no visiting rule's trigger inside Attn
    whole, part = (lint_text(text, "x.py", DEFAULT, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert {"ATT101", "ATT501"} <= {f.code for f in whole}


class _ImportVisitor(cst.CSTVisitor):
    """libcst's own traversal of every node, calling the collector at each import."""

    def __init__(self, collector) -> None:
        super().__init__()
        self.collector = collector

    def visit_Import(self, node: cst.Import) -> None:
        self.collector.visit_Import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.collector.visit_ImportFrom(node)


def test_import_table_equals_a_libcst_visit():
    """The alias table is collected without libcst's rebuilding visit, with the same result."""
    from attncheck.lint import context

    src = ("import torch\nimport torch.nn.functional as F\nfrom torch import nn as tnn\n"
           "try:\n    from flash_attn import flash_attn_func as faf\nexcept ImportError:\n"
           "    faf = None\nelse:\n    import numpy as np\nfinally:\n    import os.path\n"
           "if X:\n    import a.b as ab\nelif Y:\n    from c import d\n"
           "class K:\n    def f(self):\n        from torch.nn.functional import softmax as sm\n"
           "        with ctx():\n            import einops\n"
           "def g():\n    for i in r:\n        from e import f as torch\n")
    for text in (src, *(p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))[:40])):
        module = cst.parse_module(text)
        expected: dict[str, str] = {}
        module.visit(_ImportVisitor(context._ImportCollector(expected)))
        assert context.ImportTable(module).aliases == expected
    table = context.ImportTable(cst.parse_module(src)).aliases
    assert table["sm"] == "torch.nn.functional.softmax" and table["torch"] == "e.f"
    rel = context.ImportTable(cst.parse_module(
        "from .utils import f as g\nfrom .. import utils as U\nfrom . import *\n"
        "def h():\n    from ...a.b import c\n")).relative
    assert rel == {"g": (1, "utils", "f"), "U": (2, "", "utils"), "c": (3, "a.b", "c")}


def test_imports_inside_functions_are_kept_when_their_names_are_read(monkeypatch):
    """Every import feeds the alias table: a function's own import is kept (with its function)
    when kept code reads the name it binds, and not otherwise."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\n\n"
            "def setup():\n    from torch.nn.functional import softmax as sm\n    return 1\n\n"
            "def other():\n    import numpy as np\n    return np\n\n"
            "def attn(q, k):\n    return sm(q @ k.transpose(-2, -1), dim=-1)\n")
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT101"]]))
    assert sel is not None and sel.kept_defs == ["setup", "attn"]
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]


def test_unused_and_relative_imports_are_blanked(monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import math\nimport torch\nimport numpy as np\nfrom .configuration import (\n    Cfg,\n)\n"
            "from torch.nn import functional as F\n\n"
            "def attn(q, k, v):\n    s = q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1]) ** -1\n"
            "    return F.softmax(s, dim=-1) @ v\n\n"
            "def other(x):\n    return np.zeros(3)\n")
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT101"]]))
    assert sel is not None
    kept = [line for line in sel.text.split("\n") if line.startswith(("import", "from"))]
    assert kept == ["import math", "import torch", "from torch.nn import functional as F"]


def test_fixes_splice_back_the_same_with_regions(tmp_path, monkeypatch):
    """``--fix --unsafe-fixes`` on a region parse writes the same files as on whole-file parses
    (fix edits are positioned on the blanked text, whose lines and columns are the original's)."""
    from attncheck.lint.engine import lint_paths

    monkeypatch.setattr(regions, "MIN_LINES", 0)
    sources = sorted((ROOT / "fixtures").rglob("*.py"))
    outputs = {}
    for mode in (True, False):
        d = tmp_path / str(mode)
        d.mkdir()
        for p in sources:
            (d / f"{p.parent.name}_{p.name}").write_bytes(p.read_bytes())
        res = lint_paths([d], fix=True, unsafe_fixes=True, isolated=True, regions=mode,
                         cache_dir=tmp_path / "cache", select=["ALL"])
        outputs[mode] = (res.fixed, {f.name: f.read_text(encoding="utf-8") for f in sorted(d.iterdir())})
    assert outputs[True][0] > 5
    assert outputs[True] == outputs[False]


def test_a_trigger_imported_under_another_name_seeds_its_calls(monkeypatch):
    """``from torch.nn.functional import scaled_dot_product_attention as sdpa``: the calls
    ``sdpa(...)`` do not spell the trigger, the import does; the name it binds seeds them."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\nfrom torch.nn.functional import scaled_dot_product_attention as sdpa\n\n"
            "class Other:\n    def f(self, x):\n        return x\n\n"
            "class Attn(torch.nn.Module):\n"
            "    def forward(self, q, k, v, past_key_value=None):\n"
            "        return sdpa(q, k, v, is_causal=True)\n")
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert "ATT203" in {f.code for f in whole}
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT404"]]))
    assert sel is not None and sel.kept_defs == ["Attn"]


def test_narrow_triggers():
    assert not _search(T.BIG_LITERAL, "self.stage4 = nn.Linear(size4, 10)")
    assert _search(T.BIG_LITERAL, "s.masked_fill(m, -1.e9)")
    assert _search(T.IS_CAUSAL_TRUE, "F.scaled_dot_product_attention(q, k, v,\n    is_causal = True)")
    assert not _search(T.IS_CAUSAL_TRUE, "is_causal=self.is_causal")
    assert _search(T.GROUP_CONTEXT, "k.repeat(1, self.num_key_value_groups, 1, 1)")
    assert _search(T.GROUP_CONTEXT, "k.repeat(1, n_rep, 1, 1)")
    assert not _search(T.GROUP_CONTEXT, "pos.repeat(1, 1, 2)")


def test_literal_trigger_ignores_comments_and_docstrings(monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\n\n"
            "class A:\n"
            "    def doc(self, x):\n"
            '        """>>> logits.shape\n        [1, 7, 250002] with -1e9"""\n'
            "        return x  # -1e9 would overflow\n\n"
            "    def fill(self, s, m):\n"
            '        return s.masked_fill(m, float("-1e9"))\n')
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT204"]]))
    assert sel is not None and sel.kept_methods == [["fill"]]
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert "ATT204" in {f.code for f in whole}


def test_literal_trigger_ignores_parameter_defaults(monkeypatch):
    """The mask analysis never reads parameter defaults, so ``vocab_size: int = 151936`` in a
    signature cannot be a fill: it does not seed ATT204."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\n\n"
            "class Cfg:\n"
            "    def __init__(self, vocab_size: int = 151936,\n"
            "                 theta=1_000_000.0):\n"
            "        self.vocab_size = vocab_size\n\n"
            "class A:\n"
            "    def helper(self, x):\n        return x\n\n"
            "    def fill(self, s, m, value=-1e9):\n"
            "        return s.masked_fill(m, -1e9)\n")
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT204"]]))
    assert sel is not None and sel.kept_defs == ["A"] and sel.kept_methods == [["fill"]]
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert [f.line for f in whole if f.code == "ATT204"] == [13]


def test_literal_trigger_ignores_class_body_fields(monkeypatch):
    """Config-style class fields (``vocab_size: int = 151936``) are not read by the mask analysis
    (attributes come from ``__init__``): they do not seed ATT204; an ``__init__`` attribute does."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import torch\n\n"
            "class Cfg:\n"
            "    vocab_size: int = 151936\n"
            "    neg: float = -1e9\n\n"
            "    def other(self):\n        return 1\n\n"
            "class A(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.neg = -1e9\n\n"
            "    def helper(self, x):\n        return x\n\n"
            "    def fill(self, s, m):\n"
            "        return s.masked_fill(m, self.neg)\n")
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT204"]]))
    assert sel is not None and sel.kept_defs == ["A"]
    assert sel.kept_methods == [["__init__", "fill"]]
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert [f.line for f in whole if f.code == "ATT204"] == [13]


#: inputs a fresh-user tester built to break region parsing (all once lost or changed a finding)
REGION_CASES = {
    "r1_triple_quote_hides_helper.py": {"ATT105"},     # ''' inside a string hid a real helper
    "r1b_triple_quote_in_comments.py": {"ATT105"},     # ''' inside comments
    "r2_att204_triplequote_in_code.py": {"ATT204"},    # a triple quote in a string before the literal
    "r3_att204_escaped_quote_hash.py": {"ATT204"},     # "\"#" is not a comment
    "r4a_global_semicolon.py": {"ATT202"},             # X = 1; CAUSAL = torch.triu(...)
    "r4b_global_paren.py": {"ATT202"},                 # (CAUSAL) = ...
    "r4c_global_nonascii.py": {"ATT202"},              # a non-ASCII global
    "r5_nonascii_helper.py": {"ATT105"},               # def škala(d)
    "r6_ws.py": {"ATT501"},                            # F.dropout (x, p): space before (
    "r7_alias.py": {"ATT501"},                         # from ... import dropout as drop
    "r8_ws_exp.py": {"ATT302"},
    "r8_ws_repeat.py": {"ATT403"},
    "r8_ws_view.py": {"ATT401"},
    "r9_helper_other_caller.py": {"ATT201"},           # a helper's other caller is dropped
    # a second fuzzing round (mutated real files and fixtures, and reading the analyses)
    "r10_header_comment_import.py": {"ATT101", "ATT601"},  # comment header, then the import
    "r10b_header_comment_import_fix.py": {"ATT204"},    # (the fix needs torch's local name)
    "r11_import_after_colon.py": {"ATT101"},           # try: import torch.nn.functional as F
    "r12_helper_params_joined.py": set(),              # fill(s, m, v): -1e9 and 0.0 callers
    "r12b_helper_params_joined_att210.py": set(),      # the same for ATT210
    "r13_relevance_other_class.py": {"ATT207"},        # s + CAUSAL; Other.helper's name
    "r14_self_forward_call.py": {"ATT201"},            # self.forward(q, k, v, torch.tril(...))
    "r15_private_method.py": {"ATT101"},               # def __attend: not a dunder
    "r16_nested_class_forward.py": {"ATT502"},         # a class defined in a function
    "r16b_class_in_class_forward.py": {"ATT502"},      # a class defined in a class
    "r17_module_scope_group_factor.py": {"ATT403"},    # r = H // H_kv in another statement
    "r18_form_feed_def.py": {"ATT208"},                # \fdef at the top level
    "r19_attr_set_in_build.py": {"ATT601"},            # self.act = nn.Softmax() in build()
    "r19b_local_then_self.py": {"ATT204"},             # big = -1e9; self.fill_value = big
    "r20_self_attr_from_other_method.py": set(),       # self.scale set only in a setter
    # a third round
    "r21_caller_of_caller.py": set(),                  # fill <- small <- tiny (args evaluated through)
    "r21b_module_level_caller.py": set(),              # Y = small(None, None, 0.0) at module level
    "r22_same_name_classes.py": {"ATT201"},            # two classes Attn: call sites per class
    "r23_matmul_no_space_after.py": {"ATT207"},        # q @k
    "r24_hex_fill.py": {"ATT204"},                     # masked_fill(m, -0xFFFFFF)
    "r25_tuple_target_attr.py": {"ATT101", "ATT301"},  # self.sm, self.drop = nn.Softmax(1), ...
    "r26_alias_then_attr.py": {"ATT204"},              # NEG = -1e9; self.neg = NEG
    "r26b_alias_chain.py": {"ATT204"},                 # BIG = -1e9; NEG = BIG
    "r27_att603_enclosing_function.py": {"ATT603"},    # the walk skips the enclosing function
    "r28_hex_int_argument.py": {"ATT204"},             # -0xFFFF as a method argument (was ATT001)
    # a fourth round
    "r33_computed_fill.py": {"ATT204"},                # masked_fill(mask, -1000 * 1000)
    "r34_method_called_from_function.py": {"ATT101"},  # eager(self, ...) calls self.attend
    "r35_module_method_in_helper.py": {"ATT101"},      # eager(module, ...) calls module.prep
    "r35b_self_method_in_helper.py": {"ATT101"},       # the same, parameter named self
    "r36_two_self_sets_one_line.py": {"ATT301"},       # self.x = 1; self.act = sm
    "r37_attr_from_helper_method.py": {"ATT301"},      # self.act = self.make_act()
    "r37b_attr_from_helper_function.py": {"ATT301"},   # self.act = make_act()
    "r38_constant_local_attr.py": {"ATT204"},          # NEG = -1e9; neg = NEG; self.fill = neg
    # a fifth round
    "r39_module_method_two_helpers_deep.py": {"ATT101"},  # forward -> eager -> inner -> module.prep
    "r40_local_chain_then_attr.py": {"ATT204"},        # big = -1e9; small = big; self.fill = small
    # found on torchtune: a division by a sum is a written-out softmax to the mask analysis
    "r41_sum_normalisation.py": {"ATT205"},
    # ATT401/402 report only in a run that forms attention: the split, the attention and the
    # merge each in a different method or function of the file
    "r42_split_helper_attention_in_sibling.py": {"ATT401"},
    "r42b_attention_through_module_binding.py": {"ATT402"},
    "r42c_attention_in_base_method.py": {"ATT401"},
    "r42d_attention_in_module_lambda.py": {"ATT402"},  # ATTEND = lambda q, k, v: ...
    # found by fuzzing that spread of split, attention and merge (a generator of 4,300 files)
    "r43_split_helper_module_alias.py": {"ATT401"},          # SPLIT = split_heads
    "r43b_merge_helper_module_alias.py": {"ATT402"},         # MERGE = merge_heads
    "r44_attend_in_subclass_called_from_base.py": {"ATT401"},  # Base.run: self.attend of Sub
    "r44b_attend_in_sibling_mixin.py": {"ATT401"},           # a mixin's self.attend of its sibling
    "r44c_split_in_subclass_called_from_base.py": {"ATT401"},  # Base.run: self.split of Sub
    "r45_alias_to_fn_seeded_by_import_alias.py": {"ATT401"},   # ATTEND = _impl (reads sdpa)
    "r45b_alias_to_fn_kept_as_caller.py": {"ATT401"},        # ATTEND = _impl (calls _core)
    "r45c_alias_to_flash_helper.py": {"ATT404"},             # the same with flash_attn_func
    "r46_softmax_module_read_in_base_method.py": {"ATT601"},   # self.act set in a subclass
    "r46b_softmax_module_read_off_parameter.py": {"ATT601"},   # mod.act(s) in a static method
}

#: selections each case is compared under: narrow ones change what is kept
_CASE_SELECTIONS = [("ALL",), ("ATT1",), ("ATT2",), ("ATT3",), ("ATT4",), ("ATT5",), ("ATT6",),
                    ("ATT101",), ("ATT204",), ("ATT210",), ("ATT301",), ("ATT403",), ("ATT502",),
                    ("ATT601",), ("ATT603",)]


@pytest.mark.parametrize("name", sorted(REGION_CASES))
def test_tester_cases_equal_whole_file(name, monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = (ROOT / "tests" / "regions_cases" / name).read_text(encoding="utf-8")
    for select in _CASE_SELECTIONS:
        enabled = resolve_selection(REGISTRY, [Layer(select=select)])
        whole, part = (lint_text(text, name, enabled, REGISTRY, regions=r).findings
                       for r in (False, True))
        assert [f.to_dict() for f in part] == [f.to_dict() for f in whole], select
        assert not any(f.code in ("ATT000", "ATT001") for f in whole), select
        if select == ("ALL",):
            assert REGION_CASES[name] <= {f.code for f in whole}


def test_no_regions_bypasses_the_cache(tmp_path):
    """``--no-regions`` checks the region parse, so it neither reads nor writes cache entries."""
    from attncheck.lint.engine import lint_paths

    src = tmp_path / "a.py"
    src.write_text((ROOT / "tests" / "regions_cases" / "r2_att204_triplequote_in_code.py")
                   .read_text(encoding="utf-8"), encoding="utf-8")
    cache = tmp_path / "cache"
    lint_paths([src], select=["ALL"], isolated=True, cache_dir=cache, regions=False)
    assert not list(cache.rglob("*.json")) or all("rules-" in p.name for p in cache.rglob("*.json"))
    first = lint_paths([src], select=["ALL"], isolated=True, cache_dir=cache)
    again = lint_paths([src], select=["ALL"], isolated=True, cache_dir=cache, regions=False)
    assert [f.to_dict() for f in first.findings] == [f.to_dict() for f in again.findings]
    assert "ATT204" in {f.code for f in first.findings}


_MLP = '''
class Mlp(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.inner = config.hidden_size // config.groups  # `groups` is the divisor of a width here
        self.fc = nn.Linear(config.hidden_size, self.inner)

    def forward(self, x):
        return self.fc(x)
'''

_ATTN = '''
class Attn(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.groups = config.groups{teach}
        self.q = nn.Linear(config.hidden_size, config.hidden_size)
        self.k = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):
        q, k = self.q(x), self.k(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.groups)
        return torch.softmax(scores, dim=-1)
'''


@pytest.mark.parametrize("mlp_first", [True, False])
@pytest.mark.parametrize("teach", [False, True])
@pytest.mark.parametrize("select", [("ATT102",), ("ALL",)])
def test_head_counts_by_structure_are_scoped_to_their_class(mlp_first, teach, select, monkeypatch):
    """``width // X`` makes ``X`` a head count only for the class whose ``__init__`` (or the
    function whose body) divides by it, not for the whole file: another class's division neither
    turns ``self.groups`` into a head count (ATT102 would then call the scale the head count), nor
    goes missing when a region parse drops that class, nor depends on the order of classes."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    attn = _ATTN.format(teach="\n        self.hd = config.hidden_size // config.groups" if teach else "")
    body = [_MLP, attn] if mlp_first else [attn, _MLP]
    text = "import math\n\nimport torch\nimport torch.nn as nn\n\n" + "\n".join(body) + "\n" + "\n".join(
        f"def filler_{i}(x):\n    return x + {i}\n\n" for i in range(10))
    enabled = resolve_selection(REGISTRY, [Layer(select=select)])
    whole, part = (lint_text(text, "s.py", enabled, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    att102 = [f for f in whole if f.code == "ATT102"]
    assert len(att102) == (1 if teach else 0)
    if teach:
        assert "head count" in att102[0].message
        assert text.splitlines()[att102[0].line - 1].strip().startswith("scores = q @ k")


#: files a region parse must treat exactly like a whole-file parse although something outside the
#: kept regions is wrong with them: (name, codes with ATT000 on, codes with ATT000 off)
_ODD_FILES = [
    # a syntax error in a function no rule needs: the whole parse fails, so nothing is linted
    ("r29_syntax_error_elsewhere.py", ["ATT000"], []),
    # a 1,000-term sum in an unrelated function: deep recursion, not an internal error
    ("r30_deep_expression_elsewhere.py", ["ATT101", "ATT601"], ["ATT101", "ATT601"]),
    # libcst parses b'a' 'b' and then refuses to build the node (CSTValidationError)
    ("r31_bytes_concat.py", ["ATT000"], []),
    # a group factor in a class body explains no repeat outside that class body
    ("r32_att403_class_body_factor.py", [], []),
    ("r32b_att403_two_class_bodies.py", [], []),
]


@pytest.mark.parametrize("name, with_att000, without_att000", _ODD_FILES)
def test_odd_files_equal_whole_file(name, with_att000, without_att000, monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = (ROOT / "tests" / "regions_cases" / name).read_text(encoding="utf-8")
    for ignore, expected in (((), with_att000), (("ATT000",), without_att000)):
        enabled = resolve_selection(REGISTRY, [Layer(select=("ALL",), ignore=ignore)])
        whole, part = (lint_text(text, name, enabled, REGISTRY, regions=r).findings
                       for r in (False, True))
        assert [f.to_dict() for f in part] == [f.to_dict() for f in whole], ignore
        assert [f.code for f in whole] == expected, ignore
    if with_att000 == ["ATT000"]:
        msg = lint_text(text, name, ALL, REGISTRY).findings[0].message
        assert msg.startswith("cannot parse: SyntaxError")


def test_code_nested_deeper_than_cpython_compiles_is_a_parse_error(monkeypatch):
    """A 5,000-term sum: CPython's compiler gives up (RecursionError at the default limit), and
    libcst's native parser would overflow the C stack on it (a segmentation fault, the whole run
    lost).  It is ATT000 in both modes, and nothing is linted when ATT000 is off."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = (ROOT / "tests" / "regions_cases" / "r30_deep_expression_elsewhere.py").read_text(encoding="utf-8")
    text = re.sub(r"y = x(\+x)+", "y = x" + "+x" * 5000, text)
    for ignore, codes in (((), ["ATT000"]), (("ATT000",), [])):
        enabled = resolve_selection(REGISTRY, [Layer(select=("ALL",), ignore=ignore)])
        for mode in (False, True):
            found = lint_text(text, "deep.py", enabled, REGISTRY, regions=mode).findings
            assert [f.code for f in found] == codes
            assert all("nested too deeply" in f.message for f in found)


@pytest.mark.parametrize("screen_in_pieces", [False, True])
def test_brackets_nested_deeper_than_the_tokenizer_allows_are_a_parse_error(monkeypatch,
                                                                            screen_in_pieces):
    """1,000 nested brackets: CPython's tokenizer refuses more than 200 levels, so no Python runs
    the file; libcst accepts it (and overflows the C stack a few thousand levels deeper), so
    it must not be asked."""
    from attncheck.lint import screen

    if screen_in_pieces:
        monkeypatch.setattr(screen, "PIECEWISE_ABOVE", 100)
    text = "import torch\n\nx = " + "[" * 1000 + "]" * 1000 + "\n"
    enabled = resolve_selection(REGISTRY, [Layer(select=("ALL",))])
    found = lint_text(text, "nested.py", enabled, REGISTRY).findings
    assert [(f.code, f.line) for f in found] == [("ATT000", 3)]
    assert "too many nested parentheses" in found[0].message


#: Known gaps (a fifth fuzzing round, left for the next session): with ``--select ATT204`` alone the
#: region parse misses a fill the mask analysis computes from a call or from names, a product split
#: over lines, or a binding the line-based search cannot see.  Under the default rules (and ALL)
#: these files agree (asserted): other triggers keep the code.  Each test xfails while its gap is
#: open and passes once fixed (then move the file into ``REGION_CASES``).  The lasting fix is for ATT204 to report only fills whose own text
#: is a large literal (or literal arithmetic), which the trigger then covers by construction.
_KNOWN_GAPS = sorted((ROOT / "tests" / "regions_cases" / "known_gaps").glob("*.py"))


@pytest.mark.parametrize("path", _KNOWN_GAPS, ids=lambda p: p.name)
def test_known_att204_gaps(path, monkeypatch):
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = path.read_text(encoding="utf-8")
    for select in (("ALL",), ("ATT2",)):
        enabled = resolve_selection(REGISTRY, [Layer(select=select)])
        whole, part = (lint_text(text, path.name, enabled, REGISTRY, regions=r).findings for r in (False, True))
        assert [f.to_dict() for f in part] == [f.to_dict() for f in whole], select
    enabled = resolve_selection(REGISTRY, [Layer(select=("ATT204",))])
    whole, part = (lint_text(text, path.name, enabled, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.code for f in whole] == ["ATT204"]
    if [f.to_dict() for f in part] != [f.to_dict() for f in whole]:
        pytest.xfail("known gap: --select ATT204 alone drops this fill's unit")


@pytest.mark.parametrize("pieces", [False, True])
def test_module_literals_are_kept_only_when_read(pieces, monkeypatch):
    """A generated module of thousands of literal bindings plus one attention function: the
    bindings match ATT204's trigger (``_123`` digit groups, ``-1e9``) but no rule reports on a
    bare literal, so only the ones kept code reads are kept (also when the file is indexed in
    pieces)."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    if pieces:
        monkeypatch.setattr(regions, "WHOLE_BELOW", 1_000)
        monkeypatch.setattr(regions, "PIECE", 2_000)
    consts = "".join(f"WEIGHT_{i} = {-1e9 if i % 3 else 0.5}\n" for i in range(2_000))
    text = ("import torch\nimport torch.nn.functional as F\n\n" + consts +
            "\n\ndef attention(q, k, v, mask):\n"
            "    s = q @ k.transpose(-2, -1) * WEIGHT_7\n"
            "    s = s.masked_fill(mask, WEIGHT_8)\n"
            "    return F.softmax(s, dim=-1) @ v\n")
    sel = regions.select(text, regions.triggers_of(engine.prefilter(text, [REGISTRY["ATT204"], REGISTRY["ATT101"]])))
    assert sel is not None and sel.kept_defs == ["attention"]
    kept = [line for line in sel.text.split("\n") if line.startswith("WEIGHT_")]
    assert kept == ["WEIGHT_7 = -1000000000.0", "WEIGHT_8 = -1000000000.0"]
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    assert "ATT204" in {f.code for f in whole}


def test_root_selection_keeps_what_an_imported_helper_runs(monkeypatch):
    """``roots``: the region of a helper another file imports — the helper, the helpers it
    calls, the constants and imports it reads, and a method any class has under an attribute
    name it reads (the caller's instance is looked up by class name); not its callers, nor
    the rest."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = ("import math\nimport torch\nimport numpy as np\n\nNEG = -1e9\nOTHER = 3\n\n"
            "def ones(L):\n    return torch.ones(L, L)\n\n"
            "def helper(module, L):\n    m = torch.tril(ones(L)) * NEG\n"
            "    return m * math.sqrt(module.width())\n\n"
            "def caller(x):\n    return helper(x, 4)\n\n"
            "class Block:\n    def __init__(self):\n        self.n = OTHER\n\n"
            "    def width(self):\n        return 8\n\n    def forward(self, x):\n        return x\n\n"
            "class Plain:\n    def forward(self, x):\n        return np.zeros(3)\n")
    sel = regions.select(text, (), roots=("helper",))
    assert sel is not None
    assert sel.kept_defs == ["ones", "helper", "Block"]
    assert sel.kept_methods == [None, None, ["__init__", "width"]]
    kept = {line for line in sel.text.split("\n") if line and not line.startswith((" ", '"""'))}
    assert kept == {"import math", "import torch", "NEG = -1e9", "OTHER = 3", "def ones(L):",
                    "def helper(module, L):", "class Block:"}
    # the ordinary selection (a trigger matching in the helper) keeps its caller, not the method
    assert regions.select(text, {"tril"}).kept_defs == ["ones", "helper", "caller"]


def test_head_views_outside_attention_keep_no_region(monkeypatch):
    """ATT401/402 need a run that forms attention: with them alone, a method whose run forms none
    (a classifier head viewing a projection) is dropped, and the helpers a run that forms
    attention calls are kept, wherever the view is."""
    monkeypatch.setattr(regions, "MIN_LINES", 0)
    text = (ROOT / "tests" / "regions_cases" / "r42_split_helper_attention_in_sibling.py").read_text(encoding="utf-8")
    sel = regions.select(text, regions.triggers_of([REGISTRY["ATT401"], REGISTRY["ATT402"]]))
    assert sel is not None and sel.kept_defs == ["Attention"]
    assert sel.kept_methods == [["__init__", "_split", "_attend", "forward"]]
    found = lint_text(text, "r42.py", {"ATT401", "ATT402"}, REGISTRY, regions=True).findings
    assert [(f.code, f.line) for f in found] == [("ATT401", 18)]
