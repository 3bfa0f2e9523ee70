"""Suppression: noqa, attncheck: ignore[...], statement first line, file-ignore, add-noqa."""
from __future__ import annotations

import textwrap

import pytest
from engine_helpers import test_rules  # noqa: F401  (fixture)
from hypothesis import given
from hypothesis import strategies as st

from attncheck.lint.engine import lint_source
from attncheck.lint.suppression import add_noqa, parse_directives

SEL = ["ATT991", "ATT993"]  # literal-dim (warning) and info rule, both fire on x.softmax(1)


def lines_codes(src):
    return [(f.line, f.code) for f in lint_source(textwrap.dedent(src), select=SEL)]


@pytest.mark.parametrize("comment, remaining", [
    ("", ["ATT991", "ATT993"]),
    ("  # noqa", []),
    ("  # NOQA", []),
    ("  # noqa: ATT991", ["ATT993"]),
    ("  # noqa:ATT991,ATT993", []),
    ("  # noqa: ATT99", []),                 # prefix
    ("  # noqa: ATT9 explanation", []),      # trailing text after codes
    ("  # noqa: E501", ["ATT991", "ATT993"]),  # another tool's code
    ("  # type: ignore  # noqa: ATT993", ["ATT991"]),
    ("  # attncheck: ignore", []),
    ("  # attncheck: ignore[ATT991]", ["ATT993"]),
    ("  # attncheck: ignore[ATT991, ATT993]", []),
    ("  # attncheck:ignore[att99]", []),
])
def test_line_comments(test_rules, comment, remaining):
    assert [c for _, c in lines_codes(f"y = x.softmax(1){comment}\n")] == remaining


def test_noqa_inside_string_is_not_a_comment(test_rules):
    assert lines_codes("y = x.softmax(1); s = '# noqa'\n") == [(1, "ATT991"), (1, "ATT993")]


def test_statement_first_line(test_rules):
    src = """\
    y = foo(  # noqa: ATT991
        x.softmax(1),
        z.softmax(2),  # noqa: ATT993
    )
    w = foo(
        x.softmax(3),
    )  # noqa
    """
    # first-line comment covers the whole statement; a comment on a later line only that line;
    # a comment on the last line covers nothing else
    assert lines_codes(src) == [(2, "ATT993"), (6, "ATT991"), (6, "ATT993")]


def test_compound_statement_header_does_not_cover_body(test_rules):
    src = """\
    def f(x=a.softmax(1)):  # noqa
        return x.softmax(2)
    """
    assert lines_codes(src) == [(2, "ATT991"), (2, "ATT993")]


@pytest.mark.parametrize("directive, remaining", [
    ("# attncheck: file-ignore", []),
    ("# attncheck: file-ignore[ATT993]", [(3, "ATT991")]),
    ("# attncheck: file-ignore[ATT9]", []),
    ("x = 1  # attncheck: file-ignore[ATT991]", [(3, "ATT993")]),
])
def test_file_ignore(test_rules, directive, remaining):
    assert lines_codes(f"import torch\n{directive}\ny = x.softmax(1)\n") == remaining


_COMMENTS = ["", "  # noqa", "  # noqa: ATT991", "  # noqa: ATT9", "  # noqa: E501",
             "  # attncheck: ignore[ATT991]", "  # attncheck: ignore[ATT1]",
             "  # noqa: ATT993"]


@given(st.lists(st.sampled_from(_COMMENTS), min_size=1, max_size=8))
def test_suppression_property(comments):
    """ATT991 on line i is reported iff line i's comment does not cover it."""
    from engine_helpers import LiteralDimSoftmax

    from attncheck.lint.engine import lint_text

    src = "".join(f"y{i} = x.softmax({i + 1}){c}\n" for i, c in enumerate(comments))
    covering = {"  # noqa", "  # noqa: ATT991", "  # noqa: ATT9", "  # attncheck: ignore[ATT991]"}
    expected = [i + 1 for i, c in enumerate(comments) if c not in covering]
    out = lint_text(src, "p.py", frozenset({"ATT991"}), {"ATT991": LiteralDimSoftmax})
    assert [f.line for f in out.findings] == expected


def test_parse_directives():
    d = parse_directives("a = 1  # noqa: ATT101, ATT2\nb = 2  # noqa\n"
                         "# attncheck: file-ignore[ATT3]\n")
    assert d.lines == {1: frozenset({"ATT101", "ATT2"}), 2: None}
    assert d.file == frozenset({"ATT3"})
    assert d.suppressed(1, "ATT205") and not d.suppressed(1, "ATT102")
    assert d.suppressed(2, "ATT999") and d.suppressed(7, "ATT301")
    assert not d.suppressed(2, "ATT000")


def test_add_noqa_then_clean(test_rules):
    src = textwrap.dedent("""\
        y = x.softmax(1)
        z = x.softmax(2)  # noqa: E501
        s = '''
        ''' + str(x.softmax(3))
        w = foo(x,
                x.softmax(4))
        q = x.softmax(5)  # noqa
    """)
    findings = lint_source(src, select=SEL)
    new, n = add_noqa(src, findings)
    assert n == 4
    assert new.splitlines()[0] == "y = x.softmax(1)  # noqa: ATT991, ATT993"
    assert new.splitlines()[1] == "z = x.softmax(2)  # noqa: E501, ATT991, ATT993"
    assert new.splitlines()[3] == "''' + str(x.softmax(3))  # noqa: ATT991, ATT993"
    assert new.splitlines()[5] == "        x.softmax(4))  # noqa: ATT991, ATT993"
    assert lint_source(new, select=SEL) == []
    assert add_noqa(new, lint_source(new, select=SEL)) == (new, 0)


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_noqa_and_add_noqa_follow_python_line_endings(test_rules, eol):
    """Python ends a physical line at \\n, \\r\\n or a lone \\r, never at a form feed (which
    str.splitlines also breaks at): comments are read and written on the lines findings name."""
    body = ["import torch", "\fdef f(x):", "    y = x.softmax(1)", "    return y", ""]
    src = eol.join(body)
    found = lint_source(src, select=SEL)
    assert {(f.line, f.code) for f in found} == {(3, "ATT991"), (3, "ATT993")}
    new, n = add_noqa(src, found)
    assert n == 1
    assert new.split(eol)[2] == "    y = x.softmax(1)  # noqa: ATT991, ATT993"
    assert new.replace("  # noqa: ATT991, ATT993", "") == src     # nothing else changed
    assert lint_source(new, select=SEL) == []
    silenced = src.replace("softmax(1)", "softmax(1)  # noqa: ATT991")
    assert [f.code for f in lint_source(silenced, select=SEL)] == ["ATT993"]
