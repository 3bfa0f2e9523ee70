"""The wheel ships the rule catalog, and an installed (non-editable) copy can explain rules.

Builds with ``pip wheel . --no-deps --no-build-isolation`` (hatchling from the dev extra; no
network), installs the wheel with ``pip install --no-deps --no-index --target`` into a temporary
directory and runs ``python -m attncheck`` from there with that directory first on the path.
"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    (whl,) = out.glob("attncheck-*.whl")
    return whl


def test_wheel_contains_rule_pages(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    pages = sorted(p.name for p in (ROOT / "rules").glob("ATT*.md"))
    assert "ATT000.md" in pages
    missing = [p for p in pages if f"attncheck/_rules/{p}" not in names]
    assert not missing
    assert "attncheck/lint/engine.py" in names and "attncheck/__main__.py" in names
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "attncheck = attncheck.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_wheel_explains_rules(wheel, tmp_path):
    target = tmp_path / "site"
    p = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
         str(target), str(wheel)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    env = dict(os.environ, PYTHONPATH=str(target), NO_COLOR="1")
    where = subprocess.run(
        [sys.executable, "-c", "import attncheck, attncheck.lint.catalog as c; "
                               "print(attncheck.__file__); print(c.rules_dir())"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert where.returncode == 0, where.stderr
    init, rules_dir = where.stdout.split()
    assert Path(init).is_relative_to(target)
    assert Path(rules_dir) == target / "attncheck" / "_rules"
    r = subprocess.run([sys.executable, "-m", "attncheck", "explain", "ATT000"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (ROOT / "rules" / "ATT000.md").read_text()
    r = subprocess.run([sys.executable, "-m", "attncheck", "--version"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r.returncode == 0 and "attncheck" in r.stdout
