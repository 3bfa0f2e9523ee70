"""How much of a tree the region selection hands to libcst: kept lines per file and in total.

Usage::

    python bench/region_kept.py --tree DIR [--every 5] [--top 20] [--select ALL]

For every file (every N-th) a rule's trigger matches in, runs :func:`attncheck.lint.regions.select`
with the enabled rules' triggers, as the engine does, and counts the lines of the kept units (a
file the selection declines — small, or nothing to drop — counts whole).  Prints the total, the
share, the time the index and selection took, and the files keeping the most lines.  Nothing
is parsed by libcst.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from attncheck.lint import engine, regions
from attncheck.lint.engine import Layer, resolve_selection
from attncheck.lint.rule import all_rules


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--select", nargs="*", default=None, help="rule selectors (default rules)")
    args = ap.parse_args(argv)
    registry = all_rules()
    enabled = resolve_selection(registry, [Layer(select=tuple(args.select) if args.select else None)])
    rules = [registry[c] for c in sorted(enabled) if not getattr(registry[c], "engine_only", False)]
    files = sorted(args.tree.rglob("*.py"))[:: max(1, args.every)]
    rows = []
    seconds = 0.0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        active = engine.prefilter(text, rules)
        if not active:
            continue
        walking = [r for r in active if engine._walks(r)]
        t = time.perf_counter()
        sel = regions.select(text, regions.triggers_of(active),
                             walk=regions.triggers_of(walking) or ())
        seconds += time.perf_counter() - t
        n = text.count("\n") + 1
        rows.append((sel.kept_lines if sel is not None else n, n, path))
    kept = sum(r[0] for r in rows)
    total = sum(r[1] for r in rows)
    print(f"files: {len(files)}, with a trigger match: {len(rows)}; kept {kept:,} of {total:,} "
          f"lines ({kept / max(total, 1):.1%}); index + selection {seconds:.1f} s")
    for k, n, path in sorted(rows, key=lambda r: -r[0])[: args.top]:
        print(f"{k:7,} / {n:7,}  {k / n:5.0%}  {path.relative_to(args.tree)}")


if __name__ == "__main__":
    main()
