"""``attncheck check TARGET``: run the dynamic checks from the command line.

Exit codes: 0 every check passed (``warn`` and ``skip`` allowed), 1 a check failed or errored,
2 usage error (bad spec, import failure, unknown check / device / dtype, invalid hint) or an
internal error of attncheck (an exception raised by attncheck's own code, never blamed on the
target).
"""
from __future__ import annotations

import sys

import click

__all__ = ["check_cmd", "COMMANDS", "SEED", "OUTPUT_FORMATS", "TIMEOUT", "reject_nan"]

#: ``--output-format`` / ``--format`` of ``check`` and ``audit``: ``text`` = ``full`` on a
#: terminal, ``concise`` otherwise; ``full``: rich tables; ``concise``: one plain line per check
#: (:func:`attncheck.report.terminal.plain_lines`); ``json``: versioned JSON.
OUTPUT_FORMATS = ("text", "full", "concise", "json")

#: ``--seed``: any integer torch's and hypothesis' seeding accept (``torch.manual_seed`` takes
#: 64-bit values); anything else is a usage error (exit 2), not an error in the middle of a run.
SEED = click.IntRange(-(2**63), 2**63 - 1)


#: ``--timeout``: seconds >= 0 (0 = unlimited); with :func:`reject_nan` as the callback.
TIMEOUT = click.FloatRange(min=0)


def reject_nan(ctx, param, value):
    """Click callback: NaN passes ``FloatRange``'s comparisons; make it a usage error too."""
    if value is not None and value != value:
        raise click.BadParameter("not a number", ctx=ctx, param=param)
    return value


def _parse_hint(values: tuple[str, ...]) -> dict:
    out = {}
    for item in values:
        if "=" not in item:
            raise click.UsageError(f"--hint {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = _hint_value(v)
    return out


def _hint_value(v: str) -> object:
    """``--hint`` value: true/false → bool, integers, floats, JSON objects / lists (``{...}``,
    ``[...]``, as emitted by reproduction lines), else the string itself."""
    import json

    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        pass
    if v[:1] in ("{", "["):
        try:
            return json.loads(v)
        except ValueError:
            raise click.UsageError(f"--hint value {v!r}: invalid JSON") from None
    return v


@click.command("check")
@click.argument("target", metavar="TARGET")
@click.option("--causal/--no-causal", default=None,
              help="Declare the target causal (or not); default: detect / unknown.")
@click.option("--checks", default=None, metavar="A,B",
              help="Comma-separated checks (default: the default suite).")
@click.option("--device", default="auto", show_default=True,
              help="auto (CUDA when available), cpu, cuda, cuda:1, ...")
@click.option("--dtype", default=None, help="float32 (default), float64, float16, bfloat16.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed for torch and the hypothesis search (the same seed replays a failure).")
@click.option("--max-examples", type=click.IntRange(1, 10000), default=None,
              help="Hypothesis examples per property (default 8).")
@click.option("--timeout", type=TIMEOUT, default=60.0, show_default=True,
              callback=reject_nan, help="Seconds per check (>= 0); 0 = unlimited.")
@click.option("--train", is_flag=True, help="Run the module in training mode (default: eval).")
@click.option("--hint", "hints", multiple=True, metavar="KEY=VALUE",
              help="Calling-convention hint, e.g. --hint layout=BLHd --hint num_heads=4.")
@click.option("--output-format", "--format", "fmt",
              type=click.Choice(OUTPUT_FORMATS), default="text",
              show_default=True,
              help="text: full on a terminal, concise otherwise (logs, CI); full: a table; "
                   "concise: one line per check (status check: message); json: versioned JSON.")
def check_cmd(target, causal, checks, device, dtype, seed, max_examples, timeout, train, hints,
              fmt):
    """Run dynamic checks on TARGET (PATH.py:NAME or package.module:NAME).

    NAME is an nn.Module subclass (built with no arguments), a kernel f(q, k, v, ...) on
    (B, H, L, d) tensors, or a zero-argument factory returning a module, a kernel or an
    attncheck.target(...).  Modules run in eval mode (dropout off) unless --train.
    """
    from attncheck.dynamic.hints import HintError, validate_hints

    h = _parse_hint(hints)
    if causal is not None:
        h["causal"] = causal
    try:  # first: a misspelt hint imports and runs nothing (torch included)
        validate_hints(h)
    except HintError as exc:
        click.echo(f"attncheck check: error: {exc}", err=True)
        sys.exit(2)
    from attncheck.dynamic.runner import resolve_device, resolve_dtype, run_checks
    from attncheck.dynamic.spec import SpecError, resolve
    from attncheck.dynamic.targets import TargetError

    try:
        resolve_device(device)
        resolve_dtype(dtype)
        t = resolve(target, **h)
        if causal is not None:
            t.hints["causal"] = causal
        report = _run(run_checks, t, checks, device, dtype, seed, max_examples, timeout, train,
                      fmt)
    except (SpecError, TargetError, ValueError) as exc:
        click.echo(f"attncheck check: error: {exc}", err=True)
        sys.exit(2)
    if fmt == "json":
        from attncheck.report.terminal import report_json

        click.echo(report_json(report))
    else:
        from rich.console import Console

        from attncheck.report.terminal import plain_lines, render_report, resolve_text_format

        if resolve_text_format(fmt) == "full":
            render_report(report, Console(highlight=False, soft_wrap=False))
        else:
            click.echo("\n".join(plain_lines(report)))
    internal = [r.check for r in report.results if r.metrics.get("internal_error")]
    if internal:
        click.echo(f"attncheck check: error: internal error in attncheck while running "
                   f"{', '.join(internal)} (a bug in attncheck, not in the target: please "
                   "report it with the reproduction line above)", err=True)
        sys.exit(2)
    sys.exit(0 if report.ok else 1)


def _run(run_checks, t, checks, device, dtype, seed, max_examples, timeout, train, fmt):
    return run_checks(t, checks, device=device, dtype=dtype, seed=seed,
                      max_examples=max_examples, timeout=(timeout or None), train=train)


COMMANDS = [check_cmd]
