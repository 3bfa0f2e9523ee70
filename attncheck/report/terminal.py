"""Terminal rendering of a :class:`~attncheck.results.Report` with rich (used by ``attncheck
check`` and ``attncheck audit``).

:func:`render_report` prints a table — check, status, message, key numbers — followed by the
details (smallest failing example, reproduction line) of every failed / errored check and a
summary line.  :func:`report_table` returns just the ``rich.table.Table``.

:func:`plain_lines` is the width-independent text for logs (stdout not a terminal, e.g. CI): one
line per check, ``status check: message [numbers]``, never wrapped or boxed, with the details of
failed / errored checks indented under their line, then the summary line.
"""
from __future__ import annotations

import json
import numbers
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from attncheck.results import CheckResult, Report

__all__ = ["render_report", "report_table", "STATUS_STYLE", "summary_line", "format_metrics",
           "plain_lines", "resolve_text_format"]

STATUS_STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold magenta",
                "warn": "bold yellow", "skip": "dim"}

_SKIP_METRICS = {"example", "sources", "exempt", "dropout"}


def format_metrics(metrics: dict[str, Any], limit: int = 4) -> str:
    """A short ``k=v`` summary of scalar metrics (floats to 3 significant digits)."""
    parts = []
    for k, v in metrics.items():
        if k in _SKIP_METRICS or isinstance(v, (dict, list, tuple)):
            continue
        if isinstance(v, float):
            v = f"{v:.3g}"
        parts.append(f"{k}={v}")
        if len(parts) >= limit:
            break
    return " ".join(parts)


def summary_line(report: Report) -> str:
    counts = {s: 0 for s in STATUS_STYLE}
    for r in report.results:
        counts[r.status] = counts.get(r.status, 0) + 1
    bits = [f"{n} {s}" for s, n in counts.items() if n]
    verdict = "OK" if report.ok else "FAILED"
    return f"{verdict}: {', '.join(bits) or 'no checks run'}"


def resolve_text_format(fmt: str, stream: Any = None) -> str:
    """``text`` → ``full`` when ``stream`` (default ``sys.stdout``) is a terminal, else
    ``concise``; other formats unchanged.  Decided by ``isatty()`` alone: ``FORCE_COLOR``,
    which CI systems set for colour, must not bring back 80-column tables in their logs."""
    if fmt != "text":
        return fmt
    import sys

    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    return "full" if tty else "concise"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def plain_lines(report: Report, title: str | None = None, *,
                show_details: bool = True) -> list[str]:
    """The report as plain lines that do not depend on the terminal width: ``title`` (default
    ``attncheck check <target> (device, dtype, mode mode)``), one ``status check: message
    [numbers]`` line per check (status padded to 5 characters; a message's own line breaks
    become spaces), the details of each failed / errored check indented by 4 spaces under its
    line, then :func:`summary_line`."""
    mode = report.extra.get("mode", "eval")
    lines = [title or f"attncheck check {report.target} ({report.device}, {report.dtype}, "
                      f"{mode} mode)"]
    shown = _shown_details(report)
    for i, r in enumerate(report.results):
        line = f"{r.status:<5} {r.check}: {_one_line(r.message)}"
        numbers = format_metrics(r.metrics)
        if numbers:
            line += f" [{numbers}]"
        lines.append(line)
        if show_details and i in shown:
            lines.extend("    " + d for d in shown[i].splitlines())
    mc = report.extra.get("mask_convention")
    if isinstance(mc, dict) and mc.get("source") in ("detected", "failed"):
        lines.append(f"mask convention: {_one_line(mc.get('message'))}")
    lines.append(summary_line(report))
    return lines


def report_table(report: Report, title: str | None = None) -> Table:
    """The results as a rich table (columns: check, status, message, numbers)."""
    mode = report.extra.get("mode", "eval")
    t = Table(title=title or f"attncheck check {report.target}  "
              f"[dim]({report.device}, {report.dtype}, {mode} mode)[/dim]",
              show_lines=False, expand=False)
    t.add_column("check", style="bold", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("message", overflow="fold")
    t.add_column("numbers", style="dim", overflow="fold")
    for r in report.results:
        st = STATUS_STYLE.get(r.status, "")
        t.add_row(escape(r.check), f"[{st}]{r.status}[/{st}]", escape(r.message),
                  escape(format_metrics(r.metrics)))
    return t


def _details(r: CheckResult) -> str:
    return r.details.strip()


def _shown_details(report: Report) -> dict[int, str]:
    """Details to print per result index (failed / errored checks only).  A traceback already
    shown for an earlier check is replaced by a reference to it, so one exception raised by the
    target in every check is printed once; the check's own reproduction line is kept."""
    out: dict[int, str] = {}
    first: dict[str, str] = {}
    for i, r in enumerate(report.results):
        text = _details(r)
        if r.status not in ("fail", "error") or not text:
            continue
        body, sep, repro = text.partition("\nreproduce:")
        if "File " in body:
            # the same exception from the same line of the target's code: the tracebacks differ
            # only in the frames of attncheck and torch above it
            lines = [ln.strip() for ln in body.strip().splitlines() if ln.strip()]
            own = [ln for ln in lines if ln.startswith("File ") and "/attncheck/" not in ln
                   and "/torch/" not in ln]
            key = (own[-1] if own else "") + "\n" + lines[-1]
            if key in first:
                body = f"(same traceback as {first[key]})"
            else:
                first[key] = r.check
        out[i] = (body + sep + repro).strip()
    return out


def render_report(report: Report, console: Console | None = None, *,
                  show_details: bool = True, title: str | None = None) -> None:
    """Print ``report`` to ``console`` (default: a new stdout console): the table, then the
    details of failed / errored checks, then a summary line.  ``title`` replaces the table title
    (default ``attncheck check <target> (device, dtype, mode)``)."""
    console = console or Console()
    console.print(report_table(report, title=title))
    for note in report.extra.get("conventions") or []:
        console.print(escape(f"convention: {note}"), style="dim", highlight=False)
    mc = report.extra.get("mask_convention")
    if isinstance(mc, dict) and mc.get("source") in ("detected", "failed"):
        # the mask convention was not given: say what was found (or why masks were not passed)
        console.print(escape(f"mask convention: {mc.get('message')}"), style="dim",
                      highlight=False)
    if show_details:
        for i, text in _shown_details(report).items():
            r = report.results[i]
            st = STATUS_STYLE[r.status]
            console.print(f"[{st}]{r.status}[/{st}] [bold]{escape(r.check)}[/bold]: "
                          f"{escape(r.message)}")
            console.print(escape(text), style="dim", highlight=False)
    ok = report.ok
    console.print(f"[{'bold green' if ok else 'bold red'}]{summary_line(report)}"
                  f"[/{'bold green' if ok else 'bold red'}]")


def report_json(report: Report) -> str:
    """``Report.to_dict()`` as indented JSON (NaN/inf written as strings, valid JSON)."""
    return json.dumps(_clean(report.to_dict()), indent=2)


def _clean(x: Any) -> Any:
    """JSON-safe copy: NaN/inf as strings, numbers of other types (NumPy scalars) as Python
    numbers, anything else that is not JSON as its ``str``."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        x = float(x)
        if x != x or x in (float("inf"), float("-inf")):
            return str(x)
        return x
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [_clean(v) for v in x]
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    return str(x)


__all__.append("report_json")
