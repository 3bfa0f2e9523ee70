"""Cold lint against a bare libcst parse, interleaved in fresh processes (for a shared machine).

Usage::

    find <tree> -name '*.py' | sort | awk 'NR%25==1' > files.txt
    python bench/lint_interleaved.py files.txt --rounds 3
    python bench/lint_interleaved.py files.txt --other /path/to/other/checkout   # A/B

Each round runs, one after the other, a fresh process that parses every listed file with
``libcst.parse_module`` (the reference), one that lints them with ``lint_text`` (default rules,
one process, no cache, no start-up or output in the timed part), and with ``--other`` the same
lint from another checkout (``PYTHONPATH``).  Each process reports its own CPU time over the
timed loop only, so the load of other jobs falls on all of them alike within a round; the
ratios printed are per round and their median.  ``bench/lint_bench.py`` measures whole runs
(start-up, cache, output); ``bench/lint_stages.py`` splits one process's time by stage.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import sys, time
mode, listing = sys.argv[1], sys.argv[2]
paths = [p for p in open(listing, encoding="utf-8").read().split("\n") if p]
texts = [open(p, encoding="utf-8", errors="replace").read() for p in paths]
import libcst
if mode == "parse":
    t = time.process_time()
    for x in texts:
        try:
            libcst.parse_module(x)
        except Exception:
            pass
else:
    from attncheck.lint.engine import Layer, lint_text, resolve_selection
    from attncheck.lint.rule import all_rules
    registry = all_rules()
    enabled = resolve_selection(registry, [Layer()])
    t = time.process_time()
    for p, x in zip(paths, texts):
        lint_text(x, p, enabled, registry)
print(time.process_time() - t)
"""

ROOT = Path(__file__).resolve().parent.parent


def _cpu(mode: str, listing: str, root: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(root)}
    # ``python -c`` puts the working directory first on the path: run in the measured checkout
    r = subprocess.run([sys.executable, "-c", _CHILD, mode, os.path.abspath(listing)],
                       capture_output=True,
                       text=True, check=True, env=env, cwd=root)
    return float(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("listing", help="a file of paths, one per line")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--other", type=Path, help="another checkout to lint with, for an A/B ratio")
    args = ap.parse_args(argv)
    rows: list[dict[str, float]] = []
    for i in range(args.rounds):
        row = {"parse": _cpu("parse", args.listing, ROOT), "lint": _cpu("lint", args.listing, ROOT)}
        if args.other is not None:
            row["other"] = _cpu("lint", args.listing, args.other)
        rows.append(row)
        extra = f"  other {row['other']:.2f} s ({row['lint'] / row['other']:.3f}× it)" \
            if "other" in row else ""
        print(f"round {i + 1}: parse {row['parse']:.2f} s  lint {row['lint']:.2f} s "
              f"({row['lint'] / row['parse']:.3f}× parse){extra}")
    med = statistics.median(r["lint"] / r["parse"] for r in rows)
    print(f"median lint / parse: {med:.3f}")
    if args.other is not None:
        print(f"median lint / other's lint: "
              f"{statistics.median(r['lint'] / r['other'] for r in rows):.3f}")
        print(f"median other's lint / parse: "
              f"{statistics.median(r['other'] / r['parse'] for r in rows):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
