"""Dynamic-check overhead: wall time of ``attncheck.check``'s default suite on the textbook
MultiHeadAttention layer (fixtures/lint/correct/textbook_mha.py: d_model 512, 8 heads), as a
multiple of one forward+backward of the same layer at L=128, B=2 on CPU — both measured in the
same run (the ratio is what is compared; the machine's speed cancels out).

    python bench/dynamic_bench.py [--repeat 3] [--max-examples N] [--json]

Baseline: median of ``--repeat`` forward+backward passes (after one warm-up).  Both wall-clock
and process CPU time (``time.process_time``, less sensitive to other load on a shared machine)
ratios are reported.  Suite: median of
``--repeat`` warm runs of ``attncheck.check(layer, device="cpu")`` (the first, cold run — imports,
lazy initialisation — is reported separately).  Target: ≤ 30×.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_textbook():
    path = os.path.join(ROOT, "fixtures", "lint", "correct", "textbook_mha.py")
    spec = importlib.util.spec_from_file_location("_bench_textbook_mha", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.MultiHeadAttention


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-examples", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--target-ratio", type=float, default=30.0)
    args = ap.parse_args(argv)

    import torch

    import attncheck

    MHA = load_textbook()
    torch.manual_seed(0)
    layer = MHA(d_model=512, num_heads=8)
    x = torch.randn(2, 128, 512)

    def fwd_bwd():
        out, _ = layer(x, x, x)
        out.sum().backward()
        layer.zero_grad(set_to_none=True)

    fwd_bwd()
    base, base_cpu = [], []
    for _ in range(max(args.repeat, 3)):
        t0, c0 = time.perf_counter(), time.process_time()
        fwd_bwd()
        base.append(time.perf_counter() - t0)
        base_cpu.append(time.process_time() - c0)
    baseline = statistics.median(base)
    baseline_cpu = statistics.median(base_cpu)

    t0 = time.perf_counter()
    rep = attncheck.check(layer, device="cpu", max_examples=args.max_examples)
    cold = time.perf_counter() - t0
    runs, runs_cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        rep = attncheck.check(layer, device="cpu", max_examples=args.max_examples)
        runs.append(time.perf_counter() - t0)
        runs_cpu.append(time.process_time() - c0)
    suite = statistics.median(runs)
    suite_cpu = statistics.median(runs_cpu)
    per_check = {}
    for name in [r.check for r in rep.results]:
        t0 = time.perf_counter()
        attncheck.check(layer, checks=[name], device="cpu", max_examples=args.max_examples)
        per_check[name] = time.perf_counter() - t0
    ratio = suite / baseline
    result = {
        "layer": "textbook MultiHeadAttention d_model=512 heads=8", "B": 2, "L": 128,
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "forward_backward_s": baseline, "suite_s": suite, "suite_cold_s": cold,
        "ratio": ratio, "cpu_time_ratio": suite_cpu / baseline_cpu,
        "forward_backward_cpu_s": baseline_cpu, "suite_cpu_s": suite_cpu,
        "target_ratio": args.target_ratio,
        "within_target": ratio <= args.target_ratio,
        "checks": {r.check: r.status for r in rep.results}, "per_check_s": per_check,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"forward+backward (B=2, L=128, d_model=512, 8 heads, CPU): {baseline * 1e3:.1f} ms")
        print(f"default suite ({len(rep.results)} checks, warm median of {args.repeat}): "
              f"{suite:.2f} s  (cold first run {cold:.2f} s)")
        print(f"ratio: {ratio:.1f}x wall-clock, {suite_cpu / baseline_cpu:.1f}x CPU time  "
              f"(target <= {args.target_ratio:g}x: "
              f"{'OK' if ratio <= args.target_ratio else 'OVER'})")
        for k, v in per_check.items():
            print(f"  {k:15s} {v:6.2f} s  {result['checks'][k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
