"""Region selection: hand libcst only the top-level statements that can matter.

Most of a large modeling file is configuration, docstrings, pre-trained-model glue and classes
that never touch attention scores.  Parsing them with libcst (about 15 k lines/s) dominates the
cost of a lint run, so the engine parses a *blanked* copy of the file instead: every line of a
top-level ``def``/``class`` that no enabled rule can need is replaced by an empty line.  Line
numbers and columns of what is kept are unchanged, so findings, suppression comments and fix
edits need no mapping, and ``code_for_node`` of a kept node is its original text.

Selection (:func:`select`), in text only — no tokenizer, no ``ast``:

1. **Chunks.**  A line starting in column 0 with ``def``/``async def``/``class`` (or a run of
   decorators ``@…`` followed by one) starts a *definition chunk*; any other code line in column
   0 (imports, assignments, ``if …:`` blocks, ``__all__``) starts an *other chunk*, which is
   always kept (imports, module constants, module-level code the rules visit).  Closing
   brackets in column 0 continue the current chunk.
2. **Seeds.**  A definition chunk is kept when its text contains a prefilter token of an
   enabled rule (the same tokens as the file-level prefilter).
3. **Closure**, to a fixed point, so the shared analyses see what they follow:
   *down* — a kept chunk keeps every definition whose name it mentions (base classes,
   same-file helpers such as ``eager_attention_forward``/``repeat_kv``, functions called
   from module-level code); *up* — a kept top-level *function* keeps every chunk that mentions
   its name (callers pass arguments into it and the analyses inline it at those call sites;
   :mod:`~attncheck.lint.analysis.provenance` analyses a called helper only inlined).
4. **Check.**  The names of the top-level definitions libcst finds in the blanked text must be
   the kept definition chunks, in order; otherwise (a ``def`` line inside a string, unusual
   line endings) — and whenever the blanked text does not parse — the engine parses the whole
   file.  ``FileContext.source`` stays the whole text (the provenance analysis scans it for
   callers).

Known limit: a syntax error inside a blanked definition is not reported (as for files the
prefilter skips); parsed text is syntax-checked as before.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_DEF = re.compile(r"(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_]\w*)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_CALLED = re.compile(r"([A-Za-z_]\w*)[ \t]*\(")
_LOCAL_IMPORT = re.compile(r"^[ \t]+(?:import|from)[ \t]", re.M)

#: Files shorter than this are parsed whole (the selection would not pay for itself).
MIN_LINES = 200


@dataclass
class Chunk:
    start: int          # first line index (0-based)
    end: int            # one past the last line
    name: str | None    # definition name; None for an "other" chunk
    keep: bool = False


@dataclass
class Selection:
    """The text to parse (``text``: the original with dropped definitions blanked) and the
    names of the kept top-level definitions in order (for the post-parse check)."""

    text: str
    kept_defs: list[str]
    kept_lines: int
    total_lines: int


def chunks(lines: list[str]) -> list[Chunk]:
    """Split ``lines`` (without line ends) into top-level chunks (see module docstring)."""
    out: list[Chunk] = []
    in_decorators = False
    for i, line in enumerate(lines):
        if not line:
            continue
        c = line[0]
        if c in " \t\r\f#)]}":
            continue
        if c == "@":
            if not in_decorators:
                out.append(Chunk(i, i, ""))
                in_decorators = True
            continue
        m = _DEF.match(line)
        if m:
            if in_decorators:
                out[-1].name = m.group(1)
                in_decorators = False
            else:
                out.append(Chunk(i, i, m.group(1)))
            continue
        if in_decorators:  # a decorator argument continued in column 0: stay in the chunk
            continue
        if out and out[-1].name is None:
            continue  # consecutive module-level code: one chunk
        out.append(Chunk(i, i, None))
    for a, b in zip(out, out[1:]):
        a.end = b.start
    if out:
        out[-1].end = len(lines)
    return out


def select(text: str, tokens: Iterable[str] | None) -> Selection | None:
    """The blanked text to parse, or ``None`` when the whole file must be parsed (``tokens``
    is ``None``: a rule without tokens is enabled; the file is small; nothing would be
    dropped; unusual line ends)."""
    if tokens is None:
        return None
    if "\r" in text and "\r" in text.replace("\r\n", ""):
        return None  # lone CR line ends: Python's line count differs from split("\n")
    lines = text.split("\n")
    if len(lines) < MIN_LINES:
        return None
    parts = chunks(lines)
    defs = [c for c in parts if c.name]
    if not defs or any(c.name == "" for c in parts):
        return None
    tokens = tuple(tokens)
    texts = ["\n".join(lines[c.start:c.end]) for c in parts]
    by_name: dict[str, list[int]] = {}
    for idx, c in enumerate(parts):
        if c.name:
            by_name.setdefault(c.name, []).append(idx)
    names = set(by_name)
    mentions: list[set[str]] = []
    for idx, c in enumerate(parts):
        if c.name is None:
            c.keep = True
            mentions.append(set(_CALLED.findall(texts[idx])) & names)
        else:
            found = set(_IDENT.findall(texts[idx])) & names
            found.discard(c.name)
            mentions.append(found)
            if any(t in texts[idx] for t in tokens) or _LOCAL_IMPORT.search(texts[idx]):
                c.keep = True  # a local import feeds the file's alias table
    functions = {c.name for c in parts if c.name and _is_function(lines, c)}
    changed = True
    while changed:
        changed = False
        # definitions sharing a name stand or fall together (the analyses keep the last one)
        kept_names = {c.name for c in parts if c.keep and c.name}
        kept_functions = kept_names & functions
        for idx, c in enumerate(parts):
            if c.keep:
                wanted = mentions[idx]
            elif c.name in kept_names or mentions[idx] & kept_functions:
                c.keep = changed = True
                wanted = mentions[idx]
            else:
                continue
            for n in wanted:
                for j in by_name[n]:
                    if not parts[j].keep:
                        parts[j].keep = changed = True
    if all(c.keep for c in parts):
        return None
    out = list(lines)
    kept = 0
    for c in parts:
        if c.keep:
            kept += c.end - c.start
            continue
        for i in range(c.start, c.end):
            out[i] = ""
    return Selection("\n".join(out), [c.name for c in parts if c.keep and c.name],
                     kept, len(lines))


def _is_function(lines: list[str], c: Chunk) -> bool:
    for i in range(c.start, c.end):
        m = _DEF.match(lines[i])
        if m:
            return not lines[i].startswith("class")
    return False


def top_level_def_names(module) -> list[str]:
    """Names of a libcst module's top-level ``def``/``class`` statements, in order."""
    import libcst as cst

    return [s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))]
