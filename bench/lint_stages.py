"""Where a cold lint run spends its time: each stage of ``lint_text`` timed in one process.

Usage::

    find <tree> -name '*.py' | sort > files.txt
    python bench/lint_stages.py files.txt

Prints seconds per stage (libcst parse of the kept regions, the mask and provenance analyses,
the stdlib ``ast`` index of each file a rule's trigger matches in — which is also its syntax
screen —, the CPython syntax screen of the other files, region selection, prefilter, the walk
and rules) and, as the
reference, a bare ``libcst.parse_module`` of every file in the same process.  Default rules.
The stage timers wrap module functions, so run this, not the CLI, to read the split; the CLI's
own figures come from ``bench/lint_bench.py``.
"""
from __future__ import annotations

import collections
import sys
import time

import libcst as cst

from attncheck.lint import engine, regions
from attncheck.lint.analysis import masks, provenance
from attncheck.lint.engine import Layer, lint_text, resolve_selection
from attncheck.lint.rule import all_rules

T: collections.Counter = collections.Counter()


def timed(mod, name: str, key: str) -> None:
    f = getattr(mod, name)

    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[key] += time.perf_counter() - t

    setattr(mod, name, g)


def main(listing: str) -> None:
    timed(masks, "analyze", "mask analysis")
    timed(provenance, "analyze", "provenance analysis")
    timed(engine, "_syntax_check", "syntax screen")
    timed(regions, "index", "ast index (also the syntax screen of the files it reads)")
    timed(regions, "select", "region selection")
    timed(cst, "parse_module", "libcst parse of kept regions")
    timed(engine, "prefilter", "prefilter")
    timed(engine, "_visit", "visit (analyses + walk + rules)")
    registry = all_rules()
    enabled = resolve_selection(registry, [Layer()])
    paths = [p for p in open(listing, encoding="utf-8").read().split("\n") if p]
    texts = [open(p, encoding="utf-8", errors="replace").read() for p in paths]
    t0 = time.perf_counter()
    for p, text in zip(paths, texts):
        lint_text(text, p, enabled, registry)
    total = time.perf_counter() - t0
    t0 = time.perf_counter()
    for text in texts:
        try:
            cst._parser.entrypoints.parse_module(text)
        except Exception:  # noqa: BLE001 - a file libcst refuses costs what it cost
            pass
    reference = time.perf_counter() - t0
    walk = T["visit (analyses + walk + rules)"] - T["mask analysis"] - T["provenance analysis"]
    print(f"{'stage':34s} {'s':>7s} {'x ref':>7s}")
    print(f"{'bare libcst parse (reference)':34s} {reference:7.2f} {1:7.3f}")
    print(f"{'lint_text, default rules':34s} {total:7.2f} {total / reference:7.3f}")
    for k, v in T.most_common():
        if k.startswith("visit"):
            continue
        print(f"  {k:32s} {v:7.2f} {v / reference:7.3f}")
    print(f"  {'walk and rules':32s} {walk:7.2f} {walk / reference:7.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
