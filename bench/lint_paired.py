"""Cold lint against a bare libcst parse, file by file, in two long-lived processes.

Usage::

    find <tree> -name '*.py' | sort | awk 'NR%3==1' > files.txt
    python bench/lint_paired.py files.txt                       # lint_text / libcst parse
    python bench/lint_paired.py files.txt --other /path/to/checkout   # this lint / that one's

Two worker processes read every listed file once.  For each file in turn, one parses it with
``libcst.parse_module`` (or, with ``--other``, lints it with the other checkout's
``lint_text``) and the other lints it with this checkout's ``lint_text`` (default rules, no
cache, no project); the order alternates from file to file, and each worker reports its own
CPU time for that file.  The sums are compared.  Because the two measurements of a file are
milliseconds apart, a shared machine whose speed drifts by a tenth or more between runs minutes
apart (``bench/lint_bench.py``'s whole-run figures, ``bench/lint_interleaved.py``'s rounds)
affects both sides alike.  What it leaves out: start-up, the command line's file discovery and
output, and imported helpers of other files (no project) — ``bench/lint_bench.py`` measures
those.  A file is linted once per worker (``--repeat`` > 1 takes the minimum of that many
tries, which warms the per-process caches of a file's own helpers).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

_WORKER = r"""
import sys, time
mode, listing = sys.argv[1], sys.argv[2]
paths = [p for p in open(listing, encoding="utf-8").read().split("\n") if p]
texts = [open(p, encoding="utf-8", errors="replace").read() for p in paths]
if mode == "parse":
    import libcst
    def run(i):
        try:
            libcst.parse_module(texts[i])
        except Exception:
            pass
else:
    from attncheck.lint.engine import Layer, lint_text, resolve_selection
    from attncheck.lint.rule import all_rules
    registry = all_rules()
    enabled = resolve_selection(registry, [Layer()])
    lint_text("import torch\n", "warm-up.py", enabled, registry)
    def run(i):
        lint_text(texts[i], paths[i], enabled, registry)
for line in sys.stdin:
    i = int(line)
    t = time.process_time()
    run(i)
    sys.stdout.write(f"{time.process_time() - t}\n")
    sys.stdout.flush()
"""


def _start(mode: str, listing: Path, pythonpath: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    return subprocess.Popen([sys.executable, "-c", _WORKER, mode, str(listing)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                            cwd=Path(listing).resolve().parent)


def _ask(p: subprocess.Popen, i: int) -> float:
    p.stdin.write(f"{i}\n")
    p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        raise SystemExit(f"a worker stopped at file {i}")
    return float(line)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("listing", type=Path, help="a file with one path per line")
    ap.add_argument("--other", type=Path, help="compare with this checkout's lint, not the parse")
    ap.add_argument("--repeat", type=int, default=1, help="tries per file (the minimum counts)")
    args = ap.parse_args(argv)
    paths = [p for p in args.listing.read_text(encoding="utf-8").split("\n") if p]
    here = str(Path(__file__).resolve().parents[1])
    a = _start("lint", args.listing, here)
    b = _start("lint", args.listing, str(args.other.resolve())) if args.other \
        else _start("parse", args.listing, here)
    sa = sb = 0.0
    try:
        for i in range(len(paths)):
            ta, tb = [], []
            for k in range(max(1, args.repeat)):
                if (i + k) % 2:
                    ta.append(_ask(a, i))
                    tb.append(_ask(b, i))
                else:
                    tb.append(_ask(b, i))
                    ta.append(_ask(a, i))
            sa += min(ta)
            sb += min(tb)
    finally:
        for p in (a, b):
            p.stdin.close()
            p.wait()
    other = f"lint of {args.other}" if args.other else "bare libcst parse"
    print(f"files: {len(paths)}; lint_text {sa:.2f} s, {other} {sb:.2f} s CPU: "
          f"ratio {sa / sb:.3f}")


if __name__ == "__main__":
    main()
