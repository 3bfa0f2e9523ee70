"""``bench/lint_bench.py`` runs end to end (on the fixtures, so it stays quick): every measurement
exits 0, the cold / warm / whole-file outputs are identical, and its finding count is the API's."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from attncheck.lint.engine import lint_paths

ROOT = Path(__file__).resolve().parent.parent


def test_lint_bench_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("lint_bench", ROOT / "bench" / "lint_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    rc = bench.main(["--tree", str(ROOT / "fixtures"), "--jobs", "2", "--compare-whole",
                     "--json", str(out)])
    data = json.loads(out.read_text())
    assert rc == 0
    assert data["identical"] is True and data["identical_whole"] is True
    files = sorted((ROOT / "fixtures").rglob("*.py"))
    assert data["files"] == len(files)
    assert data["lines"] == sum(p.read_bytes().count(b"\n") for p in files)
    rows = data["rows"]
    assert {"libcst parse", "stdlib ast.parse (floor)", "compile() (floor: the syntax screen)",
            "attncheck cold, 1 job", "attncheck cold, 2 jobs", "attncheck warm",
            "attncheck cold, 1 job, whole files"} <= set(rows)
    assert all(r["rc"] == 0 and r["wall"] > 0 for r in rows.values())
    api = lint_paths([ROOT / "fixtures"], isolated=True, cache_dir=None)
    assert data["findings"] == len(api.findings)
