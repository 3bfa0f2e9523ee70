"""Cold lint A/B by instructions executed (valgrind), not time: exact on a loaded machine.

Usage::

    python bench/lint_instructions.py files.txt --every 8 --other /path/to/other/checkout

On a machine shared with other jobs, CPU times of the same code vary by ±10 % between fresh
processes and depend on which runs first, so an A/B by time (``bench/lint_interleaved.py``,
medians of rounds) resolves a few percent at best.  The number of instructions a process
executes does not depend on the load: valgrind's ``cachegrind`` (``--cache-sim=no``) counts
them, about forty times slower than a native run.  For each checkout (this one, and
``--other``), two fresh processes run under it with ``PYTHONHASHSEED=0`` (set and dict
orders, hence the work, are the same from run to run): one imports the linter and reads every
listed file, the other also lints them with ``lint_text`` (default rules, one process, no
project, no cache); the difference is the lint's count.  Each lint process prints a digest of
its findings, so the A/B also says whether the two checkouts report the same.

Instructions are not time: a change that trades instructions for memory traffic (or the
reverse) moves the two differently, and C code (the libcst parser) and Python bytecode weigh
alike here.  Use it to see a change of a fraction of a percent that timings cannot, and confirm
what is kept with the timed A/B.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import hashlib, sys
lint, listing = sys.argv[1] == "lint", sys.argv[2]
paths = [p for p in open(listing, encoding="utf-8").read().split("\n") if p]
texts = [open(p, encoding="utf-8", errors="replace").read() for p in paths]
from attncheck.lint.engine import Layer, lint_text, resolve_selection
from attncheck.lint.rule import all_rules
registry = all_rules()
enabled = resolve_selection(registry, [Layer()])
if lint:
    digest = hashlib.sha256()
    for p, x in zip(paths, texts):
        for f in lint_text(x, p, enabled, registry).findings:
            digest.update(repr(f.sort_key).encode())
            digest.update(f.message.encode())
    print(digest.hexdigest()[:16])
"""

ROOT = Path(__file__).resolve().parent.parent
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _instructions(lint: bool, listing: str, root: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0"}
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                        "--cachegrind-out-file=/dev/null", sys.executable, "-c", _CHILD,
                        "lint" if lint else "setup", listing],
                       capture_output=True, text=True, check=True, env=env,
                       cwd=root)  # ``python -c`` puts the working directory first on the path
    m = _REFS.search(r.stderr)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{r.stderr[-2000:]}")
    return int(m.group(1).replace(",", "")), r.stdout.strip()


def lint_instructions(listing: str, root: Path) -> tuple[int, str]:
    """Instructions of linting the files of ``listing`` with the checkout at ``root``, and the
    digest of its findings."""
    base, _ = _instructions(False, listing, root)
    total, digest = _instructions(True, listing, root)
    return total - base, digest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", help="a file listing the paths to lint, one per line")
    ap.add_argument("--every", type=int, default=1, help="lint every N-th listed file")
    ap.add_argument("--other", type=Path, help="another checkout to compare with")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2
    paths = [p for p in Path(args.files).read_text(encoding="utf-8").split("\n") if p]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(paths[::args.every]) + "\n")
    try:
        mine, digest = lint_instructions(fh.name, ROOT)
        print(f"{len(paths[::args.every])} files; this checkout: {mine / 1e6:,.1f} M instructions "
              f"(findings {digest})")
        if args.other is not None:
            other, other_digest = lint_instructions(fh.name, args.other.resolve())
            same = "same findings" if other_digest == digest else "DIFFERENT findings"
            print(f"other checkout: {other / 1e6:,.1f} M instructions (findings {other_digest}, "
                  f"{same}); this / other: {mine / other:.4f}")
    finally:
        os.unlink(fh.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
