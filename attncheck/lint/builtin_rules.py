"""Engine-level rules: they have no visitor; the engine reports them itself.

- ``ATT000 parse-error``: the file cannot be read as Python source (syntax error, undecodable
  bytes, NUL bytes).  The other files are still linted.
- ``ATT001 internal-error``: a rule raised an exception on this file; the finding names the rule
  and the exception, the other rules' findings on the file are still reported.

Both are reported whatever ``select`` says (like ruff's syntax errors) unless ignored by their
exact code (``ignore = ["ATT000"]`` or ``per-file-ignores``); inline comments do not suppress them.
"""
from __future__ import annotations

from attncheck.lint.rule import Rule, register


@register
class ParseError(Rule):
    code = "ATT000"
    name = "parse-error"
    severity = "error"
    summary = "file cannot be parsed (syntax error, undecodable bytes, NUL bytes)"
    engine_only = True


@register
class InternalError(Rule):
    code = "ATT001"
    name = "internal-error"
    severity = "error"
    summary = "a rule raised an exception on this file (a bug in attncheck: please report it)"
    engine_only = True


ENGINE_CODES = frozenset({ParseError.code, InternalError.code})
