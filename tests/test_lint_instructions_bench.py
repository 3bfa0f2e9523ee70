"""``bench/lint_instructions.py``: its child process lints and digests the findings (run natively
here; valgrind's forty-fold slowdown is for the bench), and the instruction counts are read from
cachegrind's summary and taken as the lint's minus the imports'."""
from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

from attncheck.lint.engine import Layer, lint_text, resolve_selection
from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("lint_instructions",
                                                  ROOT / "bench" / "lint_instructions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fixture_with_findings() -> Path:
    registry = all_rules()
    enabled = resolve_selection(registry, [Layer()])
    for p in sorted((ROOT / "fixtures").rglob("*.py")):
        if lint_text(p.read_text(), str(p), enabled, registry).findings:
            return p
    raise AssertionError("no fixture with a finding")


def test_child_digests_the_findings(tmp_path):
    bench = _bench()
    path = _fixture_with_findings()
    registry = all_rules()
    found = lint_text(path.read_text(), str(path), resolve_selection(registry, [Layer()]),
                      registry).findings
    digest = hashlib.sha256()
    for f in found:
        digest.update(repr(f.sort_key).encode())
        digest.update(f.message.encode())
    listing = tmp_path / "files.txt"
    listing.write_text(f"{path}\n")
    out = subprocess.run([sys.executable, "-c", bench._CHILD, "lint", str(listing)],
                         capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}).stdout.split()
    assert out == [digest.hexdigest()[:16]]
    assert out[0] != hashlib.sha256().hexdigest()[:16]  # not the digest of no findings


def test_counts_read_from_cachegrind_and_subtracted(monkeypatch):
    bench = _bench()
    counts = {"setup": "2,105,205,301", "lint": "6,552,047,871"}
    seen = []

    def fake_run(cmd, **kw):
        seen.append((cmd, kw["env"]["PYTHONHASHSEED"], kw["env"]["PYTHONPATH"]))
        mode = cmd[-2]
        return subprocess.CompletedProcess(
            cmd, 0, stdout="abcd\n" if mode == "lint" else "",
            stderr=f"==7== \n==7== I   refs:      {counts[mode]}\n")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    n, digest = bench.lint_instructions("files.txt", Path("/checkout"))
    assert (n, digest) == (6_552_047_871 - 2_105_205_301, "abcd")
    assert [c[0][:2] for c in seen] == [["valgrind", "--tool=cachegrind"]] * 2
    assert {(c[1], c[2]) for c in seen} == {("0", "/checkout")}


def test_without_valgrind_exits_2(monkeypatch, tmp_path):
    bench = _bench()
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    listing = tmp_path / "files.txt"
    listing.write_text("x.py\n")
    assert bench.main([str(listing)]) == 2
