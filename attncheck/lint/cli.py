"""``attncheck lint``, ``attncheck rules``, ``attncheck explain`` (click).

Exit status: 0 clean, 1 findings (``--exit-zero``: 0), 2 usage / config / internal error
(a path that does not exist or cannot be linted — a symlink loop, an unreadable directory, a
FIFO —, a file that cannot be read or written, invalid config, a rule crash reported as ATT001;
``--exit-zero`` does not change it).  With ``--fix`` and ``-`` (stdin) the fixed source is
written to stdout and the findings to stderr, as ruff does.
Never imports torch.
"""
from __future__ import annotations

import json
import sys

import click

from attncheck.lint.formatters import FORMATS


def _split(values: tuple[str, ...]) -> list[str] | None:
    if not values:
        return None
    out: list[str] = []
    for v in values:
        out.extend(s.strip() for s in v.split(",") if s.strip())
    return out


def _console(soft_wrap: bool = True, stderr: bool = False):
    from rich.console import Console

    return Console(highlight=False, soft_wrap=soft_wrap, stderr=stderr)


@click.command("lint")
@click.argument("paths", nargs=-1, type=str)
@click.option("--select", multiple=True, metavar="CODES",
              help="Rule codes/prefixes to enable (comma-separated or repeated; ALL = every rule). "
                   "Replaces the configured selection.")
@click.option("--extend-select", multiple=True, metavar="CODES",
              help="Rule codes/prefixes to enable in addition to the selection.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule codes/prefixes to disable.")
@click.option("--output-format", "--format", "output_format", type=click.Choice(FORMATS),
              default="concise", show_default=True,
              help="How findings are printed (--format is an alias, as for check and audit).")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of findings.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--config", "config_path", type=str, default=None, metavar="PATH",
              help="Config file (pyproject.toml with [tool.attncheck], or a bare TOML table). "
                   "Default: the nearest pyproject.toml above each path.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--force-exclude", is_flag=True,
              help="Apply exclude patterns even to paths named on the command line (as ruff "
                   "does; for pre-commit, which names every changed file).")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix/--diff: include unsafe fixes.")
@click.option("--diff", is_flag=True,
              help="Print the diff the fixes would make; change nothing. Exit 1 if any.")
@click.option("--add-noqa", is_flag=True,
              help="Append `# noqa: CODE` to every line with a finding (baseline a codebase).")
@click.option("--max-file-size", type=click.FloatRange(min=0), default=50, show_default=True,
              metavar="MB", help="Report larger files as ATT000 instead of reading them "
                                 "(0 = no limit).")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, show_default=True,
              help="Worker processes (0 = all usable cores; small runs stay in one process).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=str, default=None, metavar="DIR",
              help="Result cache directory (default: .attncheck_cache in the current directory, "
                   "or $ATTNCHECK_CACHE_DIR).")
@click.option("--no-regions", is_flag=True, hidden=True,
              help="Parse whole files instead of the regions the rules need (same findings; "
                   "for benchmarks and tests).")
def lint_cmd(paths, select, extend_select, ignore, output_format, statistics, exit_zero,
             config_path, isolated, force_exclude, fix, unsafe_fixes, diff, add_noqa,
             max_file_size, jobs, no_cache, cache_dir, no_regions):
    """Lint PATHS (files, directories, or - for stdin; default: .) for attention bugs."""
    from attncheck.config import ConfigError
    from attncheck.lint.engine import lint_paths

    if not paths:
        paths = (".",)
    if no_cache:
        cache_dir = None
    elif cache_dir is None:
        import os

        from attncheck.lint.cache import DEFAULT_DIR

        cache_dir = os.environ.get("ATTNCHECK_CACHE_DIR") or DEFAULT_DIR
    if add_noqa and (fix or diff):
        raise click.UsageError("--add-noqa cannot be combined with --fix/--diff")
    try:
        result = lint_paths(
            paths, select=_split(select), ignore=_split(ignore),
            extend_select=_split(extend_select), config=config_path, isolated=isolated,
            fix=fix, unsafe_fixes=unsafe_fixes, diff=diff, jobs=jobs, add_noqa=add_noqa,
            regions=False if no_regions else None, cache_dir=cache_dir,
            max_file_size=int(max_file_size * 1e6) if max_file_size else None,
            force_exclude=force_exclude)
    except ConfigError as exc:
        click.echo(f"attncheck: error: {exc}", err=True)
        sys.exit(2)

    for err in result.errors:
        click.echo(f"attncheck: error: {err}", err=True)
    if not result.files and not result.errors:  # like ruff: nothing linted is worth a word
        click.echo("attncheck: warning: No Python files found under the given path(s)", err=True)

    if add_noqa:
        sys.exit(_add_noqa(result))
    if diff:
        from attncheck.lint.fixes import unified_diff

        for path, (old, new) in sorted(result.diffs.items()):
            click.echo(unified_diff(path, old, new), nl=False)
        n = result.diff_files
        click.echo(f"Would fix {result.fixed} finding(s) in {n} file(s).", err=True)
        sys.exit(2 if result.errors else (1 if n else 0))

    # --fix on stdin: the fixed source is the output (ruff's behaviour); the report goes to stderr
    to_stderr = fix and "-" in paths
    if to_stderr and result.stdin_output is not None:
        click.echo(result.stdin_output, nl=False)  # bytes: written to the binary stream as is
    _report(result, output_format, statistics, fix, err=to_stderr, unsafe_fixes=unsafe_fixes)
    sys.exit(result.exit_code(exit_zero))


def _report(result, output_format, statistics, fix, err: bool = False,
            unsafe_fixes: bool = False) -> None:
    from attncheck.lint import formatters

    findings = result.findings
    if statistics:
        stats = formatters.statistics(findings)
        if output_format == "json":
            click.echo(json.dumps(stats, indent=2))
        else:
            for s in stats:
                mark = "[*] " if s["fixable"] else ""
                click.echo(f"{s['count']:>5}  {s['code']}  {mark}{s['name']}", err=err)
    elif output_format == "concise":
        click.echo(formatters.format_concise(findings), nl=False, err=err)
    elif output_format == "full":
        formatters.render_full(findings, result.sources, _console(stderr=err))
    elif output_format == "json":
        click.echo(formatters.format_json(findings), nl=False, err=err)
    elif output_format == "sarif":
        click.echo(formatters.format_sarif(findings), nl=False, err=err)
    elif output_format == "github":
        click.echo(formatters.format_github(findings), nl=False, err=err)

    if output_format in ("concise", "full") or statistics and output_format != "json":
        _summary(result, fix, err=err, unsafe_fixes=unsafe_fixes)


def _summary(result, fix: bool, err: bool = False, unsafe_fixes: bool = False) -> None:
    n = len(result.findings)
    files = len({f.path for f in result.findings})
    fixed = f"Fixed {result.fixed} finding(s). " if fix else ""
    if n == 0 and result.errors:
        click.echo(f"{fixed}No findings in {len(result.files)} file(s) checked, but "
                   f"{len(result.errors)} path(s) could not be linted.", err=err)
    elif n == 0:
        click.echo(f"{fixed}All checks passed! ({len(result.files)} file(s) checked)", err=err)
    else:
        safe = sum(1 for f in result.findings if f.fix is not None
                   and f.fix.applicability == "safe")
        unsafe = sum(1 for f in result.findings if f.fix is not None) - safe
        hints = []
        if safe and not fix:
            hints.append(f"{safe} fixable with --fix")
        if unsafe and not (fix and unsafe_fixes):
            hints.append(f"{unsafe} fixable with --fix --unsafe-fixes (unsafe: they change "
                         "numerics; --fix alone does not apply them)" if fix else
                         f"{unsafe} fixable with --fix --unsafe-fixes")
        hint = f"\n{'; '.join(hints)} (preview with --diff)." if hints else ""
        click.echo(f"{fixed}Found {n} finding(s) in {files} of {len(result.files)} file(s)."
                   f"{hint}", err=err)


def _add_noqa(result) -> int:
    """Report what ``lint_paths(add_noqa=True)`` wrote: 0 when every finding that comments can
    suppress now has one, 1 when some could not be placed (listed), 2 on errors."""
    click.echo(f"Added {result.noqa_added} noqa directive(s).")
    unplaced = result.noqa_unplaced
    stdin = [f for f in result.findings if f.path == "-" and f.code not in ("ATT000", "ATT001")]
    for f in unplaced:
        click.echo(f"attncheck: could not add a noqa comment for {f.location}: {f.code} "
                   "(no line of its statement can hold a comment)", err=True)
    if stdin:
        click.echo(f"attncheck: {len(stdin)} finding(s) on stdin: --add-noqa writes files only",
                   err=True)
    if result.errors:
        return 2
    return 1 if unplaced or stdin else 0


@click.command("rules")
@click.option("--output-format", "--format", "fmt", type=click.Choice(["table", "json"]),
              default="table", show_default=True)
def rules_cmd(fmt):
    """List the rule catalog: code, name, severity, default on/off, fix."""
    from attncheck.lint import catalog
    from attncheck.lint.rule import all_rules

    rows = [{"code": c, "name": r.name, "severity": r.severity,
             "default_enabled": bool(r.default_enabled), "fix": catalog.fix_kind(c) or "none",
             "summary": r.summary}
            for c, r in all_rules().items()]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    console = _console(soft_wrap=False)
    if not console.is_terminal or console.width < 100:
        # piped or narrow: one aligned line per rule (a wrapped table is unreadable there)
        cells = [(r["code"], r["name"], r["severity"],
                  "on" if r["default_enabled"] else "off", r["fix"]) for r in rows]
        widths = [max(len(c[i]) for c in cells) for i in range(5)]
        for r, c in zip(rows, cells):
            click.echo("  ".join(v.ljust(w) for v, w in zip(c, widths)) + "  " + r["summary"])
        return
    from rich.table import Table

    table = Table(title="attncheck rules", show_lines=False)
    for col in ("code", "name", "severity", "default", "fix"):
        table.add_column(col, no_wrap=True)
    table.add_column("summary", overflow="fold")
    for r in rows:
        table.add_row(r["code"], r["name"], r["severity"], "on" if r["default_enabled"] else "off",
                      r["fix"], r["summary"])
    console.print(table)


@click.command("explain")
@click.argument("code")
@click.option("--raw", is_flag=True, help="Print the Markdown source instead of rendering it.")
def explain_cmd(code, raw):
    """Print the catalog page of rule CODE (e.g. ATT101, or its name: missing-scale)."""
    from attncheck.lint import catalog
    from attncheck.lint.rule import all_rules

    registry = all_rules()
    wanted = code.strip()
    match = wanted.upper() if wanted.upper() in registry else next(
        (c for c, r in registry.items() if r.name == wanted.lower()), None)
    if match is None:
        click.echo(f"attncheck: error: unknown rule {code!r}. Known rules: "
                   f"{', '.join(registry)}", err=True)
        sys.exit(2)
    text = catalog.page(match)
    if text is None:
        r = registry[match]
        click.echo(f"attncheck: error: no catalog page for {match} ({r.name}); "
                   f"summary: {r.summary}", err=True)
        sys.exit(2)
    if raw or not sys.stdout.isatty():
        click.echo(text, nl=not text.endswith("\n"))
    else:
        from rich.markdown import Markdown

        _console(soft_wrap=False).print(Markdown(text))


COMMANDS = [lint_cmd, rules_cmd, explain_cmd]
