"""Annotations in the region selection's text: blanked where no rule or analysis reads them, their
names read by nothing, and the findings and fixes the same as with whole files."""
from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from attncheck.lint import engine, regions
from attncheck.lint.engine import Layer, lint_paths, lint_text, resolve_selection
from attncheck.lint.rule import all_rules

REGISTRY = all_rules()
ALL = resolve_selection(REGISTRY, [Layer(select=("ALL",))])

#: a file long enough to be selected, whose last function nothing needs
_DROPPED = "\n\ndef other(x):\n" + "    x = x + 1\n" * regions.MIN_LINES + "    return x\n"

_ATTN = '''import torch
import torch.nn.functional as F
from typing import Optional
from torch import Tensor


class Attn(torch.nn.Module):
    def __init__(self, d: int, heads: int = 8) -> None:
        super().__init__()
        self.d: int = d  # model width

    def forward(self, q: Tensor, k: Optional[
            Tensor] = None, v: "Tensor | None" = None, *args: int, **kw: dict[str, int]) -> Tensor:
        # scores of every query against every key
        s: Tensor = q @ k.transpose(-2, -1)  # (B, H, L_q, L_k)
        width: int
        p = F.dropout(F.softmax(s, dim=-1), 0.1)
        return p @ v

    def fallback(self, q: Tensor, k: Tensor, v: Tensor, kernel: "flash_attn" = None) -> Tensor:
        s = q @ k.transpose(-2, -1)
        return F.softmax(s, dim=-1) @ v
'''


def test_annotations_of_kept_code_are_blanked_with_the_same_findings_and_fixes(tmp_path):
    text = _ATTN + _DROPPED
    rules = [REGISTRY[c] for c in sorted(ALL) if not getattr(REGISTRY[c], "engine_only", False)]
    sel = regions.select(text, regions.triggers_of(engine.prefilter(text, rules)))
    assert sel is not None and sel.kept_methods == [["__init__", "forward", "fallback"]]
    out = sel.text.split("\n")
    cls = slice(6, _ATTN.count("\n"))  # the class's lines
    assert [len(x) for x in out[cls]] == [len(x) for x in text.split("\n")[cls]]
    assert "Optional" not in sel.text and "Tensor]" not in sel.text and "-> None" not in sel.text
    # an annotated assignment keeps its annotation (without, it would be an ``Assign``)
    assert "        s: Tensor = q @ k.transpose(-2, -1)  # (B, H, L_q, L_k)" in out
    assert "from torch import Tensor" not in out  # read only in annotations
    assert "# scores of every query against every key" in sel.text
    whole, part = (lint_text(text, "x.py", ALL, REGISTRY, regions=r).findings for r in (False, True))
    assert [f.to_dict() for f in part] == [f.to_dict() for f in whole]
    # ATT601 in forward; not in fallback, whose annotation names a fused kernel
    assert [f.line for f in whole if f.code == "ATT601"] == [17]
    assert any(f.code == "ATT501" and f.fix is not None for f in whole)  # dropout without training=
    fixed = {}
    for mode in (True, False):
        d = tmp_path / str(mode)
        d.mkdir()
        (d / "attn.py").write_text(text, encoding="utf-8")
        res = lint_paths([d], fix=True, unsafe_fixes=True, isolated=True, regions=mode,
                         cache_dir=tmp_path / "cache", select=["ALL"])
        fixed[mode] = (res.fixed, (d / "attn.py").read_text(encoding="utf-8"))
    assert fixed[True][0] >= 1 and "0.1, training=self.training)" in fixed[True][1]
    assert fixed[True] == fixed[False]


# ---- the blanking itself, on generated definitions

_TYPES = st.sampled_from(["int", "torch.Tensor", "Optional[torch.Tensor]", "tuple[int, ...]",
                          "'Tensor'", "int | None", "dict[str, list[int]]", "Literal['a', 1]"])
_GAPS = st.sampled_from([":", ": ", " : ", ":  "])


def _strip(tree: ast.AST) -> str:
    """``ast.dump`` with positions, without the annotations the selection blanks (and with a
    parameter's end at its name's end)."""
    for n in ast.walk(tree):
        if type(n) is ast.arg:
            n.annotation = None
            n.end_lineno, n.end_col_offset = n.lineno, n.col_offset + len(n.arg)
        elif type(n) is ast.FunctionDef:
            n.returns = None
    return ast.dump(tree, include_attributes=True)


@st.composite
def _definitions(draw) -> tuple[str, bool]:
    """A function with annotated parameters, return and assignments; whether every parameter's
    and the return annotation can be blanked (after ``:`` on the same line; a parameter's may
    span lines)."""
    params, blankable = [], True
    for i in range(draw(st.integers(1, 4))):
        t = draw(_TYPES)
        if draw(st.booleans()):
            t = t.replace(", ", ",\n        ", 1)  # over two lines, inside the parameter list
        if draw(st.integers(0, 5)) == 0:
            t, blankable = f"({t})", False
        params.append(f"p{i}{draw(_GAPS)}{t}" + (" = None" if draw(st.booleans()) else ""))
    params.sort(key=lambda p: p.endswith("= None"))  # no default before one without
    ret = draw(_TYPES)
    head = f"def attn({', '.join(params)}) -> {ret}:" if draw(st.booleans()) else \
        f"def attn({', '.join(params)}):"
    body = []
    for i in range(draw(st.integers(0, 3))):
        t = draw(_TYPES)
        body.append(f"    a{i}{draw(_GAPS)}{t} = p0" if draw(st.booleans()) else f"    a{i}: {t}")
    body.append("    return softmax(p0)")
    return "\n".join([head, *body]) + "\n", blankable


@settings(max_examples=60, deadline=None)
@given(_definitions())
def test_blanking_keeps_lines_columns_and_everything_but_the_annotations(case):
    src, blankable = case
    text = "import torch\n\n" + src + _DROPPED
    sel = regions.select(text, ("softmax",))
    assert sel is not None and sel.kept_defs == ["attn"]
    kept = sel.text.split("\n")
    n = len(text.split("\n")) - len(_DROPPED.split("\n")) + 1
    # the same line lengths; a changed character became a space
    for a, b in zip(text.split("\n")[:n], kept[:n]):
        assert len(a) == len(b) and all(x == y or y == " " for x, y in zip(a, b))
    assert _strip(ast.parse(sel.text).body[1]) == _strip(ast.parse(text).body[1])
    fn = ast.parse(sel.text).body[1]
    left = [a.annotation for a in fn.args.args if a.annotation is not None]
    assert fn.returns is None and bool(left) == (not blankable)
    # annotated assignments keep their annotations (``_strip`` compared them)


def test_annotations_with_calls_are_kept_and_keep_their_names():
    text = ("import torch\nfrom typing import Annotated\nfrom .meta import Field, Doc\n\n"
            "def attn(q: Annotated[int, Field(1)], k: Doc = None) -> torch.Tensor:\n"
            "    return q.softmax(-1)\n" + _DROPPED)
    sel = regions.select(text, ("softmax",))
    assert sel is not None
    assert "q: Annotated[int, Field(1)], k      = None)                :" in sel.text
    # names in an annotation that holds a call are still read (a rule's visitor may see the call)
    assert "from typing import Annotated" in sel.text
