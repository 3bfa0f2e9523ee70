"""Configuration: the ``[tool.attncheck]`` table of the nearest ``pyproject.toml``.

Lookup (like ruff): starting at the linted path (its directory for a file, the current directory
for ``-``), walk up the parents; the first ``pyproject.toml`` that *has* a ``[tool.attncheck]``
table wins (``pyproject.toml`` files without one are skipped).  ``--config PATH`` names the file
explicitly: a ``pyproject.toml`` is read through its ``[tool.attncheck]`` table, any other TOML
file (e.g. ``attncheck.toml``) is the table itself.

Keys (all optional)::

    [tool.attncheck]
    select = ["ATT1", "ATT201"]          # codes / prefixes / "ALL"; default: the default-on rules
    extend-select = ["ATT601"]           # added to the selection
    ignore = ["ATT205"]                  # removed (the more specific selector wins)
    exclude = ["fixtures/*", "legacy"]   # globs relative to this file's directory (+ defaults)
    per-file-ignores = { "tests/*" = ["ATT101"] }
    lint = ["src"]                       # pytest --attncheck: paths to lint
    targets = ["pkg.mod:factory"]        # pytest --attncheck: dynamic-check targets

An unknown key or a value of the wrong type raises :class:`ConfigError` naming the file, the key
and the expected type; the CLI turns it into exit status 2.  TOML is read with :mod:`tomllib`
(``tomli`` on Python 3.10).
"""
from __future__ import annotations

import difflib

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(Exception):
    """Invalid configuration (unknown key, wrong type, unreadable TOML, bad rule selector)."""


#: A rule selector: ``ALL``, or ``ATT`` followed by 0-3 digits (a code or a code prefix).
SELECTOR_RE = re.compile(r"^(ALL|ATT\d{0,3})$")

_LIST_OF_STR = "a list of strings"
_SCHEMA: dict[str, str] = {
    "select": _LIST_OF_STR,
    "extend-select": _LIST_OF_STR,
    "ignore": _LIST_OF_STR,
    "exclude": _LIST_OF_STR,
    "per-file-ignores": "a table mapping glob patterns to lists of rule codes",
    "lint": _LIST_OF_STR,
    "targets": "a list of target specs (strings, or inline tables with a 'spec' string)",
}
_SELECTOR_KEYS = ("select", "extend-select", "ignore")


@dataclass
class Config:
    """Validated lint settings.

    ``root`` is the directory that relative globs (``exclude``, ``per-file-ignores``) are
    resolved against: the config file's directory, or the current directory without a file.
    ``select`` is ``None`` when not set (→ the default-on rules).  ``extra`` keeps the keys other
    front ends read (``lint``, ``targets``).
    """

    path: Path | None = None
    root: Path = field(default_factory=Path.cwd)
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def validate_selectors(values: list[str], where: str) -> list[str]:
    """Upper-case and check rule selectors; raise :class:`ConfigError` naming ``where``."""
    out = []
    for v in values:
        s = v.strip().upper()
        if not SELECTOR_RE.match(s):
            raise ConfigError(
                f"{where}: invalid rule selector {v!r}: expected a rule code (ATT101), "
                f"a prefix (ATT1, ATT) or ALL")
        out.append(s)
    return out


def _expect_list_of_str(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ConfigError(f"{where}: expected a list of strings, got {type(value).__name__} "
                          f"{value!r}")
    return list(value)


def parse_table(table: Any, source: str, root: Path, path: Path | None = None) -> Config:
    """Validate a ``[tool.attncheck]`` table (a dict) read from ``source`` (for messages)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.attncheck] must be a table")
    cfg = Config(path=path, root=root)
    for key, value in table.items():
        where = f"{source}: [tool.attncheck] {key}"
        if key not in _SCHEMA:
            known = ", ".join(sorted(_SCHEMA))
            hint = ""
            close = difflib.get_close_matches(key.replace("_", "-"), list(_SCHEMA), n=1)
            if close:
                hint = f" (did you mean {close[0]!r}?)"
            raise ConfigError(f"{source}: unknown key {key!r} in [tool.attncheck]{hint}; "
                              f"known keys: {known}")
        if key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: expected {_SCHEMA[key]}, got "
                                  f"{type(value).__name__}")
            pfi = {}
            for pattern, codes in value.items():
                codes = _expect_list_of_str(codes, f"{where}.{pattern!r}")
                pfi[pattern] = validate_selectors(codes, f"{where}.{pattern!r}")
            cfg.per_file_ignores = pfi
            continue
        if key == "targets":  # spec strings or { spec = "...", <hints> } (pytest plugin)
            if not isinstance(value, list) or not all(
                    isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("spec"), str))
                    for x in value):
                raise ConfigError(f"{where}: expected {_SCHEMA[key]}, got {value!r}")
            cfg.extra[key] = list(value)
            continue
        value = _expect_list_of_str(value, where)
        if key in _SELECTOR_KEYS:
            value = validate_selectors(value, where)
        if key == "select":
            cfg.select = value
        elif key == "extend-select":
            cfg.extend_select = value
        elif key == "ignore":
            cfg.ignore = value
        elif key == "exclude":
            cfg.exclude = value
        else:
            cfg.extra[key] = value
    return cfg


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


def load_config(path: str | Path) -> Config:
    """Load an explicit config file (``--config``).

    ``pyproject.toml`` → its ``[tool.attncheck]`` table (an error when it has none); any other
    file → the whole file is the table.  Raises :class:`ConfigError`.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {path}")
    data = _read_toml(p)
    if p.name == "pyproject.toml":
        table = data.get("tool", {}).get("attncheck")
        if table is None:
            raise ConfigError(f"{p}: no [tool.attncheck] table")
    else:
        table = data
    return parse_table(table, str(p), p.resolve().parent, p.resolve())


@lru_cache(maxsize=256)
def _config_in_dir(directory: Path) -> Config | None:
    candidate = directory / "pyproject.toml"
    if not candidate.is_file():
        return None
    data = _read_toml(candidate)
    table = data.get("tool", {}).get("attncheck")
    if table is None:
        return None
    return parse_table(table, str(candidate), directory, candidate)


def find_config(start: str | Path) -> Config:
    """The config governing ``start`` (a file or a directory): the nearest ``pyproject.toml``
    above it that has ``[tool.attncheck]``; an empty :class:`Config` rooted at the current
    directory when there is none."""
    p = Path(start).resolve()
    directory = p if p.is_dir() else p.parent
    for d in (directory, *directory.parents):
        cfg = _config_in_dir(d)
        if cfg is not None:
            return cfg
    return Config(root=Path.cwd())


def clear_cache() -> None:
    """Forget cached config lookups (tests; long-running processes after edits)."""
    _config_in_dir.cache_clear()
