"""Lint every fixture and compare the findings with its ``# expect:`` comments, exactly.

Fixtures: ``fixtures/lint/**/*.py`` and ``fixtures/cases/*.py`` (conventions in fixtures/README.md).
A line ``x = ...  # expect: ATT101, ATT204`` must raise exactly those codes with that start line;
files under ``fixtures/lint/correct/`` carry no expectation and must raise nothing.  The comparison
is restricted to codes of registered rules (``attncheck.lint.rule.all_rules()``), so expectations of
rules that are not written yet are ignored until the rule lands.  Correct fixtures are also
imported and run (their ``example()`` forward must return finite tensors).
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import io
import re
import sys
import tokenize
from pathlib import Path

import libcst
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attncheck.lint.engine import lint_source
from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORRECT = FIXTURES / "lint" / "correct"

_EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>.*)$")
_CODE = re.compile(r"ATT\d{3}")


def fixture_files() -> list[Path]:
    """Every fixture module: fixtures/lint/**/*.py and fixtures/cases/*.py, sorted."""
    files = sorted((FIXTURES / "lint").rglob("*.py")) + sorted((FIXTURES / "cases").glob("*.py"))
    return [f for f in files if "__pycache__" not in f.parts]


def fixture_id(path: Path) -> str:
    """Readable test id: the path under fixtures/ (e.g. ``lint/correct/nanogpt_causal.py``)."""
    return path.relative_to(FIXTURES).as_posix()


def parse_expectations(source: str) -> set[tuple[int, str]]:
    """(line, code) pairs from ``# expect: ATTnnn[, ATTnnn ...]`` comments, read with tokenize.

    Only real comments count (a ``# expect:`` inside a string literal is ignored).  Raises
    ``ValueError`` for an ``# expect:`` comment that names no ``ATTnnn`` code or has stray text.
    """
    found: set[tuple[int, str]] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        m = _EXPECT.search(tok.string)
        if not m:
            continue
        parts = [p.strip() for p in m.group("codes").split(",")]
        if not parts or not all(_CODE.fullmatch(p) for p in parts):
            raise ValueError(f"line {tok.start[0]}: malformed expectation {tok.string!r}")
        found.update((tok.start[0], p) for p in parts)
    return found


@functools.lru_cache(maxsize=None)
def lint_fixture(path: Path) -> tuple:
    """Findings of the default rules on one fixture file (cached: both test modules use them)."""
    return tuple(lint_source(path.read_text(encoding="utf-8"), str(path)))


def load_module(path: Path):
    """Import a fixture file under a unique module name (fixtures are not a package)."""
    name = "attncheck_fixture_" + re.sub(r"\W", "_", fixture_id(path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _fmt(pairs) -> str:
    return ", ".join(f"{line}:{code}" for line, code in sorted(pairs)) or "none"


FILES = fixture_files()


def test_fixture_tree_is_populated():
    """The suite would silently test nothing if the fixture directories moved."""
    assert len(list(CORRECT.glob("*.py"))) >= 10
    assert len(list((FIXTURES / "cases").glob("b*.py"))) >= 20


@pytest.mark.parametrize("path", FILES, ids=fixture_id)
def test_fixture_parses(path: Path):
    source = path.read_text(encoding="utf-8")
    ast.parse(source, filename=str(path))
    libcst.parse_module(source)
    parse_expectations(source)  # well-formed annotations


@pytest.mark.parametrize("path", FILES, ids=fixture_id)
def test_fixture_findings_match_expectations(path: Path):
    source = path.read_text(encoding="utf-8")
    expected = parse_expectations(source)
    if path.is_relative_to(CORRECT):
        assert not expected, "correct fixtures must not carry # expect: comments"
    registered = set(all_rules())
    expected = {(line, code) for line, code in expected if code in registered}
    findings = lint_fixture(path)
    actual = {(f.line, f.code) for f in findings if f.code in registered}
    missing, unexpected = expected - actual, actual - expected
    assert not missing and not unexpected, (
        f"{fixture_id(path)}: missing {_fmt(missing)}; unexpected {_fmt(unexpected)}\n"
        + "\n".join(f"  {f.line}:{f.col} {f.code} {f.message}" for f in findings)
    )


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors(item)


@pytest.mark.parametrize("path", sorted(CORRECT.glob("*.py")), ids=fixture_id)
def test_correct_fixture_runs(path: Path):
    """Import the correct fixture and run its ``example()`` forward: finite tensor outputs."""
    import torch

    torch.manual_seed(0)
    module = load_module(path)
    assert callable(getattr(module, "example", None)), "correct fixtures define example()"
    tensors = list(_tensors(module.example()))
    assert tensors, "example() must return the forward's output tensor(s)"
    for t in tensors:
        assert torch.isfinite(t).all(), f"non-finite output of shape {tuple(t.shape)}"
    dynamic = getattr(module, "DYNAMIC", None)
    if dynamic is not None:  # the dynamic checks instantiate PATH.py:NAME with no arguments
        target = getattr(module, dynamic["target"])
        assert dynamic["checks"] == "all" and dynamic["hints"]["kind"] in {"kernel", "layer"}
        assert callable(target) if dynamic["hints"]["kind"] == "kernel" else isinstance(target(), torch.nn.Module)


_codes = st.lists(st.integers(100, 699).map(lambda n: f"ATT{n}"), min_size=1, max_size=3, unique=True)


_markers = st.sampled_from(["#expect:", "# expect: ", "#  expect:"])


@given(st.dictionaries(st.integers(1, 30), _codes, max_size=8), _markers)
def test_parse_expectations_roundtrip(annotated: dict[int, list[str]], marker: str):
    """Annotations written on arbitrary lines are read back exactly; strings never count."""
    lines = []
    for n in range(1, 31):
        code = f"x{n} = {n}"
        if n in annotated:
            code += f"  {marker}{', '.join(annotated[n])}"
        elif n % 7 == 0:
            code = f"s{n} = '# expect: ATT999'"  # inside a string: not an expectation
        lines.append(code)
    expected = {(n, c) for n, codes in annotated.items() for c in codes}
    assert parse_expectations("\n".join(lines) + "\n") == expected


def test_parse_expectations_rejects_malformed():
    with pytest.raises(ValueError):
        parse_expectations("x = 1  # expect: missing-scale\n")
    with pytest.raises(ValueError):
        parse_expectations("x = 1  # expect:\n")
