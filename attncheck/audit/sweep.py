"""``attncheck audit hf:all``: audit every model type of the installed transformers.

Each model type is audited in a worker process (``jobs`` of them, ``spawn`` start method); a type
that crashes its worker, raises, or runs past ``timeout`` seconds is recorded and the sweep goes
on.  Every type ends in one of the outcomes of :data:`OUTCOMES`:

- ``clean``: every check passed (``warn`` / ``skip`` allowed);
- ``finding``: a check failed (a defect of the model, or a false failure to triage);
- ``error``: a check raised inside attncheck (a crash of the analysis);
- ``unsupported``: the type cannot be built tiny and run (the reason is kept);
- ``no-attention``: the model built and ran, but has no attention module and no softmax / SDPA
  call was seen (convolutional, state-space models);
- ``timeout`` / ``crashed``: the worker ran past the timeout or died.

:func:`sweep` returns a JSON-ready document ``{"version": 1, "kind": "audit-sweep", ...,
"types": [...], "counts": {...}}``; :func:`markdown_table` renders it for the docs.
"""
from __future__ import annotations

import fnmatch
import multiprocessing as mp
import time
from collections.abc import Callable, Iterable
from typing import Any

from attncheck.audit.runner import DEFAULT_TIMEOUT

OUTCOMES = ("clean", "finding", "error", "unsupported", "no-attention", "timeout", "crashed")
DEFAULT_CHECKS = ("causality,padding,batch-independence,kv-cache,backend-agreement,normalization,"
                  "saturation,scale,mask-pattern,gqa")


def zoo_types(include: Iterable[str] = (), exclude: Iterable[str] = ()) -> list[str]:
    """Model types of the installed transformers (``CONFIG_MAPPING``), filtered by shell globs
    (``fnmatch``) over the type name: kept when it matches any ``include`` glob (all when none)
    and no ``exclude`` glob."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    inc, exc = list(include), list(exclude)
    out = []
    for t in sorted(CONFIG_MAPPING_NAMES):
        if inc and not any(fnmatch.fnmatchcase(t, g) for g in inc):
            continue
        if any(fnmatch.fnmatchcase(t, g) for g in exc):
            continue
        out.append(t)
    return out


def classify(report) -> dict[str, Any]:
    """Outcome of one audit report (see the module docstring) with the reasons."""
    res = report.results
    row: dict[str, Any] = {"model": report.extra.get("model", {}).get("class"),
                           "kind": report.extra.get("model", {}).get("kind"),
                           "variants": report.extra.get("variants", [])}
    if report.extra.get("unsupported"):
        return dict(row, outcome="unsupported", reason=report.extra["unsupported"])
    build = [r for r in res if r.check == "build"]
    if build and build[0].status == "error":
        return dict(row, outcome="error", reason=f"build: {build[0].message}")
    errors = [r for r in res if r.status == "error"]
    fails = [r for r in res if r.status == "fail"]
    observed = any(r.check.startswith("normalization") and r.status != "skip" for r in res)
    modules = report.extra.get("model", {}).get("attention_modules") or 0
    if errors:
        return dict(row, outcome="error", reason="; ".join(f"{r.check}: {r.message}" for r in errors)[:600])
    if fails:
        return dict(row, outcome="finding", reason="; ".join(f"{r.check}: {r.message}" for r in fails)[:600],
                    failed=[r.check for r in fails])
    if not observed and not modules:
        return dict(row, outcome="no-attention", reason="no attention module and no softmax / SDPA call seen")
    warns = [r.check for r in res if r.status == "warn"]
    return dict(row, outcome="clean", reason="", warnings=warns)


def _audit_one(model_type: str, checks: str, dtype: str, seed: int,
               check_timeout: float | None = DEFAULT_TIMEOUT) -> dict[str, Any]:
    import warnings

    warnings.filterwarnings("ignore")
    from attncheck.audit.runner import audit

    t = time.perf_counter()
    rep = audit(f"hf:{model_type}", checks=checks, seed=seed, dtype=dtype, timeout=check_timeout)
    row = classify(rep)
    row.update(type=model_type, seconds=round(time.perf_counter() - t, 2))
    return row


def _worker(conn) -> None:  # pragma: no cover - runs in a child process
    import os

    import torch

    # results go through the pipe; what a model prints (transformers' docstring checker prints
    # "[ERROR] … not documented" lines when PE-Video builds) goes to stderr, not into the
    # parent's stdout, which carries the sweep's JSON report
    os.dup2(2, 1)
    torch.set_num_threads(1)
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        model_type, checks, dtype, seed, check_timeout = task
        try:
            row = _audit_one(model_type, checks, dtype, seed, check_timeout)
        except BaseException as exc:  # noqa: BLE001 - one type never stops the sweep
            row = {"type": model_type, "outcome": "error", "reason": f"{type(exc).__name__}: {exc}"[:600]}
        conn.send(row)


class _Slot:
    def __init__(self, ctx) -> None:
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.task: str | None = None
        self.started = 0.0

    def stop(self) -> None:
        try:
            self.parent.send(None)
        except Exception:  # noqa: BLE001
            pass
        self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2)


def sweep(types: list[str], checks: str = DEFAULT_CHECKS, dtype: str = "float32", seed: int = 0,
          jobs: int = 1, timeout: float = 300.0,
          on_done: Callable[[dict[str, Any]], None] | None = None,
          check_timeout: float | None = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Audit each model type in ``types`` in ``jobs`` worker processes.

    Args:
        types: model types (see :func:`zoo_types`).
        checks: audit checks (default: every dynamic check; lint is per file, run it with
            ``attncheck lint``).
        dtype: the dtype every model runs in.
        timeout: seconds per type; the worker is killed and replaced after it.
        check_timeout: seconds per check and for building each model (``audit``'s ``timeout``;
            None or 0 = unlimited): a check or build past it is an ``error`` row.
        on_done: called with each finished row (progress).

    Returns:
        ``{"version": 1, "kind": "audit-sweep", "dtype", "checks", "jobs", "seconds",
        "counts": {outcome: n}, "types": [row, ...]}``, rows sorted by type, each with
        ``type``, ``outcome``, ``reason``, ``seconds``, ``model`` (class), ``kind``.
    """
    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    pending = list(types)
    rows: list[dict[str, Any]] = []
    slots = [_Slot(ctx) for _ in range(max(1, min(jobs, len(pending) or 1)))]

    def finish(row):
        rows.append(row)
        if on_done:
            on_done(row)

    try:
        while pending or any(s.task for s in slots):
            for i, s in enumerate(slots):
                if s.task is None and pending:
                    s.task, s.started = pending.pop(0), time.perf_counter()
                    try:
                        s.parent.send((s.task, checks, dtype, seed, check_timeout))
                    except Exception:  # noqa: BLE001 - a dead worker: replace it
                        pending.insert(0, s.task)
                        s.task = None
                        s.stop()
                        slots[i] = _Slot(ctx)
            conns = [s.parent for s in slots if s.task]
            ready = mp.connection.wait(conns, timeout=1.0) if conns else []
            for i, s in enumerate(slots):
                if not s.task:
                    continue
                elapsed = time.perf_counter() - s.started
                if s.parent in ready:
                    try:
                        row = s.parent.recv()
                    except (EOFError, OSError):
                        row = {"type": s.task, "outcome": "crashed",
                               "reason": f"worker died (exit code {s.proc.exitcode})",
                               "seconds": round(elapsed, 2)}
                        s.stop()
                        slots[i] = _Slot(ctx)
                    finish(row)
                    s.task = None
                elif not s.proc.is_alive():
                    finish({"type": s.task, "outcome": "crashed",
                            "reason": f"worker died (exit code {s.proc.exitcode})", "seconds": round(elapsed, 2)})
                    s.task = None
                    slots[i] = _Slot(ctx)
                elif elapsed > timeout:
                    finish({"type": s.task, "outcome": "timeout", "reason": f"ran past {timeout:g} s",
                            "seconds": round(elapsed, 2)})
                    s.task = None
                    s.proc.kill()
                    s.proc.join(2)
                    slots[i] = _Slot(ctx)
    finally:
        for s in slots:
            s.stop()
    rows.sort(key=lambda r: r["type"])
    counts = {o: sum(1 for r in rows if r.get("outcome") == o) for o in OUTCOMES}
    return {"version": 1, "kind": "audit-sweep", "dtype": dtype, "checks": checks, "jobs": len(slots),
            "seconds": round(time.perf_counter() - t0, 1), "counts": counts, "types": rows}


def attention_coverage(doc: dict[str, Any]) -> dict[str, Any]:
    """Share of the types with attention that were audited: audited = clean + finding (an error —
    a check that raised, or a build or check past ``--timeout`` — audited nothing); the
    denominator excludes ``no-attention`` types."""
    c = doc["counts"]
    audited = c.get("clean", 0) + c.get("finding", 0)
    total = sum(c.values()) - c.get("no-attention", 0)
    return {"audited": audited, "with_attention": total,
            "share": round(audited / total, 4) if total else 0.0}


def markdown_table(doc: dict[str, Any], command: str = "") -> str:
    """Markdown: counts, then one row per type that is not clean (outcome, seconds, reason)."""
    cov = attention_coverage(doc)
    lines = []
    if command:
        lines += [f"Command: `{command}` ({doc['seconds']:.0f} s, {doc['jobs']} job(s), dtype {doc['dtype']})", ""]
    lines += ["| outcome | types |", "|---|---|"]
    lines += [f"| {o} | {n} |" for o, n in doc["counts"].items()]
    lines += ["", f"Audited (clean + finding) {cov['audited']} of {cov['with_attention']} types "
              f"not shown to lack attention ({cov['share']:.1%}).", ""]
    lines += ["| type | outcome | seconds | reason |", "|---|---|---|---|"]
    for r in doc["types"]:
        if r.get("outcome") == "clean":
            continue
        reason = (r.get("reason") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{r['type']}` | {r.get('outcome')} | {r.get('seconds', '')} | {reason[:240]} |")
    clean = [r["type"] for r in doc["types"] if r.get("outcome") == "clean"]
    lines += ["", f"Clean ({len(clean)}): " + ", ".join(f"`{t}`" for t in clean)]
    return "\n".join(lines) + "\n"


def render_summary(doc: dict[str, Any], console) -> None:
    """Rich summary: counts, then every type that is not clean (outcome, seconds, reason)."""
    from rich.markup import escape
    from rich.table import Table

    styles = {"clean": "green", "finding": "red", "error": "bold red", "unsupported": "yellow",
              "no-attention": "dim", "timeout": "magenta", "crashed": "bold magenta"}
    t = Table(title=f"attncheck audit hf:all  [dim]({len(doc['types'])} model types, dtype {doc['dtype']}, "
                    f"{doc['jobs']} job(s), {doc['seconds']:.0f} s)[/dim]")
    t.add_column("type", no_wrap=True)
    t.add_column("outcome")
    t.add_column("s", justify="right")
    t.add_column("reason", overflow="fold")
    for r in doc["types"]:
        o = r.get("outcome", "?")
        if o == "clean":
            continue
        st = styles.get(o, "")
        t.add_row(escape(r["type"]), f"[{st}]{o}[/{st}]", f"{r.get('seconds', 0):.1f}",
                  escape(str(r.get("reason", ""))[:300]))
    console.print(t)
    cov = attention_coverage(doc)
    console.print("  ".join(f"[{styles.get(o, '')}]{o} {n}[/{styles.get(o, '')}]" for o, n in doc["counts"].items())
                  + f"   audited {cov['audited']}/{cov['with_attention']} ({cov['share']:.1%})")


def run_sweep_cli(fmt: str, seed: int, checks: str | None, dtype: str, include, exclude, jobs: int,
                  timeout: float, check_timeout: float | None = DEFAULT_TIMEOUT) -> int:
    """``attncheck audit hf:all``: sweep with a progress bar; exit 0 when every audited type is
    clean, 1 when any finding / error / timeout / crash, 2 when no type matches."""
    import json

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    types = zoo_types(include, exclude)
    if not types:
        err.print("[bold red]error:[/bold red] no transformers model type matches --include/--exclude")
        return 2
    progress = Progress(TextColumn("[bold]hf:all"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=err,
                        transient=True, disable=not err.is_terminal)
    with progress:
        task = progress.add_task("sweep", total=len(types), last="")

        def done(row):
            progress.update(task, advance=1, last=f"{row['type']}: {row.get('outcome')}")

        doc = sweep(types, checks=checks or DEFAULT_CHECKS, dtype=dtype, seed=seed, jobs=jobs,
                    timeout=timeout, on_done=done, check_timeout=check_timeout)
    if fmt == "json":
        from attncheck.report.terminal import _clean

        print(json.dumps(_clean(doc), indent=2, allow_nan=False))
    else:
        render_summary(doc, Console())
    bad = sum(doc["counts"].get(o, 0) for o in ("finding", "error", "timeout", "crashed"))
    return 1 if bad else 0


__all__ = ["DEFAULT_CHECKS", "render_summary", "run_sweep_cli", "OUTCOMES", "attention_coverage", "classify", "markdown_table", "sweep",
           "zoo_types"]
