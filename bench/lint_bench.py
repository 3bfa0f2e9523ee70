"""Lint throughput on a real codebase: attncheck cold / warm vs a bare libcst parse and ruff.

Default corpus: ``transformers/models`` of the transformers wheel, fetched with
``pip download --no-deps transformers==<version>`` into ``--download-dir`` when absent (the version
defaults to the installed one, else the latest).  ``--tree DIR`` uses an unpacked tree instead.

Reported in one run, every figure the wall time of a fresh process (interpreter start-up
included), peak RSS the largest single process of that measurement (``getrusage`` of the
children, so pool workers count one by one):

- files, lines;
- ``libcst.parse_module`` of every file (one process, no metadata) — the reference;
- the floors any CPython linter pays on the same files: stdlib ``ast.parse`` (a tree of Python
  objects) and ``compile()`` (no Python objects at all: attncheck's syntax screen alone);
- attncheck cold, 1 job and all cores (``--no-cache`` and an empty cache respectively);
- attncheck warm (every file a cache hit);
- attncheck cold, 1 job, whole-file parse (``--no-regions``) with ``--compare-whole``: its JSON
  output must equal the region run's;
- ``ruff check --no-cache --select E,F,W`` when ruff is installed;
- ratios to the libcst parse, of wall time and of CPU time (user + system of the measured
  process and its workers).  On a loaded machine the wall ratio moves with the other processes'
  demand between one measurement and the next; the CPU ratio of the 1-job runs moves much less and is
  the figure to compare across runs.  Targets (issue 7): cold 1 job ≤ 0.2×, warm ≤ 0.02×, RSS ≤ 500 MB.

Usage::

    python bench/lint_bench.py                       # download the wheel, whole tree
    python bench/lint_bench.py --tree scratch/corpus/transformers/transformers/models
    python bench/lint_bench.py --tree DIR --every 20 # every 20th file (quick iteration)
    python bench/lint_bench.py --tree DIR --json out.json --compare-whole
    python bench/lint_bench.py --tree DIR --pairs 3  # median of 3 adjacent parse / cold pairs
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

_PARSE = r"""
import ast, sys, warnings
warnings.simplefilter("ignore")
how = sys.argv[2]
if how == "libcst":
    import libcst
    parse = libcst.parse_module
elif how == "ast":
    parse = ast.parse
else:
    def parse(data):
        compile(data, "<bench>", "exec", dont_inherit=True)
paths = [l for l in open(sys.argv[1]).read().splitlines() if l]
n = 0
for p in paths:
    with open(p, "rb") as fh:
        data = fh.read()
    try:
        parse(data)
    except Exception:
        n += 1
print(n)
"""

_MEASURE = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "wb"), stderr=subprocess.PIPE)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss,
                  "rc": p.returncode, "stderr": p.stderr.decode("utf-8", "replace")[-2000:]}))
"""


def measure(cmd: list[str], out: Path) -> dict:
    """Run ``cmd`` in a fresh wrapper process; stdout goes to ``out``."""
    r = subprocess.run([sys.executable, "-c", _MEASURE, str(out), *cmd], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout)


def fetch_tree(download_dir: Path, version: str | None) -> Path:
    target = download_dir / "unpacked"
    models = target / "transformers" / "models"
    if models.is_dir():
        return models
    download_dir.mkdir(parents=True, exist_ok=True)
    wheels = sorted(download_dir.glob("transformers-*.whl"))
    if not wheels:
        spec = "transformers" if version is None else f"transformers=={version}"
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                        ":all:", "-d", str(download_dir), spec], check=True)
        wheels = sorted(download_dir.glob("transformers-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as z:
        members = [m for m in z.namelist() if m.startswith("transformers/models/")]
        z.extractall(target, members)
    return models


def installed_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("transformers")
    except Exception:  # noqa: BLE001
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, help="an unpacked tree to lint instead of the wheel's")
    ap.add_argument("--download-dir", type=Path,
                    default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                    / "attncheck-bench")
    ap.add_argument("--version", default=None, help="transformers version to download "
                    "(default: the installed one, else the latest)")
    ap.add_argument("--every", type=int, default=1, help="lint every N-th file only")
    ap.add_argument("--jobs", type=int, default=0, help="'all cores' job count (0 = usable cores)")
    ap.add_argument("--compare-whole", action="store_true",
                    help="also run a whole-file parse (--no-regions) and require equal output")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--pairs", type=int, default=1,
                    help="run the reference parse and the cold 1-job lint this many times, one "
                         "after the other (alternating which goes first), and report the median "
                         "of the per-pair CPU ratios: a shared machine's speed drifts between "
                         "runs minutes apart")
    args = ap.parse_args(argv)

    tree = args.tree or fetch_tree(args.download_dir, args.version or installed_version())
    files = sorted(str(p) for p in Path(tree).rglob("*.py"))[:: max(1, args.every)]
    lines = 0
    for f in files:
        with open(f, "rb") as fh:
            lines += fh.read().count(b"\n")
    jobs = args.jobs or len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else (args.jobs or os.cpu_count() or 1)

    work = Path(tempfile.mkdtemp(prefix="attncheck-bench-"))
    try:
        # the file list is the linted set: a directory of links keeps --every honest
        src = work / "src"
        src.mkdir()
        for i, f in enumerate(files):
            os.symlink(os.path.abspath(f), src / f"{i:05d}_{Path(f).name}")
        listing = work / "files.txt"
        listing.write_text("\n".join(str(src / n) for n in sorted(os.listdir(src))))
        cache = work / "cache"
        lint = [sys.executable, "-m", "attncheck", "lint", str(src), "--isolated", "--exit-zero",
                "--output-format", "json"]
        parse_cmd = [sys.executable, "-c", _PARSE, str(listing), "libcst"]
        cold_cmd = lint + ["--no-cache", "-j", "1"]
        rows: dict[str, dict] = {}
        rows["libcst parse"] = measure(parse_cmd, work / "parse.out")
        rows["attncheck cold, 1 job"] = measure(cold_cmd, work / "c1.json")
        pairs = [(rows["libcst parse"]["cpu"], rows["attncheck cold, 1 job"]["cpu"])]
        pair_outputs = []
        for i in range(1, max(1, args.pairs)):
            first, second = (cold_cmd, parse_cmd) if i % 2 else (parse_cmd, cold_cmd)
            a = measure(first, work / f"pair{i}a.out")
            b = measure(second, work / f"pair{i}b.out")
            cold, ref = (a, b) if first is cold_cmd else (b, a)
            pairs.append((ref["cpu"], cold["cpu"]))
            pair_outputs.append(work / (f"pair{i}a.out" if first is cold_cmd else f"pair{i}b.out"))
        rows["stdlib ast.parse (floor)"] = measure(
            [sys.executable, "-c", _PARSE, str(listing), "ast"], work / "ast.out")
        rows["compile() (floor: the syntax screen)"] = measure(
            [sys.executable, "-c", _PARSE, str(listing), "compile"], work / "compile.out")
        rows[f"attncheck cold, {jobs} jobs"] = measure(
            lint + ["--cache-dir", str(cache), "-j", str(jobs)], work / "cn.json")
        rows["attncheck warm"] = measure(lint + ["--cache-dir", str(cache), "-j", str(jobs)],
                                         work / "warm.json")
        if args.compare_whole:
            rows["attncheck cold, 1 job, whole files"] = measure(
                lint + ["--no-cache", "-j", "1", "--no-regions"], work / "whole.json")
        ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
        if Path(ruff).exists():
            rows["ruff check --select E,F,W"] = measure(
                [ruff, "check", "--no-cache", "--isolated", "--select", "E,F,W", "--exit-zero",
                 "--quiet", str(src)], work / "ruff.out")
        outs = {n: (work / n).read_bytes() for n in ("c1.json", "cn.json", "warm.json")}
        same = len(set(outs.values())) == 1 and all(
            p.read_bytes() == outs["c1.json"] for p in pair_outputs)
        whole_same = None
        if args.compare_whole:
            whole_same = (work / "whole.json").read_bytes() == outs["c1.json"]
        findings = len(json.loads(outs["c1.json"]))
    finally:
        if not os.environ.get("ATTNCHECK_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)

    base = rows["libcst parse"]["wall"]
    base_cpu = rows["libcst parse"]["cpu"]
    print(f"corpus: {tree}  files: {len(files)}  lines: {lines}  findings: {findings}  "
          f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'measurement':<40} {'wall s':>8} {'cpu s':>8} {'× libcst':>9} {'cpu ×':>7} "
          f"{'peak RSS MB':>12}")
    for name, r in rows.items():
        print(f"{name:<40} {r['wall']:>8.2f} {r['cpu']:>8.2f} {r['wall'] / base:>9.3f} "
              f"{r['cpu'] / base_cpu:>7.3f} {r['rss_kb'] / 1024:>12.0f}")
        if r["rc"] not in (0,):
            print(f"  exit status {r['rc']}: {r['stderr'][-500:]}")
    ratios = [cold / ref for ref, cold in pairs]
    if len(pairs) > 1:
        print(f"cold 1 job / libcst parse, CPU, {len(pairs)} adjacent pairs: "
              + ", ".join(f"{r:.3f}" for r in ratios) + f"; median {statistics.median(ratios):.3f}")
    print(f"identical output cold 1 job / cold {jobs} jobs / warm: {same}")
    if whole_same is not None:
        print(f"identical output regions / whole files: {whole_same}")
    if args.json:
        args.json.write_text(json.dumps({
            "tree": str(tree), "files": len(files), "lines": lines, "findings": findings,
            "jobs": jobs, "identical": same, "identical_whole": whole_same,
            "pairs_cpu": [{"parse": ref, "cold": cold} for ref, cold in pairs],
            "pairs_median_cpu_ratio": statistics.median(ratios),
            "rows": {k: {x: v for x, v in r.items() if x != "stderr"} for k, r in rows.items()},
        }, indent=2))
    ok = same and whole_same is not False and all(r["rc"] == 0 for r in rows.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
