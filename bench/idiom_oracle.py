"""Idiom oracle bench: per-rule recall and false findings on generated attention modules.

Each seed writes one small attention module (``tests/idioms/generator.py``), runs it against a
float64 ``F.scaled_dot_product_attention`` reference to learn whether it is buggy
(``tests/idioms/oracle.py``; variants whose execution contradicts their label are dropped and
counted), then lints its text with ``attncheck.lint_source``.

    PYTHONPATH=$PWD python bench/idiom_oracle.py --n 2000 [--start 0] [--show-misses 5]

Prints, per injected rule code, verified variants and recall (expected code reported), then
false findings on correct variants (any non-info code), extra codes on buggy variants, and the
number of dropped / erroring variants.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from idioms.generator import generate  # noqa: E402
from idioms.oracle import run  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="number of seeds")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--show-misses", type=int, default=0, help="print this many misses per rule")
    ap.add_argument("--fault", default=None, help="force this fault code on every seed")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    hits, total = collections.Counter(), collections.Counter()
    dropped, errors = collections.Counter(), []
    false_findings, extra = [], collections.Counter()
    misses = collections.defaultdict(list)
    correct = 0
    for seed in range(args.start, args.start + args.n):
        v = generate(seed, args.fault if args.fault else True)
        o = run(v)
        if o.verdict.truth == "error":
            errors.append(o)
            continue
        if not o.kept:
            dropped[v.fault or "correct"] += 1
            continue
        if v.fault is None:
            correct += 1
            if o.codes:
                false_findings.append(o)
            continue
        total[v.fault] += 1
        if o.ok:
            hits[v.fault] += 1
        else:
            misses[v.fault].append(o)
        for c in o.codes:
            if c != v.fault:
                extra[c] += 1
    dt = time.perf_counter() - t0
    print(f"{args.n} seeds in {dt:.1f} s; verified: {sum(total.values())} buggy, {correct} correct; "
          f"dropped (label refuted by execution): {sum(dropped.values())} {dict(dropped)}; "
          f"generator errors: {len(errors)}")
    print(f"{'rule':8} {'found':>6} {'of':>5} {'recall':>7}")
    for code in sorted(total):
        print(f"{code:8} {hits[code]:6} {total[code]:5} {hits[code] / total[code]:7.3f}")
    n_b = sum(total.values())
    print(f"{'all':8} {sum(hits.values()):6} {n_b:5} {sum(hits.values()) / max(n_b, 1):7.3f}")
    print(f"false findings on correct variants: {len(false_findings)} of {correct}"
          + (f" {dict(collections.Counter(c for o in false_findings for c in o.codes))}" if false_findings else ""))
    print(f"extra codes on buggy variants: {dict(extra)}")
    for o in errors[: max(args.show_misses, 3)]:
        print(f"\n--- ERROR {o.variant.describe()}\n{o.verdict.why}")
    if args.show_misses:
        for code, os_ in sorted(misses.items()):
            for o in os_[: args.show_misses]:
                print(f"\n--- MISS {code}: reported {o.codes}; {o.variant.describe()}\n{o.variant.source}")
        for o in false_findings[: args.show_misses]:
            print(f"\n--- FALSE {o.codes}; {o.variant.describe()}\n{o.variant.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
