"""Dynamic-check overhead: wall time of ``attncheck.check``'s default suite on the textbook
MultiHeadAttention layer (fixtures/lint/correct/textbook_mha.py: d_model 512, 8 heads), as a
multiple of one forward+backward of the same layer at L=128, B=2 on CPU.

    python bench/dynamic_bench.py [--repeat 7] [--baseline-threads 1] [--max-examples N] [--json]

The suite runs a layer this small on one intra-op thread
(``attncheck.dynamic.runner.single_thread_for_small_models``), and so does the baseline unless
``--baseline-threads`` says otherwise (0: torch's default): the ratio then compares work, not
thread scheduling.  On a loaded machine a two-thread forward+backward of this layer swings
between 2x and 50x its one-thread time (threads waiting for each other at every op), which
makes any ratio to it meaningless.

Both are measured in the same run, interleaved, so that the load of a shared machine falls on
both alike: after one cold suite run (imports, lazy initialisation: reported apart), each of the
``--repeat`` rounds times three forward+backward passes (their median is the round's baseline)
and then one warm suite run.  The ratio reported is the median over the rounds of
suite / baseline (wall clock; process CPU time, which counts every thread, alongside).  Per-check
seconds are medians over the rounds, timed inside the suite runs (the first check also pays
the target's one-time detections: mask convention, cross-attention support, position terms).
Target: ≤ 15×.
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


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--max-examples", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--target-ratio", type=float, default=15.0)
    ap.add_argument("--baseline-threads", type=int, default=1,
                    help="intra-op threads of the forward+backward baseline (0: torch's default)")
    args = ap.parse_args(argv)

    import torch

    import attncheck
    from attncheck.dynamic.runner import run_checks
    from attncheck.dynamic.targets import target as make_target

    MHA = load_textbook()
    torch.manual_seed(0)
    layer = MHA(d_model=512, num_heads=8)
    x = torch.randn(2, 128, 512)

    default_threads = torch.get_num_threads()
    baseline_threads = args.baseline_threads or default_threads

    def fwd_bwd():
        torch.set_num_threads(baseline_threads)
        try:
            out, _ = layer(x, x, x)
            out.sum().backward()
            layer.zero_grad(set_to_none=True)
        finally:
            torch.set_num_threads(default_threads)

    per_check: dict[str, list[float]] = {}

    def suite():
        # attncheck.check(layer, device="cpu") with a progress callback timing each check
        marks = [time.perf_counter()]

        def on_result(res):
            now = time.perf_counter()
            per_check.setdefault(res.check, []).append(now - marks[-1])
            marks.append(now)

        return run_checks(make_target(layer), device="cpu", max_examples=args.max_examples,
                          on_result=on_result)

    fwd_bwd()
    _, cold, _ = _timed(lambda: attncheck.check(layer, device="cpu",
                                                max_examples=args.max_examples))
    per_check.clear()
    rounds = []
    rep = None
    for _ in range(max(1, args.repeat)):
        base = [_timed(fwd_bwd)[1:] for _ in range(3)]
        rep, wall, cpu = _timed(suite)
        b_wall = statistics.median(b[0] for b in base)
        b_cpu = statistics.median(b[1] for b in base)
        rounds.append({"forward_backward_s": b_wall, "forward_backward_cpu_s": b_cpu,
                       "suite_s": wall, "suite_cpu_s": cpu, "ratio": wall / b_wall,
                       "cpu_time_ratio": cpu / b_cpu})
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    ratio = med["ratio"]
    result = {
        "layer": "textbook MultiHeadAttention d_model=512 heads=8", "B": 2, "L": 128,
        "baseline_threads": baseline_threads, "default_threads": default_threads,
        "torch": torch.__version__,
        "rounds": len(rounds), **med, "ratio_min": min(r["ratio"] for r in rounds),
        "ratio_max": max(r["ratio"] for r in rounds), "suite_cold_s": cold,
        "target_ratio": args.target_ratio, "within_target": ratio <= args.target_ratio,
        "checks": {r.check: r.status for r in rep.results},
        "per_check_s": {k: statistics.median(v) for k, v in per_check.items()},
        "round_details": rounds,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"forward+backward (B=2, L=128, d_model=512, 8 heads, CPU, "
              f"{baseline_threads} thread(s)): {med['forward_backward_s'] * 1e3:.1f} ms "
              f"(median of the rounds)")
        print(f"default suite ({len(rep.results)} checks): {med['suite_s']:.2f} s "
              f"(median of {len(rounds)} rounds; cold first run {cold:.2f} s)")
        print(f"ratio: {ratio:.1f}x wall-clock (rounds {result['ratio_min']:.1f}-"
              f"{result['ratio_max']:.1f}x), {med['cpu_time_ratio']:.1f}x CPU time  "
              f"(target <= {args.target_ratio:g}x: {'OK' if ratio <= args.target_ratio else 'OVER'})")
        for k, v in result["per_check_s"].items():
            print(f"  {k:26s} {v * 1e3:7.1f} ms  {result['checks'][k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
