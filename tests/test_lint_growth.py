"""``bench/lint_growth.py`` runs end to end on the handed cases: one row per linted file with its
size, the tracked-object samples at the asked interval, and the engine left as it was."""
from __future__ import annotations

import gc
import importlib.util
import json
from pathlib import Path

from attncheck.lint import engine, project
from attncheck.lint.engine import lint_paths

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "fixtures" / "cases"  # 23 files: quick


def test_lint_growth_smoke(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("lint_growth", ROOT / "bench" / "lint_growth.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run_work, parse_callee, callbacks = engine._run_work, project._parse, list(gc.callbacks)
    out = tmp_path / "growth.json"
    assert bench.main(["--tree", str(TREE), "--sample", "3", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    api = lint_paths([TREE], isolated=True, cache_dir=None)
    rows = data["files"]
    assert [r["path"] for r in rows] == api.files
    assert [r["bytes"] for r in rows] == [Path(p).stat().st_size for p in api.files]
    assert all(r["cpu"] >= 0 and r["callee_parses"] >= 0 for r in rows)
    assert [s["file"] for s in data["samples"]] == list(range(3, len(rows) + 1, 3))
    assert all(s["tracked"] > 0 for s in data["samples"])
    assert f"{len(rows)} files, {len(api.findings)} findings" in capsys.readouterr().out
    # the measurement leaves the engine and the collector as they were
    assert engine._run_work is run_work and project._parse is parse_callee
    assert gc.callbacks == callbacks
