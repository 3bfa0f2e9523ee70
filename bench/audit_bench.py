"""Benchmark: `attncheck audit hf:gpt2` (tiny random GPT-2, eager + SDPA, every check) on CPU.

Reports separately (median of --repeat runs for the warm figures):

- process start: `python -c pass`;
- imports: `import torch, transformers, attncheck.audit.runner` in a fresh process;
- cold audit: the first audit in the process (imports the GPT-2 modeling code, lints its source);
- warm audit: later audits in the same process (lint results cached per file in-process);
- warm audit, lint cache cleared: the same with the lint re-run on every call.

Target: a tiny-model audit ≤ 1 s warm (every dynamic check, both backends; lint cached).  Usage::

    python bench/audit_bench.py [--spec hf:gpt2] [--repeat 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def _subprocess_seconds(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="hf:gpt2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    start = _subprocess_seconds("pass")
    imports = _subprocess_seconds("import torch, transformers, attncheck.audit.runner") - start

    import torch  # noqa: F401

    from attncheck.audit import runner

    t = time.perf_counter()
    rep = runner.audit(args.spec)
    cold = time.perf_counter() - t
    warm = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        rep = runner.audit(args.spec)
        warm.append(time.perf_counter() - t)
    nolint = []
    for _ in range(args.repeat):
        runner._LINT_CACHE.clear()
        t = time.perf_counter()
        runner.audit(args.spec)
        nolint.append(time.perf_counter() - t)
    per_check = {k: round(v, 4) for k, v in rep.timings.items()}
    out = {"spec": args.spec, "process_start_s": round(start, 3), "imports_s": round(imports, 3),
           "cold_audit_s": round(cold, 3), "warm_audit_s": round(statistics.median(warm), 3),
           "warm_audit_lint_uncached_s": round(statistics.median(nolint), 3),
           "target_warm_s": 1.0, "checks": len(rep.results), "ok": rep.ok,
           "warm_timings": per_check}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            if k != "warm_timings":
                print(f"{k:28s} {v}")
        print("per step (last warm run):", ", ".join(f"{k} {v:.3f}" for k, v in per_check.items()))
    return 0 if out["warm_audit_s"] <= 1.0 and rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
