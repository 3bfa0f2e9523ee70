"""Output formats for lint findings: concise, full, json, sarif, github.

Coordinates in every output are 1-based lines *and* columns (as ruff prints them and SARIF
requires); ``end_column`` is exclusive (the column after the last character).  Internally
(:class:`~attncheck.lint.finding.Finding`) columns are 0-based.

JSON (``--output-format json``): a list, one object per finding, sorted by
(path, line, column, code)::

    {"path": "src/attn.py", "line": 12, "column": 14, "end_line": 12, "end_column": 36,
     "code": "ATT101", "name": "missing-scale", "severity": "error",
     "message": "...",
     "fix": null | {"message": "...", "applicability": "safe" | "unsafe",
                    "edits": [{"line": 12, "column": 14, "end_line": 12, "end_column": 36,
                               "content": "..."}]}}
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from attncheck._version import __version__
from attncheck.lint.finding import Finding
from attncheck.lint.suppression import physical_lines

FORMATS = ("concise", "full", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def finding_to_json(f: Finding) -> dict:
    """The documented JSON object of one finding (1-based columns)."""
    fix = None
    if f.fix is not None:
        fix = {
            "message": f.fix.message,
            "applicability": f.fix.applicability,
            "edits": [{"line": e.line, "column": e.col + 1, "end_line": e.end_line,
                       "end_column": e.end_col + 1, "content": e.content}
                      for e in f.fix.edits],
        }
    out = {"path": f.path, "line": f.line, "column": f.col + 1, "end_line": f.end_line,
           "end_column": f.end_col + 1, "code": f.code, "name": f.name,
           "severity": f.severity, "message": f.message, "fix": fix}
    if f.cell is not None:  # a notebook: lines count from the cell's first line
        out = {"path": f.path, "cell": f.cell, **{k: v for k, v in out.items() if k != "path"}}
    return out


def source_key(f: Finding) -> str:
    """The key of ``f``'s text in ``LintResult.sources``: the path, or ``path:cell N`` for a
    notebook cell."""
    return f.path if f.cell is None else f"{f.path}:cell {f.cell}"


def _cell_prefix(f: Finding) -> str:
    return "" if f.cell is None else f"cell {f.cell}: "


def concise_line(f: Finding) -> str:
    """``path:line:col: CODE message`` (1-based column), as ruff's concise format; in a notebook
    ``path:cell N:line:col: CODE message``, as ruff reports notebooks."""
    return f"{f.location}: {f.code} {f.message}"


def format_concise(findings: list[Finding]) -> str:
    return "".join(concise_line(f) + "\n" for f in findings)


def format_json(findings: list[Finding]) -> str:
    return json.dumps([finding_to_json(f) for f in findings], indent=2, ensure_ascii=False) + "\n"


def _uri(path: str) -> str:
    if path == "-":
        return "stdin"
    p = Path(path)
    if p.is_absolute():
        return p.as_uri()
    return quote(p.as_posix())


def sarif_log(findings: list[Finding], rules: dict | None = None) -> dict:
    """A SARIF 2.1.0 log: one run, ``tool.driver.rules`` = every registered rule (with its page's
    *What it does* as ``fullDescription``), one result per finding."""
    from attncheck.lint import catalog
    from attncheck.lint.rule import all_rules

    rules = rules if rules is not None else all_rules()
    descriptors = []
    index = {}
    for i, (code, r) in enumerate(sorted(rules.items())):
        index[code] = i
        d = {
            "id": code,
            "name": r.name,
            "shortDescription": {"text": r.summary or r.name},
            "fullDescription": {"text": catalog.description(code) or r.summary or r.name},
            "defaultConfiguration": {"level": SARIF_LEVEL.get(r.severity, "warning"),
                                     "enabled": bool(r.default_enabled)},
            "properties": {"severity": r.severity},
        }
        descriptors.append(d)
    results = []
    for f in findings:
        res = {
            "ruleId": f.code,
            "level": SARIF_LEVEL.get(f.severity, "warning"),
            "message": {"text": _cell_prefix(f) + f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(f.path)},
                    "region": {"startLine": f.line, "startColumn": f.col + 1,
                               "endLine": f.end_line, "endColumn": f.end_col + 1},
                }
            }],
        }
        if f.code in index:
            res["ruleIndex"] = index[f.code]
        results.append(res)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "attncheck", "version": __version__,
                                "informationUri": "https://github.com/attncheck/attncheck",
                                "rules": descriptors}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def format_sarif(findings: list[Finding]) -> str:
    return json.dumps(sarif_log(findings), indent=2, ensure_ascii=False) + "\n"


def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def github_line(f: Finding) -> str:
    """A GitHub Actions workflow command: ``::error file=…,line=…,col=…,endLine=…,endColumn=…,
    title=ATT101 missing-scale::message``."""
    level = GITHUB_LEVEL.get(f.severity, "warning")
    props = (f"file={_gh_prop(f.path)},line={f.line},col={f.col + 1},endLine={f.end_line},"
             f"endColumn={f.end_col + 1},title={_gh_prop(f'{f.code} {f.name}')}")
    return f"::{level} {props}::{_gh_data(_cell_prefix(f) + f.message)}"


def format_github(findings: list[Finding]) -> str:
    return "".join(github_line(f) + "\n" for f in findings)


def statistics(findings: list[Finding]) -> list[dict]:
    """Per-code counts, most frequent first: ``{"code", "name", "count", "fixable"}``."""
    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    fixable = Counter(f.code for f in findings if f.fix is not None)
    return [{"code": c, "name": names[c], "count": n, "fixable": fixable[c]}
            for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def render_full(findings: list[Finding], sources: dict[str, str], console) -> None:
    """Rich output with source context: header, the lines of the finding with carets, fix hint."""
    from rich.text import Text

    style = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
    for f in findings:
        head = Text()
        head.append(f"{f.location}: ", style="bold")
        head.append(f.code, style=style.get(f.severity, "bold"))
        head.append(f" [{f.severity}] ", style="dim")
        head.append(f.message)
        console.print(head)
        lines = [ln.rstrip("\r\n") for ln in physical_lines(sources.get(source_key(f)) or "")]
        first, last = f.line, min(f.end_line, f.line + 4)
        width = len(str(last))
        for ln in range(max(first - 1, 1), last + 1):
            if ln > len(lines):
                break
            text = lines[ln - 1]
            row = Text(f" {ln:>{width}} │ ", style="blue")
            row.append(text)
            console.print(row)
            if first <= ln <= f.end_line:
                a = f.col if ln == first else len(text) - len(text.lstrip())
                b = f.end_col if ln == f.end_line else len(text)
                b = max(b, a + 1)
                mark = Text(" " * (width + 2) + "│ ", style="blue")
                mark.append(" " * a + "^" * (b - a), style=style.get(f.severity, "bold"))
                console.print(mark)
        if f.fix is not None:
            console.print(Text(f"  help: {f.fix.message} ({f.fix.applicability} fix)",
                               style="cyan"))
        console.print()
