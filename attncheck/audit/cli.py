"""``attncheck audit [SPEC ...]``: audit third-party models (lint their source + run the checks).

Exit codes: 0 every check passed (``warn`` / ``skip`` allowed), 1 a check failed or errored
(a check that runs past ``--timeout`` is an error), 2 usage error (unknown family or model name —
the known ones are listed —, unknown check, unavailable device, unknown or invalid hint) or a
family whose optional package cannot be imported (``timm:`` without timm, ``xt:`` without
x-transformers, ``hf:`` without transformers: one ``attncheck audit: error:`` line with the
reason and the install command; as ``attncheck check`` treats a target whose import fails).
A bare ``attncheck audit`` audits the bundled demo pair ``fixtures/audit/demo_correct.py`` and
``fixtures/audit/demo_buggy.py``.
"""
from __future__ import annotations

import json
import os
import sys

import click

from attncheck.dynamic.cli import OUTPUT_FORMATS, SEED, TIMEOUT, reject_nan

__all__ = ["COMMANDS", "audit_cmd", "demo_specs"]


def demo_specs() -> list[str]:
    """The bundled demo pair (a correct causal layer and a buggy one)."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "demo"),  # installed wheel
                  os.path.join(os.path.dirname(os.path.dirname(here)), "fixtures", "audit")]
    for d in candidates:
        c, b = os.path.join(d, "demo_correct.py"), os.path.join(d, "demo_buggy.py")
        if os.path.isfile(c) and os.path.isfile(b):
            return [f"{c}:make_layer", f"{b}:make_layer"]
    raise click.UsageError("the bundled demo layers were not found; pass a SPEC")


def _model_description(rep) -> str:
    model = rep.extra.get("model", {})
    return ", ".join(f"{k}={v}" for k, v in model.items()
                     if k in ("class", "kind", "num_heads", "num_kv_heads", "head_dim",
                              "sliding_window") and v is not None)


def _lint_location(f) -> str:
    rel = os.path.relpath(f["path"])
    return f"{rel if len(rel) < len(f['path']) else f['path']}:{f['line']}"


def _render_plain(reports) -> None:
    """Width-independent lines (:func:`attncheck.report.terminal.plain_lines`) per model, with
    its lint findings indented under a ``lint findings:`` line."""
    from attncheck.report.terminal import plain_lines

    for rep in reports:
        lines = plain_lines(rep, title=f"attncheck audit {rep.target} ({rep.device}, {rep.dtype}; "
                                       f"{_model_description(rep)})")
        findings = (rep.extra.get("lint") or {}).get("findings") or []
        if findings:
            lines[-1:-1] = ["lint findings:"] + [
                f"    {_lint_location(f)}: {f['code']} {' '.join(f['message'].split())}"
                for f in findings]
        click.echo("\n".join(lines) + "\n")


def _render_text(reports, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from attncheck.report.terminal import STATUS_STYLE, report_table, summary_line

    for rep in reports:
        desc = _model_description(rep)
        console.print(report_table(rep, title=f"attncheck audit {rep.target}  [dim]({rep.device}, {rep.dtype}; "
                                              f"{desc})[/dim]"))
        lint = rep.extra.get("lint") or {}
        if lint.get("findings"):
            t = Table(title="lint findings", show_lines=False)
            t.add_column("location", no_wrap=True)
            t.add_column("code")
            t.add_column("message", overflow="fold")
            for f in lint["findings"][:30]:
                t.add_row(escape(_lint_location(f)), f["code"], escape(f["message"]))
            console.print(t)
        for r in rep.results:
            if r.status in ("fail", "error"):
                st = STATUS_STYLE[r.status]
                console.print(f"  [{st}]{r.status}[/{st}] [bold]{escape(r.check)}[/bold]: {escape(r.message)}")
        console.print(summary_line(rep))
        console.print()


@click.command("audit")
@click.argument("specs", nargs=-1, metavar="[SPEC ...]")
@click.option("--output-format", "--format", "fmt", type=click.Choice(OUTPUT_FORMATS),
              default="text", show_default=True,
              help="text: full on a terminal, concise otherwise (logs, CI); full: tables; "
                   "concise: one line per check (status check: message); json: versioned JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a self-contained HTML report (heatmaps, leak maps) to this file.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda, or auto.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed for inputs and perturbations.")
@click.option("--checks", default=None, metavar="A,B",
              help="Comma-separated subset of: lint, causality, padding, batch-independence, kv-cache, "
                   "backend-agreement, normalization, saturation, scale, mask-pattern, gqa.")
@click.option("--config", "config_items", multiple=True, metavar="KEY=VALUE",
              help="transformers config override for hf: specs, e.g. --config sliding_window=8 "
                   "(values parsed as JSON when possible).")
@click.option("--timeout", type=TIMEOUT, default=60.0, show_default=True, callback=reject_nan,
              help="Seconds per check and per model build (>= 0); 0 = unlimited. A model that hangs "
                   "gives an error result and the audit goes on.")
@click.option("--causal/--no-causal", default=None,
              help="Declare the checked self-attention causal (or bidirectional); default: as "
                   "the family / module declares it, else inferred like attncheck check.")
@click.option("--hint", "hints", multiple=True, metavar="KEY=VALUE",
              help="Declared facts overriding the model's: num_heads, num_kv_heads, head_dim, "
                   "scale (a number or learned), window, pattern (full, causal, "
                   "sliding_window), mask_pattern, causal.")
@click.option("--dtype", type=click.Choice(["float32", "float64", "float16", "bfloat16"]), default="float32",
              show_default=True, help="dtype the whole hf: model runs in (tolerances follow its noise).")
@click.option("--include", multiple=True, metavar="GLOB",
              help="hf:all: audit only model types matching a glob (repeatable), e.g. 'qwen*'.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="hf:all: skip model types matching a glob.")
@click.option("--jobs", type=click.IntRange(1), default=1, show_default=True,
              help="hf:all: worker processes.")
@click.option("--type-timeout", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="hf:all: seconds per model type before its worker is replaced.")
def audit_cmd(specs, fmt, html_path, device, seed, checks, config_items, timeout, causal, hints, dtype,
              include, exclude, jobs, type_timeout):
    """Audit models you did not write: build small random-weight models (no downloads), lint
    their source, and run model-level attention checks.

    SPEC: hf:<model_type or ModelClass> (e.g. hf:gpt2, hf:llama, hf:t5), xt:decoder, xt:encoder,
    torch:MultiheadAttention, torch:TransformerEncoderLayer, timm:<name>, package.module:factory,
    or path/to/file.py:factory.  Without SPEC: the bundled demo pair (a correct and a buggy layer).
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from attncheck.audit import families as F
    from attncheck.audit.runner import AUDIT_CHECKS, audit, audit_hints, reports_to_dict
    from attncheck.dynamic.cli import _parse_hint
    from attncheck.dynamic.runner import resolve_device

    # usage errors first, before anything is imported or built (the messages of attncheck check)
    try:
        resolve_device(device)
        hint_values = audit_hints(_parse_hint(hints), causal)
    except ValueError as exc:
        click.echo(f"attncheck audit: error: {exc}", err=True)
        sys.exit(2)
    if "hf:all" in specs:
        if len(specs) > 1 or html_path or config_items:
            raise click.UsageError("hf:all sweeps the zoo on its own (no other SPEC, --html or --config)")
        from attncheck.audit.sweep import run_sweep_cli

        sys.exit(run_sweep_cli("json" if fmt == "json" else "text", seed, checks, dtype, include, exclude,
                               jobs, type_timeout, timeout or None))
    if include or exclude:
        raise click.UsageError("--include/--exclude select model types of hf:all")
    specs = list(specs) or demo_specs()
    config = {}
    for item in config_items:
        if "=" not in item:
            raise click.UsageError(f"--config {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            config[k.strip()] = json.loads(v)
        except ValueError:
            config[k.strip()] = v
    if checks:
        unknown = [c for c in checks.split(",") if c.strip() and c.strip() not in AUDIT_CHECKS]
        if unknown:
            raise click.UsageError(f"unknown check(s): {', '.join(unknown)}; known: {', '.join(AUDIT_CHECKS)}")
    if html_path:  # fail fast, before the (slow) runs, when the HTML report cannot be written
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise click.UsageError(f"--html needs matplotlib ({exc}): pip install "
                                   "'attncheck[report]'") from None
        from attncheck.atomic import check_writable

        try:
            check_writable(html_path)
        except OSError as exc:
            raise click.UsageError(f"--html {html_path}: cannot write there ({exc.filename}: "
                                   f"{exc.strerror})") from None
    # validate every spec's family before the (slow) runs
    err = Console(stderr=True)
    reports = []
    n_steps = 1 + (len(checks.split(",")) if checks else len(AUDIT_CHECKS)) * 2
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[step]}"),
                        TimeElapsedColumn(), console=err, transient=True,
                        disable=not err.is_terminal)
    try:
        with progress:
            for spec in specs:
                task = progress.add_task(spec, total=n_steps, step="")

                def step(label, task=task):
                    progress.update(task, advance=1, step=label)

                try:
                    rep = audit(spec, checks=checks, device=device, seed=seed, progress=step,
                                config=config or None, timeout=timeout or None,
                                hints=hint_values, dtype=dtype)
                except F.UnknownSpec as exc:
                    progress.stop()
                    close = exc.close_matches(spec)
                    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
                    err.print(f"[bold red]error:[/bold red] {escape(str(exc))}{escape(hint)}",
                              soft_wrap=True)
                    err.print("known: " + ", ".join(exc.known[:60]) + (" …" if len(exc.known) > 60 else ""))
                    sys.exit(2)
                progress.update(task, completed=n_steps, step="done")
                reports.append(rep)
    except ValueError as exc:
        raise click.UsageError(str(exc))
    if fmt == "json":
        from attncheck.report.terminal import _clean

        # strict JSON, as attncheck check: NaN / inf written as strings
        click.echo(json.dumps(_clean(reports_to_dict(reports)), indent=2, allow_nan=False))
    else:
        from attncheck.report.terminal import resolve_text_format

        # a model whose family's package is missing audited nothing: its one line is the error
        # below, not a report that reads "OK: 1 skip"
        audited = [r for r in reports if not r.extra.get("unavailable")]
        if resolve_text_format(fmt) == "full":
            _render_text(audited, Console())
        else:
            _render_plain(audited)
    if html_path:
        from attncheck.report.html import write_html

        write_html(reports, html_path)
        if fmt == "json":
            err.print(f"HTML report written to {html_path}", soft_wrap=True)
        else:
            click.echo(f"HTML report written to {html_path}")
    unavailable = [(r, r.extra["unavailable"]) for r in reports if r.extra.get("unavailable")]
    for rep, why in unavailable:
        # asked for by name, a family whose package is missing audited nothing: not a pass
        click.echo(f"attncheck audit: error: {rep.target}: {why}", err=True)
    if unavailable:
        sys.exit(2)
    sys.exit(0 if all(r.ok for r in reports) else 1)


COMMANDS = [audit_cmd]
