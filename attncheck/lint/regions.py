"""Region selection: hand libcst only the functions and methods that can matter.

Most of a large modeling file is configuration, docstrings, pre-trained-model glue and methods
that never touch attention scores.  Parsing them with libcst (about 15 k lines/s) and running the
analyses over them dominates a lint run, so the engine parses a *blanked* copy of the file
instead: every line of a *unit* that no enabled rule can need is replaced by an empty line.  Line
numbers and columns of what is kept are unchanged, so findings, suppression comments and fix
edits need no mapping, and ``code_for_node`` of a kept node is its original text.

Selection (:func:`select`) works on the text alone — no tokenizer, no ``ast``:

1. **Units.**  A line starting in column 0 with ``def``/``async def``/``class`` (or a run of
   decorators ``@…`` followed by one) starts a top-level definition; any other code line in
   column 0 starts a module-level statement (``else``/``except``/``finally`` and text inside a
   triple-quoted string continue one).  A class is cut further at its body's indentation: each
   method (with its decorators) is a unit; the header and the other statements of the body
   (docstring, class attributes) form the class *shell*.
2. **Seeds.**  Each enabled rule has a trigger (:class:`Trigger`: a regular expression, and for
   some rules the method names it can fire in).  A unit is a seed when a trigger matches inside
   it, or when it mentions a name bound to a match: a module-level name (``NEG_INF = -1e9``),
   or an attribute the class shell or any method binds to one (``self.softmax =
   nn.Softmax(-1)``, ``register_buffer("bias", torch.tril(...))``, ``big = -1e9`` then
   ``self.fill = big``) — method units reached through ``self.<attr>``.  A unit holding an
   import that is not a plain module-level statement (indented, or after ``:``/``;``) is kept
   too (it feeds the alias table).  A rule limited to ``forward`` (``methods``) also seeds a
   unit with a nested ``def forward`` (a class defined in a function or class); a rule whose
   context must be in the same scope (``context_scope = "unit"``) sees all module code as one
   scope, and a class body's statements as one (the rules pool them in one frame).
3. **Closure**, to a fixed point, so the shared analyses see what they follow:
   a kept method keeps its class shell and ``__init__`` (attributes, buffers); a kept unit keeps
   the top-level functions it mentions (helpers the analyses inline), the module-level names it
   mentions (constants), the methods of its class and its same-file bases it mentions
   (``self.helper()``), and — from a class header — its base classes as shells (a class merely
   instantiated in a body is not followed: the analyses never resolve into it).  Every kept
   function or method (``forward`` and private ``__m`` included; not the dunders, called by
   syntax) also keeps its callers, and so do those callers, transitively: a called helper is
   analysed only inlined at its call sites, with the caller's arguments, and the mask analysis
   binds a helper's parameters to the join of the arguments of every same-file call.  A class
   whose body would be empty keeps its first method.  Imports feed the alias table: an absolute import is kept when a kept unit uses a
   name it binds (``import torch`` always: rules look up torch's local name), a relative one
   never (the table ignores them), and a unit holding a local import always.
4. **Check.**  After parsing, the top-level definitions libcst finds must be the kept ones, in
   order, and each kept class must hold exactly the kept methods (:func:`structure_matches`).
   Otherwise (a ``def`` line inside a string, unusual line endings), and whenever the blanked
   text does not parse, the engine parses the whole file.  (A blanked "method" that was really
   text inside a string leaves a shorter string: harmless, strings are not analysed.)
   ``FileContext.source`` stays the whole text.

Triggers must over-approximate where a rule can report: findings are checked to equal a
whole-file parse (``tests/test_engine_perf.py`` and ``tests/test_regions.py``: every fixture,
handed case and rule-page example, real transformers modeling files, generated modules;
``--no-regions`` parses whole files, and ``bench/lint_bench.py --compare-whole`` diffs a whole
tree).  Syntax errors anywhere are still reported: the engine screens every file with CPython's
parser first.
"""
from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate

_DEF = re.compile(r"(?:async[ \t]+def|def|class)[ \t]+([^\W\d]\w*)")
_METHOD = re.compile(r"(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)")
_IDENT = re.compile(r"[^\W\d]\w*")
_CALLED = re.compile(r"([^\W\d]\w*)[ \t]*\(")
#: an import that is not a plain module-level statement: indented, or after ``;`` / ``:`` on a
#: line (``try: import …``, ``X = 1; import …``, ``def f(): import …``); the import table reads
#: every import of the file, so a unit holding one is always kept
_LOCAL_IMPORT = re.compile(r"(?:import|from)[ \t]")  # then :func:`_local_import_at` looks back
#: a nested ``def`` (a method of a class inside a function or class)
_NESTED_DEF = re.compile(r"^[ \t]+(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)", re.MULTILINE)
#: ``self.x = … name …`` (an attribute set from a local)
_SELF_SET = re.compile(r"self\.([^\W\d]\w*)[ \t]*(?::[^=\n;]*)?=(?!=)([^\n;]*)")
#: ``x = … name …`` at the start of a line (a local set from another)
_LOCAL_SET = re.compile(r"^[ \t]*([^\W\d]\w*)[ \t]*(?::[^=\n;]*)?=(?!=)([^\n;]*)", re.MULTILINE)
#: ``.name(`` — a method called on something
_ATTR_CALL = re.compile(r"\.[ \t]*([^\W\d]\w*)[ \t]*\(")
#: a form feed starting a line (Python resets the indentation count there)
_FORM_FEED = re.compile(r"^[ \t]*\f", re.MULTILINE)
#: blank and comment lines at the start of a unit
_LEADING_COMMENTS = re.compile(r"\A(?:[ \t]*(?:#[^\n]*)?\n)+")
_SELF_ATTR = re.compile(r"self\.([^\W\d]\w*)")
#: the name a statement binds: ``x = …``, ``self.x = …``, ``x: T = …``, ``register_buffer("x", …``
_BINDING = re.compile(r"(?:self\.)?([^\W\d]\w*)[ \t]*(?::[^=\n]*)?=(?!=)|"
                      r"register_(?:buffer|parameter)\(\s*[\"']([^\W\d]\w*)[\"']")

#: Files shorter than this are parsed whole (the selection would not pay for itself).
MIN_LINES = 40

#: how many lines above a trigger match are searched for the statement's binding
_BINDING_WINDOW = 4


@dataclass(frozen=True)
class Trigger:
    """Where a rule can report: one of ``patterns`` matches inside the unit (or a name it
    mentions is bound to a match), and when ``methods`` is set the unit is a method of that
    name."""

    patterns: tuple[re.Pattern, ...]
    methods: frozenset[str] | None = None
    #: also required, in the method itself or its class shell (the class body's other
    #: statements, ``__init__`` and the same of its same-file bases); not checked for
    #: module-level functions and code
    context: tuple[re.Pattern, ...] | None = None
    #: the context must match in the unit itself (not its class shell)
    context_unit: bool = False
    #: for a rule whose analysis reads neither parameter defaults nor class-body statements (the
    #: mask analysis): matches inside comments, docstrings (triple-quoted strings), the parameter
    #: lists of ``def`` statements and class bodies outside methods do not count
    code_only: bool = False
    #: also required anywhere in the file (the prefilter skips the rule otherwise): what the
    #: rule's analysis cannot report without (ATT204's fill must be applied by code that reads
    #: a name), so a file of big literals alone — a generated data module — is not parsed
    requires: tuple[re.Pattern, ...] | None = None


def trigger_of(rule) -> Trigger | None:
    """A rule's trigger: its ``pattern`` (a regular expression or a tuple of them) or else its
    ``tokens`` (substrings); ``None`` for a rule with neither (it must see every file whole)."""
    cached = rule.__dict__.get("_trigger_cache")
    if cached is not None:
        return cached or None
    src = getattr(rule, "pattern", None)
    if isinstance(src, str):
        src = (src,)
    if not src:
        toks = tuple(getattr(rule, "tokens", ()) or ())
        src = ("|".join(re.escape(t) for t in toks),) if toks else None
    trig = None
    if src:
        names = getattr(rule, "methods", None)
        ctx = getattr(rule, "context", None)
        if isinstance(ctx, str):
            ctx = (ctx,)
        req = getattr(rule, "requires", None)
        if isinstance(req, str):
            req = (req,)
        trig = Trigger(tuple(re.compile(s) for s in src), frozenset(names) if names else None,
                       tuple(re.compile(c) for c in ctx) if ctx else None,
                       getattr(rule, "context_scope", "class") == "unit",
                       bool(getattr(rule, "pattern_in_code", False)),
                       tuple(re.compile(r) if isinstance(r, str) else r for r in req)
                       if req else None)
    rule._trigger_cache = trig or False
    return trig


def _key(t: Trigger) -> tuple:
    return (tuple(p.pattern for p in t.patterns), t.methods,
            tuple(c.pattern for c in t.context) if t.context else None, t.context_unit, t.code_only,
            tuple(r.pattern for r in t.requires) if t.requires else None)


def triggers_of(rules: Iterable) -> tuple[Trigger, ...] | None:
    """Distinct triggers of ``rules``; ``None`` when one rule has none (parse whole files)."""
    out: dict[tuple, Trigger] = {}
    for r in rules:
        t = trigger_of(r)
        if t is None:
            return None
        out.setdefault(_key(t), t)
    return tuple(out.values())


@dataclass
class Chunk:
    start: int          # first line index (0-based)
    end: int            # one past the last line
    name: str | None    # definition name; None for an "other" chunk


@dataclass
class Unit:
    start: int
    end: int
    name: str | None    # def/class name; None for module code and class-shell statements
    kind: str           # "mod" | "func" | "class" (a class's shell part) | "meth"
    top: int            # index of the top-level chunk it belongs to
    keep: bool = False
    header: bool = False  # a class's header (decorators, ``class X(Base):``) or an unsplit class


@dataclass
class Selection:
    """The text to parse (``text``: the original with dropped units blanked), the names of the
    kept top-level definitions in order and, per kept class, its kept methods in order (for the
    post-parse check)."""

    text: str
    kept_defs: list[str]
    kept_lines: int
    total_lines: int
    kept_methods: list[list[str] | None] = field(default_factory=list)
    #: per kept top-level definition: does it hold a seed of one of ``walk`` triggers (see
    #: :func:`select`)?  The engine's tree walk skips the others.
    walk_defs: list[bool] = field(default_factory=list)




def _scan(line: str, state: str | None, stop: int | None = None) -> tuple[str | None, bool]:
    """Scan ``line`` (up to ``stop``) from string ``state`` (``None`` = code, else the open triple
    quote): returns the state at the end and whether the end lies in a ``#`` comment.  Single-
    and triple-quoted strings, backslash escapes and comments are followed; string prefixes
    need no handling (the quotes start the string)."""
    i, n = 0, len(line) if stop is None else min(stop, len(line))
    while i < n:
        if state is not None:
            j = line.find(state, i)
            while j >= 0:
                k = j
                while k > 0 and line[k - 1] == "\\":
                    k -= 1
                if (j - k) % 2 == 0:
                    break
                j = line.find(state, j + 1)
            if j < 0 or j >= n:
                return state, False
            state, i = None, j + 3
            continue
        c = line[i]
        if c == "#":
            return None, True
        if c == '"' or c == "'":
            if line.startswith(c * 3, i):
                state, i = c * 3, i + 3
                continue
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        i += 1
    return state, False


def in_strings(lines: list[str]) -> list[bool]:
    """Per line: does it start inside a triple-quoted string?  Lines holding a triple quote are
    scanned (strings, escapes and comments followed, see :func:`_scan`); a wrong guess (a
    string continued with a backslash) only makes the selection fall back or keep more."""
    out = [False] * len(lines)
    state = None
    for i, line in enumerate(lines):
        if state is not None:
            out[i] = True
            if state in line:
                state = _scan(line, state)[0]
        elif '"""' in line or "\'\'\'" in line:
            state = _scan(line, None)[0]
    return out


def _cut(lines: list[str], lo: int, hi: int, indent: str, definition: re.Pattern,
         strings: list[bool] | None) -> list[tuple[int, str | None]]:
    """Where the statements at ``indent`` in ``lines[lo:hi]`` start: ``(line, name)`` with the
    name of a definition (decorators included; ``""`` for decorators without one), or ``None``
    for other code (consecutive other statements are one piece).  Lines at other indentation,
    comments, closing brackets and lines inside triple-quoted strings continue a piece."""
    out: list[tuple[int, str | None]] = []
    n = len(indent)
    in_decorators = False
    for i in range(lo, hi):
        line = lines[i]
        if len(line) <= n or line[n] in " \t\r\f#)]}" or not line.startswith(indent) \
                or (strings is not None and strings[i]):
            continue
        if line[n] == "@":
            if not in_decorators:
                out.append((i, ""))
                in_decorators = True
            continue
        m = definition.match(line, n)
        if m:
            if in_decorators:
                out[-1] = (out[-1][0], m.group(1))
                in_decorators = False
            else:
                out.append((i, m.group(1)))
            continue
        if in_decorators:  # a decorator argument continued at this indentation
            continue
        if out and out[-1][1] is None:
            continue  # consecutive other statements: one piece
        out.append((i, None))
    return out


def chunks(lines: list[str], strings: list[bool] | None = None) -> list[Chunk]:
    """Split ``lines`` (without line ends) into top-level chunks (see module docstring);
    ``strings`` (:func:`in_strings`) marks lines inside triple-quoted strings, which continue
    the current chunk."""
    out = [Chunk(i, i, name) for i, name in _cut(lines, 0, len(lines), "", _DEF, strings)]
    for a, b in zip(out, out[1:]):
        a.end = b.start
    if out:
        out[-1].end = len(lines)
    return out


def _header_end(lines: list[str], start: int, end: int) -> int | None:
    """Index of the line ending the ``class …:`` header that starts at or after ``start``
    (decorators first), or ``None`` (a one-line class, or anything unusual)."""
    i = start
    while i < end and not lines[i].startswith("class"):
        i += 1
    depth = 0
    for j in range(i, min(end, i + 30)):
        line = lines[j]
        code = line.split("#", 1)[0] if "#" in line else line
        for ch in code:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
        if depth == 0:
            return j if code.rstrip().endswith(":") else None
    return None


def _split_class(lines: list[str], c: Chunk, top: int,
                 strings: list[bool] | None = None) -> list[Unit] | None:
    """The units of one top-level class chunk, or ``None`` to keep it in one piece."""
    h = _header_end(lines, c.start, c.end)
    if h is None:
        return None
    indent = None
    for j in range(h + 1, c.end):
        s = lines[j].lstrip(" \t")
        if s and not s.startswith("#"):
            indent = lines[j][: len(lines[j]) - len(s)]
            break
    if not indent:
        return None
    units = [Unit(c.start, h + 1, None, "class", top, header=True)]
    units += [Unit(i, i, name, "class" if name is None else "meth", top)
              for i, name in _cut(lines, h + 1, c.end, indent, _METHOD, strings)]
    if any(u.name == "" for u in units):
        return None
    for a, b in zip(units, units[1:]):
        a.end = b.start
    units[-1].end = c.end
    return units


_CONTINUES = ("else", "elif", "except", "finally", ")", "]", "}", "#", " ", "\t", "\r", "\f")
_ASSIGN_EQ = re.compile(r"(?<![=!<>])=(?!=)")


def _split_module_code(lines: list[str], c: Chunk, top: int,
                       strings: list[bool] | None = None) -> list[Unit]:
    """One unit per module-level statement of a chunk of module code (an ``if``/``try`` with its
    ``else``/``except`` is one statement; text inside a triple-quoted string continues the
    statement that opened it)."""
    if strings is None:
        strings = in_strings(lines)
    out = [Unit(c.start, c.end, None, "mod", top)]
    for j in range(c.start + 1, c.end):
        line = lines[j]
        if line and not strings[j] and not line.startswith(_CONTINUES):
            out[-1].end = j
            out.append(Unit(j, c.end, None, "mod", top))
    return out


_IMPORT = re.compile(r"(?:from[ \t]+([\w.]+)[ \t]+)?import[ \t]+(.*)", re.DOTALL)


def import_binds(text: str) -> set[str] | None:
    """Names a module-level ``import`` statement binds that the alias table can record
    (:class:`attncheck.lint.context.ImportTable`): none for a relative import or ``*``;
    ``None`` when the statement is not a plain import (keep it)."""
    if ";" in text or "\\" in text:
        return None
    m = _IMPORT.match(text)
    if not m:
        return None
    module, names = m.group(1), re.sub(r"#[^\n]*", "", m.group(2))
    if module is not None and module.startswith("."):
        return set()
    out: set[str] = set()
    for part in names.replace("(", " ").replace(")", " ").split(","):
        words = part.split()
        if not words:
            continue
        if words == ["*"]:
            continue
        if len(words) == 3 and words[1] == "as":
            out.add(words[2])
        elif len(words) == 1:
            out.add(words[0] if module is not None else words[0].split(".")[0])
        else:
            return None
    return out


def _module_binds(text: str) -> set[str]:
    """Names a module-level statement may bind: every identifier left of an assignment ``=`` in
    each ``;``-separated part (``X = …``, ``(X) = …``, ``a, b = …``, ``X: T = …``, ``X += …``;
    a superset: subscripts and keyword arguments add names too)."""
    out: set[str] = set()
    for part in text.split(";"):
        m = _ASSIGN_EQ.search(part)
        if m:
            out.update(_IDENT.findall(part, 0, m.start()))
    return out


def _signature_end(text: str, u: Unit, lines: list[str], line_starts: list[int]) -> int:
    """Offset of the closing parenthesis of a ``def``'s parameter list in unit ``u`` (decorators
    skipped), or 0 when it cannot be found cheaply (then nothing is excluded)."""
    for li in range(u.start, min(u.end, u.start + 40)):
        stripped = lines[li].lstrip()
        if stripped.startswith(("def ", "def\t", "async ")):
            k = text.find("(", line_starts[li])
            if k < 0:
                return 0
            depth = 0
            for j in range(k, min(len(text), k + 20000)):
                c = text[j]
                if c in "([{":
                    depth += 1
                elif c in ")]}":
                    depth -= 1
                    if depth == 0:
                        return j
                elif c in "\"'#":
                    return 0  # strings or comments in the signature: do not guess
            return 0
    return 0


def _in_comment_or_docstring(text: str, pos: int, lines: list[str], line_starts: list[int],
                             strings: list[bool]) -> bool:
    """Whether ``text[pos]`` lies in a ``#`` comment or a triple-quoted string (single-quoted
    strings count as code, so ``float("-1e9")`` is still seen)."""
    li = bisect.bisect_right(line_starts, pos) - 1
    state = None
    if strings[li]:
        # which quote is open is not recorded: scan from the line that opened the string
        k = li
        while k > 0 and strings[k]:
            k -= 1
        for j in range(k, li):
            state = _scan(lines[j], state)[0]
    state, comment = _scan(lines[li], state, pos - line_starts[li])
    return comment or state is not None


def _local_import_at(text: str, pos: int) -> bool:
    """Whether the ``import``/``from`` at ``pos`` starts an import that is not a plain module-level
    statement: indented, or after ``;`` or ``:`` on its line."""
    if pos and (text[pos - 1].isalnum() or text[pos - 1] in "_."):
        return False  # part of a longer name (``reimport``, ``x.from``)
    j = pos - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return (j >= 0 and text[j] in ";:") or (j < pos - 1 and (j < 0 or text[j] == "\n"))


def _bound_names(text: str, pos: int) -> tuple[set[str], str]:
    """The names bound by the statement holding ``text[pos]`` (searched a few lines up), every
    name of a tuple target (``self.sm, self.drop = nn.Softmax(1), …``), and the target text."""
    lo = pos
    for _ in range(_BINDING_WINDOW):
        k = text.rfind("\n", 0, lo)
        if k < 0:
            lo = 0
            break
        lo = k
    last = None
    for m in _BINDING.finditer(text, lo, pos):
        last = m
    if last is None:
        return set(), ""
    if last.group(2):
        return {last.group(2)}, ""
    target = text[text.rfind("\n", 0, last.start()) + 1:last.end() - 1]
    names = {last.group(1)}
    if "," in target:
        names.update(n for n in _IDENT.findall(target) if n != "self")
    return names, target


def select(text: str, triggers, why: dict | None = None,
           walk: Iterable[Trigger] | None = None) -> Selection | None:
    """The blanked text to parse, or ``None`` when the whole file must be parsed.

    ``triggers``: the enabled rules' :class:`Trigger` s (:func:`triggers_of`), or plain
    substrings (any of them seeds a unit); ``None`` when a rule without a trigger is enabled.
    ``None`` is also returned for a small file, when nothing would be dropped, or for unusual
    line ends and form feeds.  ``why`` (a debugging aid): filled with ``first line → reason`` of each kept
    unit.  ``walk``: the triggers of rules that visit nodes (``visit_Call`` …): a kept
    top-level definition without a seed of theirs is marked in :attr:`Selection.walk_defs` as
    not needing the tree walk (those rules cannot report there; the module-level analyses still
    see it)."""
    if triggers is None:
        return None
    if not isinstance(triggers, tuple) or not all(isinstance(t, Trigger) for t in triggers):
        toks = sorted(set(triggers))
        if not toks:
            return None
        triggers = (Trigger((re.compile("|".join(re.escape(t) for t in toks)),)),)
    if "\r" in text and "\r" in text.replace("\r\n", ""):
        return None  # lone CR line ends: Python's line count differs from split("\n")
    lines = text.split("\n")
    if len(lines) < MIN_LINES or _FORM_FEED.search(text):
        return None
    strings = in_strings(lines)
    parts = chunks(lines, strings)
    if not any(c.name for c in parts) or any(c.name == "" for c in parts):
        return None

    # ---- units
    units: list[Unit] = []
    for ti, c in enumerate(parts):
        if c.name is None:
            units.extend(_split_module_code(lines, c, ti, strings))
        elif lines[c.start].startswith(("def", "async")) or not _is_class(lines, c):
            units.append(Unit(c.start, c.end, c.name, "func", ti))
        else:
            split = _split_class(lines, c, ti, strings)
            units.extend(split if split is not None else
                         [Unit(c.start, c.end, None, "class", ti, header=True)])
    units[0].start = 0  # leading comments and blank lines go with the first unit
    n_units = len(units)
    unit_of_line: list[int] = []
    for ui, u in enumerate(units):
        unit_of_line.extend([ui] * (u.end - u.start))
    line_starts = list(accumulate((len(x) + 1 for x in lines), initial=0))
    unit_starts = [line_starts[u.start] for u in units]

    # unit texts and identifier sets, computed on first use (most units are never looked at)
    unit_texts: dict[int, str] = {}
    unit_ids: dict[int, set[str]] = {}

    def text_of(ui: int) -> str:
        t = unit_texts.get(ui)
        if t is None:
            u = units[ui]
            t = unit_texts[ui] = text[line_starts[u.start]:max(line_starts[u.end] - 1, line_starts[u.start])]
        return t

    def ids_of(ui: int) -> set[str]:
        i = unit_ids.get(ui)
        if i is None:
            i = unit_ids[ui] = set(_IDENT.findall(text_of(ui)))
        return i

    n_text = len(text)

    sets_of: dict[int, list[tuple[str, set[str]]]] = {}

    def self_sets(ui: int) -> list[tuple[str, set[str]]]:
        """``self.x = rhs`` statements of a unit: (x, identifiers of rhs)."""
        got = sets_of.get(ui)
        if got is None:
            got = sets_of[ui] = [(m.group(1), set(_IDENT.findall(m.group(2))))
                                 for m in _SELF_SET.finditer(text_of(ui))]
        return got

    locals_of: dict[int, list[tuple[str, set[str]]]] = {}

    def attrs_from(ui: int, names: set[str]) -> set[str]:
        """Attributes a method sets from ``names`` through its locals: ``big = -1e9``,
        ``small = big``, ``self.fill = small`` → ``fill``."""
        sets = locals_of.get(ui)
        if sets is None:
            sets = locals_of[ui] = [(m.group(1), set(_IDENT.findall(m.group(2))))
                                    for m in _LOCAL_SET.finditer(text_of(ui))]
        local = set(names)
        grew = True
        while grew:
            grew = False
            for t, rhs_ids in sets:
                if t not in local and rhs_ids & local:
                    local.add(t)
                    grew = True
        return {a for a, rhs_ids in self_sets(ui) if rhs_ids & local}

    def mentions(word: str) -> Iterable[int]:
        """Offsets where ``word`` occurs as a whole identifier (or ``self.name``)."""
        k = len(word)
        i = text.find(word)
        while i >= 0:
            j = i + k
            a = text[i - 1] if i else " "
            b = text[j] if j < n_text else " "
            if not (a.isalnum() or a == "_") and not (b.isalnum() or b == "_"):
                yield i
            i = text.find(word, j)

    def units_mentioning(names: Iterable[str], after: str = "") -> set[int]:
        """Units where one of ``names`` occurs as a whole identifier (preceded by ``after``)."""
        return {bisect.bisect_right(unit_starts, i) - 1 for name in names for i in mentions(after + name)}

    def unit_at(pos: int) -> int:
        return unit_of_line[bisect.bisect_right(line_starts, pos) - 1]

    # ---- top-level names, classes, methods
    top_units: dict[int, list[int]] = {}
    for ui, u in enumerate(units):
        top_units.setdefault(u.top, []).append(ui)
    by_name: dict[str, list[int]] = {}
    for ti, c in enumerate(parts):
        if c.name:
            by_name.setdefault(c.name, []).append(ti)
    class_tops = {ti for ti, c in enumerate(parts)
                  if c.name and any(units[ui].kind in ("class", "meth") for ui in top_units[ti])}
    methods: dict[int, dict[str, list[int]]] = {}
    for ui, u in enumerate(units):
        if u.kind == "meth":
            methods.setdefault(u.top, {}).setdefault(u.name, []).append(ui)
    class_names = {parts[ti].name for ti in class_tops}
    bases: dict[int, set[int]] = {}
    for ti in class_tops:
        head = ids_of(top_units[ti][0]) & class_names
        head.discard(parts[ti].name)
        bases[ti] = {b for n in head for b in by_name[n] if b in class_tops}
    ancestors: dict[int, set[int]] = {}  # the class and its same-file bases, transitively
    for ti in class_tops:
        seen, stack = {ti}, [ti]
        while stack:
            for b in bases[stack.pop()]:
                if b not in seen:
                    seen.add(b)
                    stack.append(b)
        ancestors[ti] = seen
    descendants: dict[int, set[int]] = {ti: set() for ti in class_tops}  # the class and subclasses
    for ti, anc in ancestors.items():
        for a in anc:
            descendants[a].add(ti)

    # ---- seeds
    seed = [False] * n_units
    # names bound to a trigger match: module-level names, and attributes per class (for the
    # class and its subclasses); the second pair only from triggers of node-visiting rules
    aliases: tuple[set[str], dict[int, set[str]]] = (set(), {})
    walk_aliases: tuple[set[str], dict[int, set[str]]] = (set(), {})
    by_pattern: dict[str, tuple[re.Pattern, list[Trigger]]] = {}
    for t in triggers:
        for p in t.patterns:
            by_pattern.setdefault(p.pattern, (p, []))[1].append(t)
    shell_text: dict[int, str] = {}
    scope_text: dict[int, str] = {}

    def nested_defs(ui: int) -> set[str]:
        """Names of the indented ``def``s in a unit (a class nested in a function or class)."""
        got = nested.get(ui)
        if got is None:
            got = nested[ui] = set(_NESTED_DEF.findall(text_of(ui)))
        return got

    nested: dict[int, set[str]] = {}

    def in_context(trig: Trigger, ui: int) -> bool:
        u = units[ui]
        if any(c.search(text_of(ui)) for c in trig.context):
            return True
        if trig.context_unit:
            if u.kind in ("mod", "class"):
                # module code, and a class body's statements, are each one scope to the rules
                # (one frame): the context may be in another statement of the same scope
                key = -1 if u.kind == "mod" else u.top
                if key not in scope_text:
                    scope_text[key] = "\n".join(
                        text_of(vi) for vi in (range(n_units) if key == -1 else top_units[key])
                        if units[vi].kind == u.kind)
                return any(c.search(scope_text[key]) for c in trig.context)
            return False
        if u.kind in ("mod", "func"):
            return True
        for f in ancestors.get(u.top, (u.top,)):
            if f not in shell_text:
                shell_text[f] = "\n".join(text_of(vi) for vi in top_units[f] if units[vi].kind == "class"
                                          or (units[vi].kind == "meth" and units[vi].name == "__init__"))
            if any(c.search(shell_text[f]) for c in trig.context):
                return True
        return False

    walk_keys = {_key(t) for t in walk} if walk is not None else set()
    walk_ids = {id(t) for t in (triggers or ()) if _key(t) in walk_keys}
    wseed = [walk is None] * n_units
    sig_ends: dict[int, int] = {}

    def signature_end(ui: int) -> int:
        """Offset just past the parameter list of a function or method unit (0 otherwise)."""
        end = sig_ends.get(ui)
        if end is None:
            end = sig_ends[ui] = _signature_end(text, units[ui], lines, line_starts) \
                if units[ui].kind in ("func", "meth") else 0
        return end

    for pat, trigs in by_pattern.values():
        walks = any(id(t) in walk_ids for t in trigs)
        code_only = all(t.code_only for t in trigs)
        for m in pat.finditer(text):
            ui = unit_at(m.start())
            if seed[ui] and (wseed[ui] or not walks):
                continue
            if code_only and (units[ui].kind == "class"
                              or _in_comment_or_docstring(text, m.start(), lines, line_starts, strings)
                              or m.start() < signature_end(ui)):
                continue
            u = units[ui]
            hit = hit_walk = False
            for t in trigs:
                if t.methods is not None and not (u.kind == "meth" and u.name in t.methods) \
                        and not t.methods & nested_defs(ui):
                    continue
                if t.context is not None and not in_context(t, ui):
                    continue
                hit = True
                if id(t) in walk_ids:
                    hit_walk = True
                    break
                if not walks:
                    break
            if not hit:
                continue
            seed[ui] = True
            wseed[ui] = wseed[ui] or hit_walk
            targets = (aliases,) + ((walk_aliases,) if hit_walk else ())
            if u.kind in ("func", "meth") and u.name and not _dunder(u.name):
                # what it returns may be the match: ``self.act = self.make_act()``
                for mods, attrs in targets:
                    if u.kind == "func":
                        mods.add(u.name)
                    else:
                        for f in descendants.get(u.top, {u.top}):
                            attrs.setdefault(f, set()).add(u.name)
            if u.kind in ("mod", "class", "meth"):
                t0 = _LEADING_COMMENTS.sub("", text_of(ui)) if u.kind == "mod" else text_of(ui)
                if u.kind == "mod" and t0.startswith(("import", "from")):
                    # ``from torch.nn.functional import scaled_dot_product_attention as sdpa``
                    bound = import_binds(t0)
                    for mods, _ in targets:
                        mods.update(bound if bound is not None else _IDENT.findall(t0))
                    continue
                names = _bound_names(text, m.start())[0]
                if names:
                    if u.kind == "meth":  # ``big = -1e9`` then ``self.fill = big``
                        names |= attrs_from(ui, names)
                    for mods, attrs in targets:
                        if u.kind == "mod":
                            mods.update(names)
                        else:
                            for f in descendants.get(u.top, {u.top}):
                                attrs.setdefault(f, set()).update(names)
    local_imports = {unit_at(m.start()) for m in _LOCAL_IMPORT.finditer(text)
                     if _local_import_at(text, m.start())}
    # a unit mentioning a bound name is a seed; when it binds something from it in turn
    # (``NEG = BIG``, ``self.neg = NEG``), that name is bound too: to a fixed point
    for (mods, attrs), flags in ((aliases, seed), (walk_aliases, wseed)):
        done_mods: set[str] = set()
        done_attrs: set[tuple[int, str]] = set()
        while True:
            hits = [(p, None) for name in mods - done_mods for p in mentions(name)]
            done_mods |= mods
            new_attrs = {(f, n) for f, ns in attrs.items() for n in ns} - done_attrs
            done_attrs |= new_attrs
            for f, name in new_attrs:
                hits.extend((p, f) for p in mentions("self." + name))
            if not hits:
                break
            for p, f in hits:
                ui = unit_at(p)
                u = units[ui]
                if f is not None and u.top != f:
                    continue
                flags[ui] = seed[ui] = True
                if u.kind not in ("mod", "class", "meth"):
                    continue
                names, target = _bound_names(text, p)
                if u.kind == "meth":  # a method binds attributes only (not its locals)
                    names = {n for n in names if "self." + n in target} | attrs_from(ui, names)
                if u.kind == "mod":
                    mods.update(names)
                else:
                    for g in descendants.get(u.top, {u.top}):
                        attrs.setdefault(g, set()).update(names)

    # ---- closure
    mod_binds: dict[str, list[int]] = {}
    imports_kept: set[int] = set()  # import statements the alias table reads whatever is kept
    for ui, u in enumerate(units):
        if u.kind != "mod":
            continue
        t = _LEADING_COMMENTS.sub("", text_of(ui))  # the first unit holds the file's header
        if t and t[0] not in "@#\"' ":
            binds = import_binds(t) if t.startswith(("import", "from")) else _module_binds(t)
            if binds is None or (t.startswith("import") and "torch" in t):
                imports_kept.add(ui)  # rules look up torch's local name in the whole table
            for name in binds or ():
                mod_binds.setdefault(name, []).append(ui)
    top_names = set(by_name)
    work: list[int] = []
    # Every kept function or method keeps its callers, transitively: a helper that can report
    # is analysed inlined at its call sites (provenance), and the mask analysis binds a helper's
    # parameters to the join of the arguments of *every* same-file call, evaluated by running
    # the callers' bodies with their own callers' arguments (up to four calls deep).  A dropped
    # caller would change both.  (Cheap: PyTorch code calls layers through ``__call__``, not by
    # name, so the callers of a helper are few; on transformers/models this adds 3 % of lines.)
    down_done = [False] * n_units
    up_done = [False] * n_units

    reason = ["seed"]

    def keep(ui: int) -> None:
        u = units[ui]
        if not u.keep:
            if why is not None:
                why[u.start + 1] = (u.kind, u.name, reason[0])
            u.keep = True
            work.append(ui)

    def callers_of(ui: int) -> list[int]:
        """Units that may call function or method unit ``ui`` (any mention of its name; for a
        method, in its class and subclasses — ``self.m()`` of a subclass reaches it too — and in
        top-level functions and module code, which may get the instance as a parameter: HF's
        ``eager_attention_forward(module, ...)``)."""
        u = units[ui]
        key = u.name
        if key not in callers:
            callers[key] = sorted(units_mentioning((key,)))
        scope = None if u.kind == "func" else descendants.get(u.top, {u.top})
        return [vi for vi in callers[key] if vi != ui and (
            scope is None or units[vi].top in scope or units[vi].kind in ("func", "mod"))]

    def keep_shell(ti: int) -> None:
        for ui in top_units[ti]:
            u = units[ui]
            if u.kind == "class" or u.kind == "func" or (u.kind == "meth" and u.name == "__init__"):
                keep(ui)

    for ui, u in enumerate(units):
        if seed[ui]:
            keep(ui)
        elif ui in local_imports or ui in imports_kept:
            keep(ui)  # feeds the alias table (a plain import is kept when a kept unit uses it)
    callers: dict[str, list[int]] = {}
    while True:
        while work:
            ui = work.pop()
            u = units[ui]
            reason[0] = f"from line {u.start + 1} ({u.name})"
            if not down_done[ui]:
                down_done[ui] = True
                if u.kind in ("meth", "class"):
                    keep_shell(u.top)
                mentioned = ids_of(ui) if u.kind != "mod" else set(_CALLED.findall(text_of(ui)))
                # helpers called (functions), and base classes (from a class header); a class
                # instantiated in a body is not followed (the analyses never resolve into it)
                for name in mentioned & top_names:
                    for ti in by_name[name]:
                        if ti != u.top and (u.header or ti not in class_tops):
                            keep_shell(ti)
                for name in ids_of(ui) & mod_binds.keys():
                    for vi in mod_binds[name]:
                        keep(vi)
                if u.top in ancestors:  # self.m() resolves in the class and its bases
                    # ... and so does module.m() in a function it passes itself to
                    # (through the functions those functions name, to a fixed point)
                    via: set[str] = set()
                    seen_fns: set[int] = set()
                    todo = [ti for name in mentioned & top_names for ti in by_name[name]
                            if ti not in class_tops]
                    while todo:
                        ti = todo.pop()
                        if ti in seen_fns:
                            continue
                        seen_fns.add(ti)
                        fui = top_units[ti][0]
                        via.update(_ATTR_CALL.findall(text_of(fui)))
                        todo.extend(tj for name in ids_of(fui) & top_names for tj in by_name[name]
                                    if tj not in class_tops)
                    for f in ancestors[u.top]:
                        for name in (mentioned | via) & methods.get(f, {}).keys():
                            for mi in methods[f][name]:
                                keep(mi)
            # its callers (``forward`` too: ``self.forward(q, k, v, mask)`` binds its parameters;
            # not the dunders, called by syntax, but a private ``__name`` is an ordinary method)
            if not up_done[ui]:
                up_done[ui] = True
                if u.kind == "func" or (u.kind == "meth" and not _dunder(u.name)):
                    for vi in callers_of(ui):
                        keep(vi)
        # a kept class needs a statement in its body
        for ti in class_tops:
            us = [units[ui] for ui in top_units[ti]]
            if us[0].keep and not any(x.keep for x in us[1:]):
                meths = [ui for ui in top_units[ti] if units[ui].kind == "meth"]
                if meths:
                    keep(meths[0])
        if not work:
            break

    if all(u.keep for u in units):
        return None
    out = list(lines)
    kept = 0
    kept_methods: list[list[str] | None] = []
    kept_defs: list[str] = []
    walk_defs: list[bool] = []
    for ti, c in enumerate(parts):
        us = [units[ui] for ui in top_units[ti]]
        if c.name and any(u.keep for u in us):
            kept_defs.append(c.name)
            walk_defs.append(any(wseed[ui] for ui in top_units[ti]))
            split = ti in class_tops and len(us) > 1
            kept_methods.append([u.name for u in us if u.kind == "meth" and u.keep] if split else None)
    for u in units:
        if u.keep:
            kept += u.end - u.start
            continue
        for i in range(u.start, u.end):
            out[i] = ""
    return Selection("\n".join(out), kept_defs, kept, len(lines), kept_methods, walk_defs)


def _dunder(name: str | None) -> bool:
    return bool(name) and len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_class(lines: list[str], c: Chunk) -> bool:
    for i in range(c.start, c.end):
        m = _DEF.match(lines[i])
        if m:
            return lines[i].startswith("class")
    return False


def structure_matches(module, sel: Selection) -> bool:
    """Whether the parsed blanked text has exactly the kept definitions (top level, in order)
    and each split class exactly its kept methods."""
    import libcst as cst

    names = []
    for s in module.body:
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            i = len(names)
            names.append(s.name.value)
            want = sel.kept_methods[i] if i < len(sel.kept_methods) else None
            if want is not None:
                if not isinstance(s, cst.ClassDef):
                    return False
                body = s.body.body if isinstance(s.body, cst.IndentedBlock) else ()
                got = [x.name.value for x in body if isinstance(x, cst.FunctionDef)]
                if got != want:
                    return False
    return names == sel.kept_defs
