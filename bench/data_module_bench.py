"""Time and peak memory of ``attncheck lint`` on generated data modules vs CPython's ``compile()``.

A generated data module is one list literal of numbers (``DATA = [1234567, 0.123456, …]``) with
no attention code.  Such a file must be screened in about ``compile()`` time and memory (the
syntax screen is the only work: no rule's trigger needs it, so libcst never parses it), and a
file above ``--max-file-size`` must be reported (ATT000) without being read.

Usage::

    python bench/data_module_bench.py                  # 1, 4, 10 and 40 MB
    python bench/data_module_bench.py --sizes 60 --no-limit-too   # above the default limit

Each figure is one fresh process (interpreter start-up included): wall time, and peak RSS from
``resource.getrusage(RUSAGE_CHILDREN)`` in a wrapper process that runs only that command.
``compile`` is ``python -c "compile(open(f).read(), f, 'exec')"``.
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile


def generate(path: str, megabytes: float, seed: int = 0) -> int:
    rng = random.Random(seed)
    parts = ["DATA = ["]
    size = len(parts[0])
    while size < megabytes * 1e6:
        s = f"{rng.randint(0, 10**7)}, {rng.random():.6f}, "
        parts.append(s)
        size += len(s)
    parts.append("]\n")
    with open(path, "w") as fh:
        fh.write("".join(parts))
    return os.path.getsize(path)


_WRAP = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
         "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
         "dt = time.perf_counter() - t; "
         "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode); "
         "print((p.stdout.strip().splitlines() or [''])[-1])")


def measure(cmd: list[str]) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MB, exit status, last output line) of ``cmd``, run under a fresh
    wrapper process so that the peak is this command's own."""
    out = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    dt, rss_kb, rc = out[0].split()
    return float(dt), int(rss_kb) / 1024, int(rc), out[1] if len(out) > 1 else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1, 4, 10, 40])
    ap.add_argument("--no-limit-too", action="store_true",
                    help="also lint files above the default limit (50 MB) with --max-file-size 0")
    args = ap.parse_args()
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for mb in sorted(args.sizes):
            f = os.path.join(d, f"data_{mb:g}mb.py")
            n = generate(f, mb)
            lint = [py, "-m", "attncheck", "lint", "--no-cache", "--isolated", f]
            c = measure([py, "-c", f"compile(open({f!r}).read(), {f!r}, 'exec')"])
            runs = [("lint (default limit)", lint)]
            if args.no_limit_too and n > 50e6:
                runs.append(("lint --max-file-size 0", lint[:-1] + ["--max-file-size", "0", f]))
            rows.append((f"{n / 1e6:.1f} MB", "compile()", *c))
            for label, cmd in runs:
                r = measure(cmd)
                rows.append((f"{n / 1e6:.1f} MB", label, *r, f"{r[0] / c[0]:.2f}×"))
    print(f"{'file':>8}  {'run':<24} {'s':>7} {'peak MB':>8} {'rc':>3}  ratio  output")
    for row in rows:
        size, label, dt, rss, rc, last = row[:6]
        ratio = row[6] if len(row) > 6 else ""
        print(f"{size:>8}  {label:<24} {dt:7.2f} {rss:8.0f} {rc:3d}  {ratio:>5}  {last[:70]}")


if __name__ == "__main__":
    main()
