"""The pytest plugin (``pytest --attncheck``) and the ``attncheck`` fixture.

A sample project (pyproject config, a correct and a leaky causal attention layer, a lint-clean and
a lint-buggy file, one ordinary test) is run with pytester: exact outcome counts with and without
``--attncheck``, with ``-k``, ``-x``, ``--lf``, ``--junitxml`` and pytest-xdist ``-n 2`` (in a
subprocess), and the fixture's failure message.
"""
from __future__ import annotations

import json
import re
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

# Import torch and the dynamic machinery *before* the in-process pytester runs: pytester restores
# sys.modules after each run, and dropping (then re-importing) torch's C extension crashes the
# interpreter at exit.
import torch  # noqa: F401

from attncheck.dynamic import runner as _runner  # noqa: F401
from attncheck.dynamic.base import all_checks

all_checks()  # imports the check modules now, for the same reason

pytest_plugins = ["pytester"]

LAYERS = '''
import torch
import torch.nn.functional as F
from torch import nn

import attncheck


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention on (B, L, d_model) through SDPA."""

    def __init__(self, d_model: int = 16, num_heads: int = 2, is_causal: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.is_causal = is_causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, L, E = x.shape
        q, k, v = self.qkv(x).split(E, dim=-1)
        q = q.view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal)
        return self.proj(y.transpose(1, 2).reshape(B, L, E))


class NoAttention(nn.Module):
    """A projection with no softmax / SDPA inside: attention checks cannot observe weights."""

    def __init__(self, d_model: int = 16):
        super().__init__()
        self.embed_dim = d_model
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.proj(x)


def make_leaky():
    """Declared causal, but the mask was forgotten: every position sees the future."""
    return attncheck.target(CausalSelfAttention(is_causal=False), causal=True)
'''

BUGGY_SCORES = '''\
import math

import torch


def attention(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(mask == 0, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v
'''

PYPROJECT = '''
[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.attncheck]
lint = ["attnpkg"]
targets = [
  { spec = "attnpkg/layers.py:CausalSelfAttention", causal = true, checks = ["shapes", "causality"] },
  "attnpkg.layers:make_leaky",
]
'''

CONFTEST = '''
from hypothesis import settings

settings.register_profile("sample", max_examples=4, deadline=None)
settings.load_profile("sample")
'''

PLAIN_TEST = '''
def test_plain():
    assert 1 + 1 == 2
'''

CHECKS_OPT = "--attncheck-checks=shapes,causality"
LEAKY = "attncheck::attnpkg.layers:make_leaky"
GOOD = "attncheck::attnpkg/layers.py:CausalSelfAttention"
EXPECTED_IDS = [
    "attncheck::lint::attnpkg/__init__.py",
    "attncheck::lint::attnpkg/buggy_scores.py",
    "attncheck::lint::attnpkg/layers.py",
    f"{GOOD}::shapes[cpu]",
    f"{GOOD}::causality[cpu]",
    f"{LEAKY}::shapes[cpu]",
    f"{LEAKY}::causality[cpu]",
]


def _keep_modules_outside(root):
    """A ``SysModulesSnapshot`` preserve-predicate: keep every module except the sample
    project's.  pytester's in-process runs otherwise drop every module imported during the run,
    and torch's lazily imported submodules (which register C++ operators on import) cannot be
    imported a second time."""
    root = str(root)

    def keep(name: str) -> bool:
        import sys

        mod = sys.modules.get(name)
        file = getattr(mod, "__file__", None) or ""
        return not (file.startswith(root) or name == "conftest")

    return keep


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """The sample project; restores the hypothesis profile the in-process runs change."""
    from _pytest.pytester import SysModulesSnapshot
    from hypothesis import settings

    keep = _keep_modules_outside(pytester.path)
    monkeypatch.setattr(pytest.Pytester, "_Pytester__take_sys_modules_snapshot",
                        lambda self: SysModulesSnapshot(preserve=keep), raising=False)
    monkeypatch.setattr(pytester, "_sys_modules_snapshot", SysModulesSnapshot(preserve=keep),
                        raising=False)
    profile = settings.get_current_profile_name()
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makeconftest(CONFTEST)
    pkg = pytester.mkpydir("attnpkg")
    (pkg / "layers.py").write_text(textwrap.dedent(LAYERS))
    (pkg / "buggy_scores.py").write_text(BUGGY_SCORES)
    tests = pytester.mkdir("tests")
    (tests / "test_plain.py").write_text(PLAIN_TEST)
    yield pytester
    settings.load_profile(profile)


def _ids(result: pytest.RunResult) -> list[str]:
    return [m.group(1) for line in result.outlines
            if (m := re.match(r"^(attncheck::\S+|tests/\S+) (PASSED|FAILED|SKIPPED)", line))]


def test_inert_without_option(project):
    # a subprocess, so that "torch was not imported" means something
    project.makeconftest(CONFTEST + textwrap.dedent('''
        import sys

        def pytest_sessionfinish(session):
            print("TORCH_IMPORTED=%s" % ("torch" in sys.modules))
    '''))
    result = project.runpytest_subprocess("-v", "-s")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "TORCH_IMPORTED=False" in out
    assert "attncheck:" not in out and "attncheck::" not in out  # no header line, no items
    # the plugin is loaded (marker registered, fixture available) but collects nothing
    markers = project.runpytest("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.attncheck:*"])


def test_collect_only_ids_and_header(project):
    result = project.runpytest("--attncheck", CHECKS_OPT, "--collect-only", "-q")
    ids = [ln for ln in result.outlines if ln.startswith("attncheck::")]
    assert ids == EXPECTED_IDS
    header = project.runpytest("--attncheck", CHECKS_OPT, "--collect-only")
    header.stdout.fnmatch_lines(["attncheck: * device: cpu*hypothesis profile 'sample' "
                                 "(max_examples=4)*"])


def test_counts_lint_text_and_junitxml(project):
    xml = project.path / "report.xml"
    result = project.runpytest("--attncheck", CHECKS_OPT, "-v", f"--junitxml={xml}")
    result.assert_outcomes(passed=6, failed=2)
    out = result.stdout.str()
    # lint failure in the CLI's concise format (path:line:col: CODE message, 1-based column)
    assert re.search(r"attnpkg/buggy_scores\.py:8:44: ATT204 mask value -1e9 ", out), out
    # the leaky layer's failure shows the check, its numbers and the leak map
    assert "causality: FAIL" in out
    assert "leak map" in out
    failed = {ln.split()[0] for ln in result.outlines if " FAILED" in ln and "::" in ln}
    assert failed == {"attncheck::lint::attnpkg/buggy_scores.py", f"{LEAKY}::causality[cpu]"}
    cases = {(c.get("classname"), c.get("name")) for c in ET.parse(xml).iter("testcase")}
    assert ("attncheck.lint", "attnpkg/buggy_scores.py") in cases
    assert ("attncheck.attnpkg.layers:make_leaky", "causality[cpu]") in cases
    assert len(cases) == 8
    # the report travels as a junitxml property; the checks used the active hypothesis profile
    leaky = next(c for c in ET.parse(xml).iter("testcase")
                 if c.get("name") == "causality[cpu]" and "make_leaky" in c.get("classname"))
    prop = next(p for p in leaky.iter("property") if p.get("name") == "attncheck_report")
    report = json.loads(prop.get("value"))
    assert report["max_examples"] == 4
    assert [r["status"] for r in report["results"]] == ["fail"]
    # no hypothesis example database written into the project
    assert not (project.path / ".hypothesis").exists()

    # --lf reruns exactly the two failures
    again = project.runpytest("--attncheck", CHECKS_OPT, "--lf", "-v")
    again.assert_outcomes(failed=2)
    assert sorted(_ids(again)) == sorted(failed)


def test_keyword_selection_and_exitfirst(project):
    result = project.runpytest("--attncheck", CHECKS_OPT, "-k", "causality", "-v")
    result.assert_outcomes(passed=1, failed=1)
    assert _ids(result) == [f"{GOOD}::causality[cpu]", f"{LEAKY}::causality[cpu]"]
    result = project.runpytest("--attncheck", CHECKS_OPT, "-x", "-v")
    result.assert_outcomes(passed=2, failed=1)  # test_plain, __init__.py, then buggy_scores.py
    result = project.runpytest("--attncheck", CHECKS_OPT, "-m", "attncheck", "-k", "lint")
    result.assert_outcomes(passed=2, failed=1)


def test_skip_unknown_check_and_bad_config(project):
    # a check that does not apply becomes a pytest skip with the check's reason; an unknown
    # check name fails with the runner's message
    project.makefile(".toml", pyproject=PYPROJECT.replace(
        '"attnpkg.layers:make_leaky",',
        '{ spec = "attnpkg/layers.py:NoAttention", id = "noattn", '
        'checks = ["normalization", "no-such-check"] },'))
    result = project.runpytest("--attncheck", "-k", "noattn", "-rsf")
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] attnpkg/layers.py:1: normalization: not observable*",
        "FAILED attncheck::noattn::no-such-check[[]cpu[]]*",
    ])
    result.stdout.fnmatch_lines([
        "attncheck: cannot run check 'no-such-check' on noattn [[]cpu[]]: "
        "ValueError: unknown check(s) no-such-check*"])
    # invalid configuration: a usage error naming the key
    project.makefile(".toml", pyproject=PYPROJECT.replace('lint = ["attnpkg"]', "lint = 3"))
    result = project.runpytest("--attncheck")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*lint*expected a list of strings*"])


def test_xdist_same_outcomes(project):
    pytest.importorskip("xdist")
    xml = project.path / "xdist.xml"
    result = project.runpytest_subprocess("--attncheck", CHECKS_OPT, "-n", "2", "-p", "xdist",
                                          f"--junitxml={xml}")
    result.assert_outcomes(passed=6, failed=2)
    cases = {(c.get("classname"), c.get("name")) for c in ET.parse(xml).iter("testcase")}
    assert ("attncheck.lint", "attnpkg/buggy_scores.py") in cases
    assert len(cases) == 8
    assert not (project.path / ".hypothesis").exists()


# ---------------------------------------------------------------------------------------------
# the fixture, in this process


def _layer(is_causal: bool):
    import torch.nn.functional as F
    from torch import nn

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_heads, self.head_dim = 2, 4
            self.qkv = nn.Linear(8, 24)

        def forward(self, x):
            B, L, E = x.shape
            q, k, v = (t.view(B, L, 2, 4).transpose(1, 2) for t in self.qkv(x).split(E, -1))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
            return y.transpose(1, 2).reshape(B, L, E)

    return Attn()


def test_fixture_assert_ok_passes_and_returns_report(attncheck):
    report = attncheck.assert_ok(_layer(True), checks=["causality"], causal=True)
    assert report["causality"].status == "pass"


def test_fixture_assert_ok_message(attncheck):
    with pytest.raises(AssertionError) as excinfo:
        attncheck.assert_ok(_layer(False), checks=["shapes", "causality"], causal=True)
    msg = str(excinfo.value)
    assert msg.startswith("attncheck: 1 of 2 check(s) failed")
    assert "causality: FAIL" in msg
    assert "shapes:" not in msg  # only failing checks are listed
    assert "leak map" in msg and "X" in msg
    assert "smallest failing example" in msg
    report = attncheck.check(_layer(False), checks="causality", causal=True)
    assert report["causality"].status == "fail"


def test_fixture_lint(attncheck, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(BUGGY_SCORES)
    findings = attncheck.lint(bad)
    assert [(f.line, f.col, f.code) for f in findings] == [(8, 43, "ATT204")]
    with pytest.raises(AssertionError, match=r"bad\.py:8:44: ATT204"):
        attncheck.assert_lint_clean(bad)
    with pytest.raises(FileNotFoundError):
        attncheck.lint(tmp_path / "missing.py")


def test_hypothesis_storage_kept_out_of_the_project(monkeypatch, tmp_path):
    """hypothesis caches constants under ./.hypothesis even with database=None; while attncheck
    drives it, that goes to a temp dir unless the user chose a storage directory."""
    import hypothesis.configuration as hconf

    from attncheck.pytest_plugin import hypothesis_storage_outside_project

    def where() -> Path:
        return Path(hconf.storage_directory("constants", intent_to_write=False).path)

    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    before = where()
    with hypothesis_storage_outside_project():
        inside = where()
    assert where() == before
    assert inside != before
    assert Path(tempfile.gettempdir()) in inside.parents
    # a storage directory the user chose is left alone
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path / "mine"))
    with hypothesis_storage_outside_project():
        assert where() == before  # (hypothesis read its home once; unchanged by attncheck)
