"""One analysis of this checkout against the same analysis of another checkout, in one process.

Usage (from this checkout)::

    PYTHONPATH=$PWD python bench/analysis_ab.py files.txt --other <checkout> [--module masks]
        [--repeat 2]

Each listed file is linted once (default rules, the listed files as one project, as the CLI
does); wherever the engine asks for the analysis, ``analyze`` of this checkout's
``attncheck/lint/analysis/<module>.py`` and of the other checkout's file run each on a fresh
:class:`~attncheck.lint.context.FileContext` of the same parsed module, in alternating order,
``--repeat`` times; CPU time of each is summed.  Only that module is loaded from the other
checkout (its imports resolve to this one), so the two may differ only in that file.  The
machine's drift between runs minutes apart (several tens of percent on a shared machine) is
spread over both sides file by file.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import time

from attncheck.lint.context import FileContext
from attncheck.lint.engine import Layer, lint_text, resolve_selection
from attncheck.lint.project import Project
from attncheck.lint.rule import all_rules


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("listing")
    ap.add_argument("--other", required=True, help="the checkout to compare with")
    ap.add_argument("--module", default="masks", help="analysis module (masks, provenance)")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    this = importlib.import_module(f"attncheck.lint.analysis.{a.module}")
    name = f"attncheck.lint.analysis._other_{a.module}"
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(a.other, "attncheck", "lint", "analysis", f"{a.module}.py"))
    other = importlib.util.module_from_spec(spec)
    sys.modules[name] = other  # dataclasses look their module up
    spec.loader.exec_module(other)
    run_this = this.analyze
    cpu = {"this": 0.0, "other": 0.0}
    calls = [0]

    def timed(ctx):
        order = [("this", run_this), ("other", other.analyze)]
        if calls[0] % 2:
            order.reverse()
        calls[0] += 1
        for _ in range(a.repeat):
            for side, analyze in order:
                fresh = FileContext(ctx.module, ctx.source, ctx.display_path, ctx.line_offset,
                                    ctx.settings, ctx.project, ctx.path)
                t = time.process_time()
                analyze(fresh)
                cpu[side] += time.process_time() - t
                fresh.close()
        return run_this(ctx)

    this.analyze = timed
    registry = all_rules()
    enabled = resolve_selection(registry, [Layer()])
    paths = [p for p in open(a.listing, encoding="utf-8").read().split("\n") if p]
    project = Project(paths, [])
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as fh:
            lint_text(fh.read(), p, enabled, registry, project=project, path=p)
    print(f"{a.module}.analyze over {calls[0]} files: this {cpu['this']:.3f} s, "
          f"other {cpu['other']:.3f} s, ratio {cpu['this'] / cpu['other']:.3f}")


if __name__ == "__main__":
    main()
