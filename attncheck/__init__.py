"""attncheck: a linter and diagnostic test suite for attention code.

Public API (imported lazily so that ``attncheck lint`` never imports torch):

- ``lint_paths(paths, ...)`` → list of :class:`Finding`  (static rules, ``attncheck.lint``)
- ``check(target, ...)`` → :class:`Report`  (dynamic checks, ``attncheck.dynamic``)
- ``target(obj, **hints)`` → a target object with explicit calling-convention hints
- ``audit(spec, ...)`` → :class:`Report`  (third-party models: lint + checks)
"""
from __future__ import annotations

from attncheck._version import __version__

__all__ = ["__version__", "lint_paths", "lint_source", "check", "target", "audit", "Finding",
           "CheckResult", "Report"]

_LAZY = {
    "lint_paths": ("attncheck.lint.engine", "lint_paths"),
    "lint_source": ("attncheck.lint.engine", "lint_source"),
    "Finding": ("attncheck.lint.finding", "Finding"),
    "CheckResult": ("attncheck.results", "CheckResult"),
    "Report": ("attncheck.results", "Report"),
    "check": ("attncheck.dynamic.runner", "check"),
    "target": ("attncheck.dynamic.targets", "target"),
    "audit": ("attncheck.audit.runner", "audit"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'attncheck' has no attribute {name!r}")
