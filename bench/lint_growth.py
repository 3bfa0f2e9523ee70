"""Does the cost of a file grow with the number of files linted before it in one process?

Lints a tree cold in this process, 1 job (as ``attncheck lint --no-cache -j 1`` does), and
reports, per tenth of the run (files in the CLI's order):

- CPU time of the files and CPU time per kB of their source (``time.process_time``: the
  machine's other processes do not count);
- CPU time of Python's cyclic garbage collector, from :data:`gc.callbacks`, and per generation
  the number of passes, their time and the objects they collected;
- every ``--sample`` files: the objects the collector tracks (``len(gc.get_objects())``) and
  the sizes of the per-process caches of :mod:`attncheck.lint.project` (parsed callee regions
  and the characters they hold, callee files' top-level names);
- the callee parses (``project._parse``: an imported helper's region parsed by libcst) and
  their CPU time.

Usage::

    python bench/lint_growth.py --tree ~/.cache/attncheck-corpus/src/transformers-5.24.0/transformers/models
    python bench/lint_growth.py --tree DIR --every 8     # every 8th file, linted as a list
    python bench/lint_growth.py --tree DIR --json out.json   # also the per-file figures
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--every", type=int, default=1, help="lint every N-th file only (as a "
                    "list of files: an import resolves only to a linted file)")
    ap.add_argument("--sample", type=int, default=100,
                    help="count tracked objects and cache sizes every N files (0: never)")
    ap.add_argument("--json", type=Path, help="write the per-file figures here")
    args = ap.parse_args(argv)

    from attncheck.lint import engine, project

    gc_totals = {g: [0, 0.0, 0] for g in range(3)}  # passes, CPU seconds, objects collected
    gc_events: list[tuple[int, int, float]] = []  # (file position, generation, CPU seconds)
    started: dict[int, float] = {}
    per_file: list[dict] = []
    samples: list[dict] = []
    callee = [0, 0.0]  # parses, CPU seconds (of the file being linted)

    def on_gc(phase: str, info: dict) -> None:
        g = info["generation"]
        if phase == "start":
            started[g] = time.process_time()
            return
        dt = time.process_time() - started.pop(g)
        t = gc_totals[g]
        t[0] += 1
        t[1] += dt
        t[2] += info["collected"]
        gc_events.append((len(per_file), g, dt))

    run_work, parse_callee = engine._run_work, project._parse

    def timed_parse(*a):
        t = time.process_time()
        try:
            return parse_callee(*a)
        finally:
            callee[0] += 1
            callee[1] += time.process_time() - t

    def timed_work(w, registry=None):
        t = time.process_time()
        rep = run_work(w, registry)
        per_file.append({"path": w.src.display, "cpu": time.process_time() - t,
                         "bytes": os.path.getsize(w.src.path) if w.src.path else 0,
                         "callee_parses": callee[0], "callee_cpu": callee[1]})
        callee[:] = [0, 0.0]
        if args.sample and len(per_file) % args.sample == 0:
            samples.append({"file": len(per_file), "tracked": len(gc.get_objects()),
                            "callee_regions": len(project._LOADED),
                            "callee_chars": sum(n for _, _, n in project._LOADED.values()),
                            "callee_names": len(project._NAMES)})
        return rep

    files = sorted(str(p) for p in args.tree.rglob("*.py"))[:: max(1, args.every)]
    targets = [str(args.tree)] if args.every <= 1 else files
    engine._run_work, project._parse = timed_work, timed_parse
    gc.callbacks.append(on_gc)
    t0 = time.process_time()
    try:
        result = engine.lint_paths(targets, jobs=1, cache_dir=None, isolated=True)
    finally:
        gc.callbacks.remove(on_gc)
        engine._run_work, project._parse = run_work, parse_callee
    total = time.process_time() - t0

    n = len(per_file)
    print(f"{args.tree}: {n} files, {len(result.findings)} findings, {total:.1f} s CPU, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'tenth':>5} {'files':>6} {'CPU s':>7} {'ms/kB':>7} {'GC s':>6} {'callee parses':>14}"
          f" {'their s':>8}")
    for d in range(10):
        a, b = d * n // 10, (d + 1) * n // 10
        rows = per_file[a:b]
        cpu = sum(r["cpu"] for r in rows)
        kb = sum(r["bytes"] for r in rows) / 1024 or 1
        gc_s = sum(dt for pos, _, dt in gc_events if a < pos <= b)
        print(f"{d:>5} {b - a:>6} {cpu:>7.2f} {1000 * cpu / kb:>7.2f} {gc_s:>6.2f} "
              f"{sum(r['callee_parses'] for r in rows):>14} "
              f"{sum(r['callee_cpu'] for r in rows):>8.2f}")
    for g, (count, secs, collected) in gc_totals.items():
        print(f"GC generation {g}: {count} passes, {secs:.2f} s, {collected} objects collected")
    shown = samples[:: max(1, len(samples) // 10)]
    for s in shown + [s for s in samples[-1:] if s not in shown]:
        print("after file {file}: {tracked} tracked objects, {callee_regions} callee regions "
              "({callee_chars} characters), {callee_names} callee files' names".format(**s))
    if args.json:
        args.json.write_text(json.dumps({"files": per_file, "gc": gc_totals, "gc_events": gc_events,
                                         "samples": samples, "cpu": total}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
