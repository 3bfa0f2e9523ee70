"""Every shell block of README.md and docs/*.md marked ``<!-- docs-test: run -->`` runs as
written, in a new virtual environment, from a copy of the checkout (slow: ``pytest -m slow``).

The environment is offline and fast: a venv without its own packages whose ``.pth`` file puts the
current environment's site-packages after its own, so ``pip install torch==2.13.0`` and the
other requirements are already satisfied, ``PIP_NO_INDEX=1``, and builds use the hatchling
already installed (no build isolation).  The install blocks (``pip install .``, then a wheel built
with ``pip wheel`` and installed from ``dist/``) put attncheck into the venv; the commands after
them run the installed console script.  Each distinct command runs once, in document order; its
exit status must be the documented one (see :mod:`docs_blocks`).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from docs_blocks import ROOT, all_marked_blocks

pytestmark = pytest.mark.slow

#: ``pip install .``, ``pip install '.[extras]'``, ``pip install dist/attncheck-*.whl``
_INSTALLS_ATTNCHECK = re.compile(r"pip install\s+(\S*\.whl|['\"]?\.(\[|['\"]|\s|$))")


def _copy_checkout(dest: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0:
        for rel in filter(None, listed.stdout.split("\0")):
            src = ROOT / rel
            if src.is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
    else:  # an sdist: no git metadata
        shutil.copytree(ROOT, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".git", ".venv", "*.egg-info", "__pycache__", ".attncheck_cache", "dist", "build"))


def _venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    purelib = Path(sysconfig.get_paths(vars={"base": str(where), "platbase": str(where)})
                   ["purelib"])
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "_outer_environment.pth").write_text("\n".join(sorted(here)) + "\n")
    pip = where / "bin" / "pip"   # pip from the outer environment, run by the venv's python
    pip.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -m pip "$@"\n')
    pip.chmod(0o755)
    return where


def test_marked_doc_commands_run_as_written(tmp_path):
    checkout = tmp_path / "attncheck"
    checkout.mkdir()
    _copy_checkout(checkout)
    venv = _venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", NO_COLOR="1", COLUMNS="80")
    failures: list[str] = []
    done: set[str] = set()
    for block in all_marked_blocks():
        for cmd in block.commands:
            if cmd.line in done:
                continue
            done.add(cmd.line)
            p = subprocess.run(["bash", "-c", cmd.line], cwd=checkout, env=env,
                               capture_output=True, text=True, timeout=900)
            if p.returncode != cmd.expected_status:
                failures.append(f"{cmd.source}: `{cmd.line}` exited {p.returncode}, documented "
                                f"{cmd.expected_status}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
            elif cmd.expected_output is not None and \
                    [ln.rstrip() for ln in p.stdout.splitlines()] != cmd.expected_output:
                failures.append(f"{cmd.source}: `{cmd.line}` printed\n{p.stdout}\ndocumented\n"
                                + "\n".join(cmd.expected_output))
            if _INSTALLS_ATTNCHECK.match(cmd.line):   # attncheck is now the venv's own
                where = subprocess.run(["python", "-c", "import attncheck; print(attncheck.__file__)"],
                                       cwd=tmp_path, env=env, capture_output=True, text=True)
                if not where.stdout.startswith(str(venv)):
                    failures.append(f"{cmd.source}: after `{cmd.line}` attncheck is imported "
                                    f"from {where.stdout.strip() or where.stderr.strip()}")
    assert list((checkout / "dist").glob("attncheck-*.whl")), "no block built a wheel"
    assert not failures, "\n\n".join(failures)
