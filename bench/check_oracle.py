"""Check oracle bench: dynamic checks on generated attention modules, per-fault recall and false
failures on correct modules.

Each seed writes one small attention module (``tests/idioms/generator.py``), runs it against a
float64 ``F.scaled_dot_product_attention`` reference to learn whether it is buggy
(``tests/idioms/oracle.py``; variants whose execution contradicts their label are dropped and
counted), then runs ``attncheck.check`` on it with the hints its user would give
(``tests/idioms/check_oracle.py``).

    PYTHONPATH=$PWD python bench/check_oracle.py --n 300 [--start 0] [--show-misses 3]

Prints, per injected fault, verified variants and recall (a check that names the fault failed)
with the checks that fired, then false failures on correct variants (any check failing or
erroring), the faults excluded as invisible to dynamic checks, the dropped variants (a buggy
one whose numerics match the reference, a correct one that differs or that autograd refuses)
with the oracle's reasons, and seconds.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from idioms.check_oracle import FAULT_CHECKS, excluded as excluded_why, run  # noqa: E402
from idioms.generator import generate  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="number of seeds")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--show-misses", type=int, default=0, help="print this many misses per fault")
    ap.add_argument("--fault", default=None, help="force this fault code (or 'none') on every seed")
    ap.add_argument("--max-examples", type=int, default=3, help="hypothesis examples per check")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    hits, total = collections.Counter(), collections.Counter()
    fired = collections.defaultdict(collections.Counter)
    dropped, errors, excluded = collections.Counter(), [], collections.Counter()
    why_dropped = collections.Counter()
    false_failures, misses = [], collections.defaultdict(list)
    correct, seconds = 0, []
    force = {None: True, "none": False}.get(args.fault, args.fault)
    for seed in range(args.start, args.start + args.n):
        v = generate(seed, force)
        why = excluded_why(v)
        if why:
            excluded[(v.fault or "correct", why)] += 1
            continue
        o = run(v, max_examples=args.max_examples)
        if o.verdict.truth == "error":
            errors.append(o)
            continue
        if not o.kept:
            dropped[v.fault or "correct"] += 1
            why_dropped[o.verdict.why.split(":")[0]] += 1
            continue
        seconds.append(o.seconds)
        if v.fault is None:
            correct += 1
            if not o.ok:
                false_failures.append(o)
            continue
        total[v.fault] += 1
        hits[v.fault] += o.ok
        fired[v.fault].update(o.naming)
        if not o.ok:
            misses[v.fault].append(o)
    dt = time.perf_counter() - t0
    n_b = sum(total.values())
    print(f"{args.n} seeds in {dt:.1f} s (attncheck.check: median {_median(seconds):.2f} s, "
          f"max {max(seconds, default=0):.2f} s per module); verified: {n_b} buggy, {correct} correct; "
          f"dropped (label refuted by execution): {sum(dropped.values())} {dict(dropped)} "
          f"{dict(why_dropped)}; generator errors: {len(errors)}")
    print(f"{'fault':7} {'found':>6} {'of':>5} {'recall':>7}  checks that named it")
    for code in sorted(total):
        names = ", ".join(f"{c} {n}" for c, n in fired[code].most_common())
        print(f"{code:7} {hits[code]:6} {total[code]:5} {hits[code] / total[code]:7.3f}  {names}")
    print(f"{'all':7} {sum(hits.values()):6} {n_b:5} {sum(hits.values()) / max(n_b, 1):7.3f}")
    by_check = collections.Counter(c for o in false_failures for c in o.failed)
    print(f"false failures on correct variants: {len(false_failures)} of {correct}"
          + (f" {dict(by_check)}" if by_check else ""))
    if excluded:
        print("excluded (invisible to dynamic checks): "
              + "; ".join(f"{c} x{n}: {why}" for (c, why), n in excluded.items()))
    for o in errors[: max(args.show_misses, 3)]:
        print(f"\n--- ERROR {o.variant.describe()}\n{o.verdict.why}")
    if args.show_misses:
        for code, os_ in sorted(misses.items()):
            for o in os_[: args.show_misses]:
                print(f"\n--- MISS {code} (expected one of {FAULT_CHECKS[code]}); "
                      f"{o.variant.describe()}\n{_statuses(o)}\n{o.variant.source}")
        for o in false_failures[: args.show_misses]:
            print(f"\n--- FALSE {o.failed}; {o.variant.describe()}\n{_statuses(o)}\n{o.variant.source}")
    return 0


def _statuses(o) -> str:
    return "\n".join(f"  {s:5} {c}: {o.messages[c][:300]}" for c, s in o.statuses.items() if s != "pass")


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0.0


if __name__ == "__main__":
    raise SystemExit(main())
