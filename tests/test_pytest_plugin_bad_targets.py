"""``pytest --attncheck``: a configured target whose spec cannot be resolved is ONE collection
error naming the spec and the reason (not one failing item per check); the other targets and
the lint items are still collected.  Runs the sample project of ``test_pytest_plugin`` with
pytester.
"""
from __future__ import annotations

import pytest
from test_pytest_plugin import PYPROJECT, project  # noqa: F401  (fixture)

pytest_plugins = ["pytester"]

BAD_TARGETS = PYPROJECT.replace(
    '"attnpkg.layers:make_leaky",',
    '"attnpkg/missing.py:Attention",\n'
    '  "attnpkg.layers:NoSuchLayer",\n'
    '  { spec = "attnpkg/needs_flash.py:FlashAttention", id = "flash", causal = true },')
NEEDS_FLASH = 'raise ImportError("No module named \'flash_attn\'")\n'


def _bad_project(project):
    project.makefile(".toml", pyproject=BAD_TARGETS)
    (project.path / "attnpkg" / "needs_flash.py").write_text(NEEDS_FLASH)


def test_unresolvable_targets_are_one_collection_error_each(project):  # noqa: F811
    _bad_project(project)
    result = project.runpytest("--attncheck", "--collect-only", "-q")
    result.assert_outcomes(errors=3)
    out = result.stdout.str()
    assert out.count("ERROR collecting") == 3
    result.stdout.fnmatch_lines([
        "*ERROR collecting attncheck*",
        "attncheck: cannot resolve target 'attnpkg/missing.py:Attention' (*pyproject.toml): "
        "target file not found: */attnpkg/missing.py",
    ])
    result.stdout.fnmatch_lines([
        "attncheck: cannot resolve target 'attnpkg.layers:NoSuchLayer' (*pyproject.toml): "
        "attnpkg.layers has no attribute 'NoSuchLayer' (available: *CausalSelfAttention*",
    ])
    result.stdout.fnmatch_lines([
        "attncheck: cannot resolve target 'attnpkg/needs_flash.py:FlashAttention' "
        "(*pyproject.toml): importing */attnpkg/needs_flash.py failed: "
        "ImportError: No module named 'flash_attn'",
    ])
    result.stdout.fnmatch_lines(["ERROR attncheck::attnpkg/missing.py:Attention",
                                 "ERROR attncheck::attnpkg.layers:NoSuchLayer",
                                 "ERROR attncheck::flash"])
    # no per-check items for the bad targets; the good target and the lint items remain
    ids = [ln for ln in result.outlines if ln.startswith("attncheck::")]
    assert ids == ["attncheck::lint::attnpkg/__init__.py",
                   "attncheck::lint::attnpkg/buggy_scores.py",
                   "attncheck::lint::attnpkg/layers.py",
                   "attncheck::lint::attnpkg/needs_flash.py",
                   "attncheck::attnpkg/layers.py:CausalSelfAttention::shapes[cpu]",
                   "attncheck::attnpkg/layers.py:CausalSelfAttention::causality[cpu]"]
    assert "Traceback" not in out


def test_a_run_with_a_bad_target_stops_at_collection_like_pytest(project):  # noqa: F811
    _bad_project(project)
    result = project.runpytest("--attncheck", "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*Interrupted: 3 errors during collection*"])
    # pytest's own switch still runs everything that was collected
    result = project.runpytest("--attncheck", "-q", "--continue-on-collection-errors",
                               "--attncheck-checks=shapes", "-k", "not lint")
    result.assert_outcomes(passed=2, errors=3)
