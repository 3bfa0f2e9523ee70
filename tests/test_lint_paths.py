"""`attncheck lint` path handling: ``--force-exclude`` (ruff's semantics: exclude globs apply to
paths named explicitly, as pre-commit names them) and one report per file however it is spelled.

Each behaviour through click's CliRunner and through the console script in a subprocess.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from attncheck.cli import main

# ATT101: q·kᵀ reaches softmax unscaled (line 3, column 26)
UNSCALED = ("import torch\ndef attend(q, k, v):\n"
            "    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.attncheck]\nexclude = ["legacy", "*/generated/*"]\n')
    for rel in ("legacy/old.py", "src/generated/gen.py", "src/model.py", "build/out.py"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(UNSCALED)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _lint(*args: str):
    return CliRunner().invoke(main, ["lint", "--no-cache", *args])


def _reported(output: str) -> list[str]:
    return [line.split(":", 1)[0] for line in output.splitlines() if " ATT101 " in line]


def test_explicit_paths_are_linted_without_force_exclude(project):
    r = _lint("legacy/old.py", "src/generated/gen.py", "src/model.py", "build/out.py")
    assert r.exit_code == 1
    assert _reported(r.output) == ["build/out.py", "legacy/old.py", "src/generated/gen.py",
                                   "src/model.py"]


def test_force_exclude_applies_exclude_to_named_files(project):
    r = _lint("--force-exclude", "legacy/old.py", "src/generated/gen.py", "src/model.py",
              "build/out.py")
    assert r.exit_code == 1, r.output
    # legacy (config glob), */generated/* (config glob), build (default excluded directory)
    assert _reported(r.output) == ["src/model.py"]
    assert "in 1 of 1 file(s)" in r.output


def test_force_exclude_applies_to_named_directories_and_absolute_paths(project):
    r = _lint("--force-exclude", "legacy", str(project / "legacy" / "old.py"))
    assert r.exit_code == 0, r.output
    assert "All checks passed! (0 file(s) checked)" in r.output
    # a directory that is not excluded is still walked, and its excluded children skipped
    r = _lint("--force-exclude", "src")
    assert _reported(r.output) == ["src/model.py"]


def test_force_exclude_ignores_directories_above_the_project(tmp_path, monkeypatch):
    """Only the part of the path below the config's directory is matched: a project that lives
    in a directory named like a default exclude (``build``) is still linted."""
    root = tmp_path / "build" / "proj"
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.attncheck]\nexclude = ["legacy"]\n')
    (root / "m.py").write_text(UNSCALED)
    monkeypatch.chdir(root)
    r = _lint("--force-exclude", "m.py")
    assert _reported(r.output) == ["m.py"]


def test_the_same_file_spelled_four_ways_is_reported_once(project):
    spellings = ["src/model.py", "./src/model.py", str(project / "src" / "model.py"),
                 "src/generated/../model.py", "src"]
    r = _lint(*spellings)
    assert r.exit_code == 1
    assert _reported(r.output) == ["src/model.py"]   # the first spelling
    assert "Found 1 finding(s) in 1 of 1 file(s)." in r.output
    # reported under the first spelling given
    r = _lint("./src/model.py", "src/model.py")
    assert _reported(r.output) == ["./src/model.py"]


def test_a_symlink_to_a_linted_file_is_linted_once(project):
    link = project / "alias.py"
    link.symlink_to(project / "src" / "model.py")
    r = _lint("src/model.py", "alias.py")
    assert _reported(r.output) == ["src/model.py"]


MASK_FILL = ("import torch\n\n\ndef attend(q, k, v, mask):\n"
             "    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5\n"
             "    scores = scores.masked_fill(mask == 0, -1e9)\n"
             "    return torch.softmax(scores, dim=-1) @ v\n")


def test_fixes_are_computed_once_per_file_whatever_the_spellings(project):
    (project / "src" / "fill.py").write_text(MASK_FILL)
    r = _lint("--diff", "--unsafe-fixes", "src/fill.py", "./src/fill.py")
    assert r.exit_code == 1
    assert r.output.count("+++ b/src/fill.py") == 1
    assert "Would fix 1 finding(s) in 1 file(s)." in r.output
    r = _lint("--fix", "--unsafe-fixes", "src/fill.py", str(project / "src" / "fill.py"))
    assert "Fixed 1 finding(s)." in r.output
    assert "torch.finfo(scores.dtype).min" in (project / "src" / "fill.py").read_text()


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("attncheck")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "attncheck"]


def test_force_exclude_and_dedup_in_a_subprocess(project):
    env = dict(os.environ, NO_COLOR="1")
    args = ["lint", "--no-cache", "--force-exclude", "legacy/old.py", "build/out.py",
            "src/model.py", "./src/model.py", str(project / "src" / "model.py")]
    p = subprocess.run(_script() + args, capture_output=True, text=True, env=env,
                       cwd=project, timeout=120)
    assert p.returncode == 1, p.stderr
    assert _reported(p.stdout) == ["src/model.py"]
    assert p.stdout.rstrip().endswith("Found 1 finding(s) in 1 of 1 file(s).")


def test_pre_commit_hooks_pass_force_exclude():
    """The shipped hooks name files explicitly (pre-commit passes them), so they must apply the
    project's exclude patterns, as ruff's hooks do."""
    yaml = pytest.importorskip("yaml")   # PyYAML: installed with transformers (dev extra)
    hooks = yaml.safe_load((Path(__file__).resolve().parents[1] / ".pre-commit-hooks.yaml")
                           .read_text(encoding="utf-8"))
    entries = {h["id"]: h["entry"].split() for h in hooks}
    assert set(entries) == {"attncheck-lint", "attncheck-lint-fix"}
    for argv in entries.values():
        assert argv[:2] == ["attncheck", "lint"] and "--force-exclude" in argv
        # every option the hook passes is one `attncheck lint` accepts
        r = CliRunner().invoke(main, argv[1:] + ["--help"])
        assert r.exit_code == 0, r.output
