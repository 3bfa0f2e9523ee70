"""The numeric-literal helpers of :mod:`attncheck.lint.analysis.syntax` read a literal's text
without ``ast.literal_eval``: their values must be Python's own for every literal spelling."""
from __future__ import annotations

import ast

import libcst as cst
from hypothesis import given
from hypothesis import strategies as st

from attncheck.lint.analysis.syntax import int_of, num_of


def _grouped(digits: str, cuts: list[int]) -> str:
    """``digits`` with ``_`` inserted before the positions in ``cuts`` (never first or last)."""
    out = list(digits)
    for c in sorted({c for c in cuts if 0 < c < len(digits)}, reverse=True):
        out.insert(c, "_")
    return "".join(out)


@st.composite
def int_literals(draw) -> str:
    value = draw(st.integers(min_value=0, max_value=10**40))
    base = draw(st.sampled_from(["", "0x", "0X", "0o", "0b"]))
    digits = {"": str, "0x": lambda v: format(v, "x"), "0X": lambda v: format(v, "X"),
              "0o": lambda v: format(v, "o"), "0b": lambda v: format(v, "b")}[base](value)
    digits = _grouped(digits, draw(st.lists(st.integers(0, 40), max_size=3)))
    sep = "_" if base and draw(st.booleans()) else ""
    return f"{base}{sep}{digits}"


@st.composite
def float_literals(draw) -> str:
    whole = _grouped(str(draw(st.integers(0, 10**12))), draw(st.lists(st.integers(0, 12), max_size=2)))
    frac = str(draw(st.integers(0, 10**6)))
    shape = draw(st.sampled_from(["w.f", "w.", ".f", "we", "w.fe"]))
    exp = f"e{draw(st.sampled_from(['', '-', '+']))}{draw(st.integers(0, 400))}"
    return {"w.f": f"{whole}.{frac}", "w.": f"{whole}.", ".f": f".{frac}", "we": f"{whole}{exp}",
            "w.fe": f"{whole}.{frac}{exp}"}[shape]


@given(int_literals(), st.booleans())
def test_int_literals_read_as_python_does(lit, negative):
    text = f"-{lit}" if negative else lit
    want = ast.literal_eval(text)
    assert int_of(cst.parse_expression(text)) == want
    assert num_of(cst.parse_expression(text)) == float(want)


@given(float_literals(), st.booleans())
def test_float_literals_read_as_python_does(lit, negative):
    text = f"-{lit}" if negative else lit
    assert num_of(cst.parse_expression(text)) == ast.literal_eval(text)
    assert int_of(cst.parse_expression(text)) is None


def test_leading_zeros_and_huge_integers():
    assert int_of(cst.parse_expression("00")) == 0
    assert int_of(cst.parse_expression("0_0")) == 0
    assert num_of(cst.parse_expression("1" + "0" * 400)) is None  # beyond float: no value
    assert int_of(cst.parse_expression("1" + "0" * 400)) == 10**400
