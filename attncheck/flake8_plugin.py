"""flake8 entry point: run the attncheck rules inside an existing flake8 setup.

Registered in ``pyproject.toml`` as ``[project.entry-points."flake8.extension"] ATT =
"attncheck.flake8_plugin:Flake8Plugin"``, so ``flake8 --select ATT`` (or flake8's default
selection, which includes installed plugins) reports the attncheck codes::

    $ flake8 --select ATT src/
    src/model.py:12:18: ATT101 scores q @ k.transpose(-2, -1) reach softmax unscaled: ...

Conventions (flake8's plugin API, https://flake8.pycqa.org/en/latest/plugin-development/):

- flake8 classifies a plugin by the names of its ``__init__`` parameters; a plugin taking
  ``tree`` is an AST plugin, run once per file.  This plugin *accepts* ``tree`` for that reason
  but never uses it: it lints the file's ``lines`` (the text flake8 read, stdin included) with
  libcst, exactly as ``attncheck lint`` does.
- ``run()`` yields ``(line, col, "ATTnnn message", type)`` with a 1-based line and a 0-based
  column; flake8 prints ``col + 1``.  ``attncheck lint`` prints the same 1-based column in its
  concise format (JSON keeps the 0-based ``col``), so both tools point at the same character.
- ``# noqa`` / ``# noqa: ATT101`` is handled by flake8 itself.  attncheck's own comments
  (``# attncheck: ignore[ATT101]``, ``# attncheck: file-ignore[ATT101]``) are honoured too.
- Selection: flake8's ``--select``/``--ignore``/``--per-file-ignores`` apply as usual.  Rules
  that attncheck keeps off by default (the ``info`` rules, ATT6xx) are enabled with
  ``--attncheck-select`` (command line or ``[flake8] attncheck-select = ATT`` in the config),
  which takes the same selectors as ``attncheck lint --select`` (codes, prefixes, ``ALL``).
- A file that does not parse yields nothing here: flake8 reports it as ``E999``.

Linting never imports or executes the linted code and never imports torch.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from attncheck._version import __version__


def _codes(spec: str) -> tuple[str, ...]:
    return tuple(c.strip().upper() for c in spec.split(",") if c.strip())


def _selected_rules(select: Sequence[str] | None) -> list[type]:
    """Rule classes for ``select`` (codes / prefixes / ``ALL``); ``None`` → default-on rules."""
    from attncheck.lint.rule import all_rules

    registry = all_rules()
    if not select:
        return [r for r in registry.values() if r.default_enabled]
    prefixes = tuple("ATT" if s.upper() == "ALL" else s.upper() for s in select)
    return [r for code, r in registry.items() if code.startswith(prefixes)]


def _attncheck_directives(source: str) -> Any:
    """attncheck's own suppression comments (``# attncheck: ignore[...]`` on a line or the first
    line of its statement, ``# attncheck: file-ignore[...]``), parsed by
    :mod:`attncheck.lint.suppression`; ``# noqa`` is left to flake8."""
    from attncheck.lint import suppression as sup

    d = sup.Directives()
    for line, _col, text in sup.comments(source):
        for m in sup.IGNORE_RE.finditer(text):
            codes = sup._codes(m.group("codes"))
            if m.group("kind").lower() == "file-ignore":
                d.file = sup._merge(d.file, codes, True)
            else:
                d.lines[line] = sup._merge(d.lines.get(line), codes, line in d.lines)
    if d.lines:
        d.stmt_start = sup.statement_starts(source)
    return d


def lint_lines(lines: Sequence[str], filename: str,
               select: Sequence[str] | None = None) -> list[Any]:
    """Findings of the selected attncheck rules on one file's ``lines`` (with line endings).

    Returns a list of :class:`attncheck.lint.finding.Finding` sorted by (line, col, code); empty
    when the text does not parse.  ``# noqa`` is *not* applied here (flake8 applies it).
    """
    import libcst as cst

    from attncheck.lint.engine import run_rules

    source = "".join(lines)
    rules = _selected_rules(select)
    # Prefilter on raw text, as the engine does: a rule whose tokens are all absent cannot fire.
    rules = [r for r in rules if not r.tokens or any(t in source for t in r.tokens)]
    if not rules:
        return []
    try:
        findings = run_rules(source, filename, rules)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError):
        return []  # flake8 reports E999 for files that do not parse
    if not findings or "attncheck" not in source.lower():
        return findings
    directives = _attncheck_directives(source)
    return [f for f in findings if not directives.suppressed(f.line, f.code)]


class Flake8Plugin:
    """flake8 plugin running the attncheck rules (code prefix ``ATT``)."""

    name = "attncheck"
    version = __version__
    #: selectors from ``--attncheck-select``; ``None`` = attncheck's default-on rules
    select: tuple[str, ...] | None = None

    def __init__(self, tree: Any = None, lines: Sequence[str] = (), filename: str = "stdin"):
        # ``tree`` is accepted only so that flake8 classifies this as a per-file plugin.
        self.lines = list(lines)
        self.filename = filename

    @classmethod
    def add_options(cls, parser: Any) -> None:
        parser.add_option(
            "--attncheck-select", default="", parse_from_config=True, comma_separated_list=True,
            help="attncheck rule selectors to run (codes, prefixes, ALL); default: the rules "
                 "attncheck enables by default. Example: --attncheck-select=ATT")

    @classmethod
    def parse_options(cls, options: Any) -> None:
        sel = getattr(options, "attncheck_select", None) or []
        if isinstance(sel, str):
            sel = _codes(sel)
        cls.select = tuple(s.strip().upper() for s in sel if s.strip()) or None

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        for f in lint_lines(self.lines, self.filename, self.select):
            yield f.line, f.col, f"{f.code} {f.message}", type(self)
