"""Region selection: hand libcst only the functions and methods that can matter.

Most of a large modeling file is configuration, docstrings, pre-trained-model glue and methods
that never touch attention scores.  Parsing them with libcst (about 15 k lines/s) and running the
analyses over them dominates a lint run, so the engine parses a *blanked* copy of the file
instead: every line of a *unit* that no enabled rule can need is replaced by an empty line.  Line
numbers and columns of what is kept are unchanged, so findings, suppression comments and fix
edits need no mapping, and ``code_for_node`` of a kept node is its original text.

Selection (:func:`select`) reads the file's stdlib :mod:`ast` (:func:`index`: CPython's own
parser, about a tenth of libcst's time; it is also the engine's syntax screen for the files it
indexes):

1. **Units.**  Each top-level statement is a unit (statements sharing a line are one), from its
   first line (decorators included) to the next unit; the first starts the file.  A class is cut
   further: its header (decorators, ``class X(Base):``), each method, and each other statement of
   its body (the class *shell*: docstring, class attributes).
2. **Seeds.**  Each enabled rule has a trigger (:class:`Trigger`: regular expressions searched in
   the raw text, and for some rules the method names it can fire in).  A unit is a seed when a
   trigger matches inside it, or when it reads a name bound to a match: a module-level name
   (``NEG_INF = -1e9``, ``from … import scaled_dot_product_attention as sdpa``) read as a
   name, or an attribute the class shell or any method binds to one (``self.softmax =
   nn.Softmax(-1)``, ``register_buffer("bias", torch.tril(...))``, ``big = -1e9`` then
   ``self.fill = big``) read as ``self.<attr>`` in a class of that class's inheritance family;
   what binds from such a read is bound in turn (to a fixed point).  A function or method that
   reads such an attribute off another object (``module.act(s)``) is walked by the
   node-visiting rules when the closure keeps it.  A module-level statement that reads no name
   and calls nothing (``NEG_INF = -1e9``) is no seed itself: no rule reports on a bare literal,
   it is kept only when kept code reads what it binds.  A rule limited to ``forward`` (``methods``) also
   seeds a unit with a nested ``def forward``; a rule whose context must be in the same scope
   (``context_scope = "unit"``) sees all module code as one scope, and a class body's
   statements as one (the rules pool them in one frame).
3. **Closure**, to a fixed point, as far as the shared analyses follow
   (:mod:`attncheck.lint.analysis.provenance`, :mod:`attncheck.lint.analysis.masks`): a kept
   method keeps its class shell and ``__init__`` (attributes, buffers); a kept unit keeps the
   top-level functions it names (helpers the analyses inline; a module statement too:
   ``SPLIT = split_heads``), the module-level bindings it reads as names (constants; imports,
   which feed the alias table), the methods of the classes of its same-file inheritance family
   (bases, subclasses and their other bases: a base's ``self.m()`` may reach a subclass's) it
   names as attributes (``self.helper()``, ``Base.helper(self)``), and
   — from a class header — its base classes as shells (a class merely instantiated in a body is
   not followed: the analyses never resolve into it).  Every kept function or method
   (``forward`` and private ``__m`` included; not the dunders, called by syntax) also keeps its
   callers, transitively (for a method, the units of its inheritance family and the functions
   and module code that read its name as an attribute; for a function, also the readers of a
   module statement that binds it to another name, ``ATTEND = _attend``): a called helper is
   analysed only inlined at its call sites, with the caller's arguments, and the mask analysis
   binds a helper's parameters to the join of the arguments of every same-file call.  A class whose body would be empty keeps its first method.
   Imports anywhere (a function's own ``import`` too: the alias table reads them all) are kept
   when kept code reads a name they bind; ``import torch`` always (rules look up torch's local
   name); a relative import only as a binding (the table ignores it).  A type annotation
   (:func:`_inert`: no call or other operator than ``|``) reads nothing: the analyses never
   evaluate one, and in the kept text those of parameters and one-line returns are blanked
   with spaces (:func:`_blank_annotations`; an ``x: T = v`` keeps its text, which it needs to
   stay an annotated assignment).
4. **Check.**  After parsing, the top-level definitions libcst finds must be the kept ones, in
   order, and each kept class must hold exactly the kept methods (:func:`structure_matches`);
   otherwise, and whenever the blanked text does not parse, the engine parses the whole file.
   ``FileContext.source`` stays the whole text.

Names are read from the ``ast``, so a name in a comment, a string or a parameter list keeps
nothing.  Triggers must over-approximate where a rule can report: findings are checked to equal
a whole-file parse (``tests/test_engine_perf.py`` and ``tests/test_regions.py``: every fixture,
handed case and rule-page example, real transformers modeling files, generated modules;
``--no-regions`` parses whole files, and ``bench/lint_bench.py --compare-whole`` diffs a whole
tree).  Syntax errors anywhere are still reported: a file :func:`index` cannot read goes through
the engine's syntax screen.

A file of more than :data:`WHOLE_BELOW` characters is parsed in pieces of about :data:`PIECE`
characters cut before a line that starts a statement in column 0 (a piece that does not parse is
extended to the next such line), so memory stays bounded whatever the number of statements
(``ast`` holds a few hundred bytes per character: a generated module of 300,000 assignments
would need gigabytes whole).  A piece parses only when it ends at a statement boundary, so the
pieces parse exactly when the file does.
"""
from __future__ import annotations

import ast
import bisect
import operator
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate, repeat

from attncheck.lint.attrs import tuple_getter

#: Files shorter than this are parsed whole (the selection would not pay for itself).
MIN_LINES = 40
#: files longer than this (characters) are read by ``ast`` in pieces of about :data:`PIECE`
WHOLE_BELOW = 1_000_000
PIECE = 250_000
#: a line that can start a top-level statement (where a piece may end)
_STMT_START = re.compile(r"^(?![ \t\f\r\n#)\]}]|(?:else|elif|except|finally)\b)", re.MULTILINE)
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_IDENT = re.compile(r"[^\W\d]\w*")


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


class LiteralStarts:
    """A regular expression that is an alternation of branches each starting with a literal
    (``softmax|Softmax|matmul``), searched by finding those literals with ``str.find`` and
    matching the expression there.  ``re`` skips ahead to one literal prefix by itself, but for
    branches starting differently it tries every position holding a possible first character
    (``s`` of ``softmax`` is everywhere: about 13 ns per character); ``str.find`` is tens of
    times faster.  Gives the same match objects as :attr:`regex` from any position; used like a
    compiled pattern (``search``, ``pattern``).  :func:`compile_trigger` builds it."""

    __slots__ = ("regex", "pattern", "literals")

    def __init__(self, regex: re.Pattern, literals: tuple[str, ...]) -> None:
        self.regex = regex
        self.pattern = regex.pattern
        #: every match starts with one of them (none starts with another)
        self.literals = literals

    def search(self, text: str, pos: int = 0):
        return self.searcher(text)(pos)

    def searcher(self, text: str):
        """``search(pos)`` over ``text``, faster than :meth:`search` for a run of increasing
        positions: where each literal occurs next is kept between calls."""
        lits, find, match = self.literals, text.find, self.regex.match
        #: next occurrence of each literal at or after the last position searched (-1: none;
        #: -2: not searched yet)
        nxt = [-2] * len(lits)
        last = [0]

        def search(pos: int = 0):
            if pos < last[0]:
                nxt[:] = [-2] * len(lits)
            last[0] = pos
            while True:
                best = -1
                for i, x in enumerate(nxt):
                    if x == -2 or 0 <= x < pos:
                        x = nxt[i] = find(lits[i], pos)
                    if x >= 0 and (best < 0 or x < best):
                        best = x
                if best < 0:
                    return None
                m = match(text, best)
                if m is not None:
                    return m
                pos = last[0] = best + 1

        return search


#: characters that end a literal prefix of a regular expression
_META = frozenset(".^$*+?{}[]()|")


def _literal_starts(pattern: str) -> tuple[str, ...] | None:
    """The literal each top-level alternative of ``pattern`` starts with (none of them starting
    with another); ``None`` when one starts with anything else (a class, a group, an anchor)."""
    branches: list[str] = []
    depth = start = i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a class: ``]`` right after ``[`` or ``[^`` is a member
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
        i += 1
    branches.append(pattern[start:])
    out: list[str] = []
    for b in branches:
        lit: list[str] = []
        i = 0
        while i < len(b):
            c = b[i]
            if c == "\\":
                d = b[i + 1:i + 2]
                if not d or not d.isascii() or d.isalnum():  # ``\w``, ``\b``, ``\1`` …
                    break
                lit.append(d)
                i += 2
            elif c in _META:
                break
            else:
                lit.append(c)
                i += 1
        if i < len(b) and b[i] in "?*+{" and lit:
            lit.pop()  # a quantified character (``n_?rep``)
        if not lit:
            return None
        out.append("".join(lit))
    out.sort(key=len)
    kept: list[str] = []
    for x in out:
        if not any(x.startswith(k) for k in kept):
            kept.append(x)
    return tuple(kept)


def compile_trigger(p) -> object:
    """A trigger's regular expression ready to search: :class:`LiteralStarts` for an
    alternation of different literal starts of 3 characters or more (shorter ones occur too
    often to pay), else the compiled expression.  Anything not a string is returned as is (a
    compiled pattern, or an object used like one)."""
    if isinstance(p, str):
        p = re.compile(p)
    if not isinstance(p, re.Pattern) or not isinstance(p.pattern, str) or p.flags != re.UNICODE:
        return p
    lits = _literal_starts(p.pattern)
    if lits is None or len(lits) < 2 or min(map(len, lits)) < 3:
        return p
    return LiteralStarts(p, lits)


def _searcher(p, text: str):
    """``search(pos)`` over ``text`` for trigger pattern ``p``."""
    if isinstance(p, LiteralStarts):
        return p.searcher(text)
    search = p.search
    return lambda pos=0: search(text, pos)


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
        trig = Trigger(tuple(compile_trigger(s) for s in src),
                       frozenset(names) if names else None,
                       tuple(compile_trigger(c) for c in ctx) if ctx else None,
                       getattr(rule, "context_scope", "class") == "unit",
                       bool(getattr(rule, "pattern_in_code", False)),
                       tuple(compile_trigger(r) for r in req) if req else None)
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


@dataclass(slots=True)
class Unit:
    start: int          # first line index (0-based)
    end: int            # one past the last line
    name: str | None    # def/class name; None for module code and class-shell statements
    kind: str           # "mod" | "func" | "class" (a class's shell part) | "meth"
    top: int            # index of the top-level statement it belongs to
    #: its ``ast`` statements and the line offset of the piece they were parsed in; ``None`` for
    #: a module statement of a file read in pieces (parsed again from its text when needed)
    nodes: list | None = None
    base: int = 0
    keep: bool = False
    header: bool = False  # a class's header (decorators, ``class X(Base):``) or an unsplit class
    #: a module statement: what it binds, whether it reads a name or calls something
    binds: tuple[str, ...] = ()
    code: bool = True


@dataclass
class Index:
    """The units of one file (:func:`index`) and what module-level statements bind."""

    lines: list[str]
    units: list[Unit]
    #: top-level statement index → (def/class name or ``None``, is a class)
    tops: list[tuple[str | None, bool]]
    #: name → module-level units binding it (assignments, imports, definitions inside ``if``/
    #: ``try``), for the closure
    binds: dict[str, list[int]]
    #: module-level units holding an ``import torch…``
    torch_imports: list[int]
    #: class (top-level statement index) → names read in its bases and keywords
    class_bases: dict[int, set[str]]
    #: trigger pattern (its ``pattern`` text) → its first match in the file, or ``None``, where
    #: already searched (the engine's prefilter fills it): :func:`select` starts from there
    first_matches: dict[str, object] = field(default_factory=dict)


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


def _statements(text: str) -> Iterator[tuple[ast.stmt, int]]:
    """Top-level statements of ``text`` with the line offset of the piece each was parsed in.
    Raises ``SyntaxError`` (or another parse error) when ``text`` does not parse."""
    if len(text) <= WHOLE_BELOW:
        for s in ast.parse(text).body:
            yield s, 0
        return
    start = line = 0
    n = len(text)
    while start < n:
        target = start + PIECE
        while True:
            m = _STMT_START.search(text, target) if target < n else None
            end = m.start() if m is not None and m.start() < n else n
            try:
                body = ast.parse(text[start:end]).body
                break
            except _PARSE_ERRORS:
                if end >= n or end - start > 8 * PIECE:
                    raise  # a syntax error, or one huge statement: the engine's screen reads it
                target = end + 1  # cut inside a statement: extend the piece
        for s in body:
            yield s, line
        del body
        line += text.count("\n", start, end)
        start = end


def _first_line(s: ast.stmt) -> int:
    decos = getattr(s, "decorator_list", None)
    return min(s.lineno, *(d.lineno for d in decos)) if decos else s.lineno


def _module_statement(s: ast.stmt, out: set[str]) -> bool:
    """Add to ``out`` the names a module-level statement binds: assignment, ``for``/``with``
    targets, imports (relative ones too), definitions (in ``if``/``try`` bodies as well).
    Returns whether it reads a name or calls something (``NEG = -1e9`` does not)."""
    if type(s) is ast.Assign and len(s.targets) == 1 and type(s.targets[0]) is ast.Name:
        out.add(s.targets[0].id)  # the common case
        v = s.value
        if type(v) is ast.UnaryOp:
            v = v.operand
        if type(v) is ast.Constant:
            return False
    code = False
    for node in _walk((s,)):
        t = type(node)
        if t is ast.Name:
            if type(node.ctx) is ast.Load:
                code = True
            else:
                out.add(node.id)
        elif t is ast.Call:
            code = True
        elif t is ast.alias:
            out.add(node.asname or node.name.split(".")[0])
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            out.add(node.name)
    return code


def index(text: str, first_matches: dict[str, object] | None = None) -> Index | None:
    """The units of ``text``; ``None`` when ``ast`` cannot parse it (the engine's syntax screen
    then reports why) or its line ends are not ``\\n``/``\\r\\n`` (lone CR: Python's line
    count differs from ``split("\\n")``).  ``first_matches``: see :attr:`Index.first_matches`."""
    if "\r" in text and "\r" in text.replace("\r\n", ""):
        return None
    lines = text.split("\n")
    whole = len(text) <= WHOLE_BELOW
    units: list[Unit] = []
    tops: list[tuple[str | None, bool]] = []
    binds: dict[str, list[int]] = {}
    torch_imports: list[int] = []
    class_bases: dict[int, set[str]] = {}
    last = -1  # last line (0-based) of the previous statement
    try:
        for s, base in _statements(text):
            first = _first_line(s) - 1 + base
            end_line = s.end_lineno - 1 + base
            t = type(s)
            if first <= last:  # shares a line with the previous statement (``a = 1; b = 2``)
                u = units[-1]
                if u.nodes is not None:
                    u.nodes.append(s)
                if u.kind == "mod":
                    names: set[str] = set()
                    u.code = _module_statement(s, names) or u.code
                    u.binds += tuple(names)
                    for n in names:
                        binds.setdefault(n, []).append(len(units) - 1)
                last = max(last, end_line)
                continue
            ti = len(tops)
            if t in _DEFS:
                tops.append((s.name, False))
                units.append(Unit(first, first, s.name, "func", ti, [s], base))
            elif t is ast.ClassDef:
                tops.append((s.name, True))
                units.extend(_class_units(s, first, ti, base))
                class_bases[ti] = _name_ids([*s.bases, *(k.value for k in s.keywords)])
            else:
                tops.append((None, False))
                ui = len(units)
                units.append(Unit(first, first, None, "mod", ti, [s] if whole else None, base))
                names = set()
                units[ui].code = _module_statement(s, names)
                units[ui].binds = tuple(names)
                for n in names:
                    binds.setdefault(n, []).append(ui)
                if t is ast.Import and any(a.name.split(".")[0] == "torch" for a in s.names):
                    torch_imports.append(ui)
            last = end_line
    except _PARSE_ERRORS:
        return None
    if not units:
        return None
    units[0].start = 0  # leading comments and blank lines go with the first unit
    for a, b in zip(units, units[1:]):
        a.end = b.start
    units[-1].end = len(lines)
    return Index(lines, units, tops, binds, torch_imports, class_bases, first_matches or {})


def _class_units(c: ast.ClassDef, first: int, ti: int, base: int) -> list[Unit]:
    """The units of one top-level class: header, then one per statement of its body."""
    body_first = _first_line(c.body[0]) - 1 + base
    header_last = c.lineno - 1 + base
    if c.body[0].lineno - 1 + base == header_last or body_first <= header_last:
        return [Unit(first, first, None, "class", ti, [c], base, header=True)]  # ``class A: x``
    out = [Unit(first, first, None, "class", ti, [*c.decorator_list, *c.bases, *c.keywords], base,
                header=True)]
    last = -1
    for s in c.body:
        start = _first_line(s) - 1 + base
        if start <= last:
            out[-1].nodes.append(s)
        elif type(s) in _DEFS:
            out.append(Unit(start, start, s.name, "meth", ti, [s], base))
        else:
            out.append(Unit(start, start, None, "class", ti, [s], base))
        last = max(last, s.end_lineno - 1 + base)
    return out


#: fields skipped by :func:`_walk`: holding no nodes (names, flags, constants' values) or only
#: operators (``+``, ``not``, ``<``), which name nothing
_SCALAR_FIELDS = frozenset({"ctx", "id", "attr", "name", "arg", "asname", "module", "level", "kind",
                            "conversion", "is_async", "simple", "type_comment", "tag", "op", "ops"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(t: type) -> tuple[str, ...]:
    f = _CHILD_FIELDS.get(t)
    if f is None:
        f = () if t is ast.Constant else tuple(
            x for x in t._fields if x not in _SCALAR_FIELDS
            and not (x == "names" and t in (ast.Global, ast.Nonlocal)))
        _CHILD_FIELDS[t] = f
    return f


#: node type → a function returning its :func:`_child_fields` values as a tuple
_CHILD_GETTERS: dict[type, object] = {}


def _children_getter(t: type):
    g = _CHILD_GETTERS.get(t)
    if g is None:
        g = _CHILD_GETTERS[t] = tuple_getter(tuple(_child_fields(t)))
    return g


def _walk(roots: Iterable[ast.AST]) -> list[ast.AST]:
    """Every node under ``roots`` (in no particular order): :func:`ast.walk` without its
    per-node generators and without the expression-context leaves."""
    out: list[ast.AST] = []
    add = out.append
    stack = [r for r in roots if r is not None]
    pop, push = stack.pop, stack.append
    getters = _CHILD_GETTERS
    while stack:
        node = pop()
        add(node)
        g = getters.get(type(node))
        if g is None:
            g = _children_getter(type(node))
        for v in g(node):
            if v is None:
                continue
            if type(v) is list:
                for x in v:
                    if x is not None:
                        push(x)
            else:
                push(v)
    return out


#: statement fields holding statements (a ``def`` is a statement: it is nowhere else)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _nested_statements(nodes: list, own: ast.AST | None) -> tuple[set[str], set[str]]:
    """Names of the function definitions among ``nodes`` and the statements nested in them,
    ``own`` aside, and the names their imports bind (:attr:`_Facts.nested`,
    :attr:`_Facts.imports`), from the statements alone."""
    defs: set[str] = set()
    imports: set[str] = set()
    stack = list(nodes)
    while stack:
        s = stack.pop()
        t = type(s)
        if t in _DEFS and s is not own:
            defs.add(s.name)
        elif t is ast.Import or t is ast.ImportFrom:
            imports |= _import_names(s)
        for f in _BODIES:
            b = getattr(s, f, None)
            if type(b) is list:
                stack.extend(b)
    return defs, imports


def _import_names(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The names an import statement binds (``import a.b`` binds ``a``; ``*`` none)."""
    return {a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"}


#: a ``def`` or ``ast.AnnAssign`` → its :func:`_child_fields` values but its annotation
_UNANNOTATED = {t: tuple_getter(tuple(f for f in _child_fields(t) if f not in ("returns", "annotation")))
                for t in (*_DEFS, ast.AnnAssign)}
#: what an annotation :func:`_inert` may hold (``X | Y``: a ``BinOp`` of ``|``)
_TYPE_NODES = frozenset({ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.List,
                         ast.Starred})


def _inert(annotation: ast.expr) -> bool:
    """Whether an annotation is a type expression — names, attributes, subscripts, literals,
    tuples and lists of them, ``X | Y`` — which no rule or analysis reads: annotations are not
    evaluated by the analyses, and the rules' node visitors look at calls, divisions and
    assignments only, none of which such an expression holds."""
    for n in _walk((annotation,)):
        t = type(n)
        if t is ast.BinOp:
            if type(n.op) is not ast.BitOr:
                return False
        elif t not in _TYPE_NODES:
            return False
    return True


def _name_ids(nodes: Iterable[ast.AST]) -> set[str]:
    return {x.id for x in _walk(nodes) if type(x) is ast.Name}


#: what :class:`_Facts` records from a node of these types (and it walks their children too)
_ARG, _CALL, _BINDING, _IMPORT, _DEF, _SCOPE = range(6)
_FACT_KINDS = {ast.arg: _ARG, ast.Call: _CALL, ast.Assign: _BINDING, ast.AnnAssign: _BINDING,
               ast.AugAssign: _BINDING, ast.NamedExpr: _BINDING, ast.Import: _IMPORT,
               ast.ImportFrom: _IMPORT, ast.FunctionDef: _DEF, ast.AsyncFunctionDef: _DEF,
               ast.Global: _SCOPE, ast.Nonlocal: _SCOPE}


class _Facts:
    """What a unit's code reads and binds, from its ``ast`` (lines 0-based, in the file)."""

    __slots__ = ("names", "attrs", "self_attrs", "other_attrs", "attr_calls", "bindings",
                 "nested", "imports", "annotations", "base", "_at", "_reach", "_by_rhs")

    def __init__(self, u: Unit, nodes: list, base: int) -> None:
        #: name read as a plain name (or declared ``global``) → lines
        self.names: dict[str, list[int]] = {}
        #: attribute names (``x.attr``)
        self.attrs: set[str] = set()
        #: ``self.attr`` → lines
        self.self_attrs: dict[str, list[int]] = {}
        #: attributes read off anything but ``self`` (``module.act``, ``self.proj.weight``)
        self.other_attrs: set[str] = set()
        self.attr_calls: set[str] = set()   # attributes called: ``x.m(...)``
        #: binding statements: [first line, last line, names, self attributes, the right-hand
        #: side (nodes, or the names it reads)]; ``register_buffer("x", …)`` binds the
        #: attribute ``x``
        self.bindings: list[list] = []
        self.nested: set[str] = set()       # names of nested ``def`` s
        self.imports: set[str] = set()      # names its imports bind
        #: the parameters (``ast.arg``) and ``def`` s (their return) whose annotation no rule or
        #: analysis reads (:func:`_inert`): :func:`_blank_annotations` blanks them in the kept
        #: text.  The names of such an annotation, and of one in an ``x: T = v``, count as read
        #: nowhere (what they bind is kept only for code that reads it).
        self.annotations: list[ast.AST] = []
        self.base = base
        self._at: dict[int, list[list]] | None = None   # line → bindings spanning it
        #: name → attributes it reaches (:meth:`attrs_from`); name → bindings reading it
        self._reach: dict[str, set[str]] | None = None
        self._by_rhs: dict[str, list[list]] = {}
        own = nodes[0] if u.kind in ("func", "meth") else None
        names, attrs, self_attrs, other_attrs = self.names, self.attrs, self.self_attrs, self.other_attrs
        attr_calls, bindings = self.attr_calls, self.bindings
        Name, Attribute, Load, Constant = ast.Name, ast.Attribute, ast.Load, ast.Constant
        annotations = self.annotations

        seen: list[ast.Name] = []  # the names met, read by line after the walk
        read = seen.append

        # one pass over the nodes (:func:`_walk`'s loop, inlined); names and constants (leaves)
        # are read where their parent is walked rather than pushed
        stack: list = []
        push = stack.append
        for r in nodes:
            if type(r) is Name:
                read(r)
            elif r is not None:
                push(r)
        pop = stack.pop
        getters = _CHILD_GETTERS
        kinds = _FACT_KINDS
        while stack:
            node = pop()
            t = type(node)
            if t is Attribute:
                attrs.add(node.attr)
                v = node.value  # its only child
                if type(v) is Name:
                    if v.id == "self":
                        self_attrs.setdefault(node.attr, []).append(node.lineno - 1 + base)
                    else:
                        other_attrs.add(node.attr)
                    read(v)
                else:
                    other_attrs.add(node.attr)
                    push(v)
                continue
            k = kinds.get(t)
            g = None
            if k is None:
                pass
            elif k == _ARG:  # its only child is its annotation
                a = node.annotation
                if a is not None:
                    if _inert(a):
                        annotations.append(node)
                    else:
                        push(a)
                continue
            elif k == _CALL:
                f = node.func
                if type(f) is Name:
                    if f.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2 \
                            and type(node.args[1]) is Constant \
                            and isinstance(node.args[1].value, str):
                        # ``getattr(self, "name")``: the provenance analysis follows it
                        at = node.args[1].value
                        attrs.add(at)
                        a0 = node.args[0]
                        if type(a0) is Name and a0.id == "self":
                            self_attrs.setdefault(at, []).append(node.lineno - 1 + base)
                elif type(f) is Attribute:
                    attr_calls.add(f.attr)
                    if f.attr in ("register_buffer", "register_parameter") and node.args \
                            and type(node.args[0]) is Constant \
                            and isinstance(node.args[0].value, str):
                        bindings.append([node.lineno - 1 + base, node.end_lineno - 1 + base,
                                         set(), {node.args[0].value}, node.args[1:]])
            elif k == _BINDING:
                targets = node.targets if t is ast.Assign else [node.target]
                bound: set[str] = set()
                bound_attrs: set[str] = set()
                x = targets[0]
                if len(targets) == 1 and type(x) is Name:  # the common case
                    bound.add(x.id)
                else:
                    for x in _walk(targets):
                        if type(x) is Name:
                            bound.add(x.id)
                        elif type(x) is Attribute and type(x.value) is Name \
                                and x.value.id == "self":
                            bound_attrs.add(x.attr)
                bindings.append([node.lineno - 1 + base, node.end_lineno - 1 + base,
                                 bound, bound_attrs, [node.value]])
                if t is ast.AnnAssign and _inert(node.annotation):
                    g = _UNANNOTATED[t]  # its names read nothing; its text stays (see below)
            elif k == _IMPORT:
                got = _import_names(node)
                self.imports |= got
                if t is ast.Import or node.level == 0:  # the alias table skips relative ones
                    bindings.append([node.lineno - 1 + base, node.end_lineno - 1 + base,
                                     got, set(), set()])
            elif k == _DEF:
                if node is not own:
                    self.nested.add(node.name)
                if node.returns is not None and _inert(node.returns):
                    annotations.append(node)
                    g = _UNANNOTATED[t]
            else:  # ``global`` / ``nonlocal``
                for n in node.names:
                    names.setdefault(n, []).append(node.lineno - 1 + base)
            if g is None:
                g = getters.get(t)
                if g is None:
                    g = _children_getter(t)
            for v in g(node):
                tv = type(v)
                if tv is list:
                    for x in v:
                        tx = type(x)
                        if tx is Name:
                            read(x)
                        elif tx is not Constant and x is not None:
                            push(x)
                elif tv is Name:
                    read(v)
                elif tv is not Constant and v is not None:
                    push(v)
        for x in seen:  # a name read as a plain name, by line
            if type(x.ctx) is Load:
                ln = names.get(x.id)
                if ln is None:
                    names[x.id] = [x.lineno - 1 + base]
                else:
                    ln.append(x.lineno - 1 + base)

    def bound_at(self, line: int) -> tuple[set[str], set[str]]:
        """Names and ``self`` attributes bound by the statements spanning ``line``."""
        at = self._at
        if at is None:
            at = self._at = {}
            for b in self.bindings:
                for li in range(b[0], b[1] + 1):
                    got = at.get(li)
                    if got is None:
                        at[li] = [b]
                    else:
                        got.append(b)
        names: set[str] = set()
        attrs: set[str] = set()
        for b in at.get(line, ()):
            names |= b[2]
            attrs |= b[3]
        return names, attrs

    def attrs_from(self, names: set[str]) -> set[str]:
        """Attributes set from ``names`` through locals: ``big = -1e9``, ``small = big``,
        ``self.fill = small`` → ``fill``.  What one name reaches does not depend on the others
        (a binding follows from any one name its right-hand side reads), so it is kept per name."""
        reach = self._reach
        if reach is None:
            reach = self._reach = {}
            by_rhs = self._by_rhs = {}
            for b in self.bindings:
                for n in _name_ids(b[4]) if type(b[4]) is list else b[4]:
                    got = by_rhs.get(n)
                    if got is None:
                        by_rhs[n] = [b]
                    else:
                        got.append(b)
        out: set[str] = set()
        for n in names:
            got = reach.get(n)
            if got is None:
                got = reach[n] = self._attrs_from_name(n)
            out |= got
        return out

    def _attrs_from_name(self, name: str) -> set[str]:
        by_rhs = self._by_rhs
        local, todo, attrs = {name}, [name], set()
        while todo:
            for b in by_rhs.get(todo.pop(), ()):
                attrs |= b[3]
                for m in b[2]:
                    if m not in local:
                        local.add(m)
                        todo.append(m)
        return attrs


def _code_spans(nodes: list, base: int, lines: list[str], line_starts: list[int]) -> list[tuple[int, int]]:
    """Offsets (start, end) of what is not code for a rule that reads code only: docstrings
    (string statements) and strings over several lines."""
    out = []
    for node in _walk(nodes):
        t = type(node)
        if t is ast.Expr and type(node.value) is ast.Constant and isinstance(node.value.value, str):
            node = node.value
        elif not (t is ast.Constant and isinstance(node.value, (str, bytes))
                  and node.end_lineno > node.lineno):
            continue
        out.append((_offset(node.lineno - 1 + base, node.col_offset, lines, line_starts),
                    _offset(node.end_lineno - 1 + base, node.end_col_offset, lines, line_starts)))
    return out


def _offset(line: int, col: int, lines: list[str], line_starts: list[int]) -> int:
    """Text offset of ``ast``'s (0-based line, UTF-8 byte column)."""
    s = lines[line]
    if not s.isascii():
        col = len(s.encode("utf-8")[:col].decode("utf-8", "ignore"))
    return line_starts[line] + col


def _signature_end(fn: ast.AST, base: int, lines: list[str], line_starts: list[int]) -> int:
    """Offset just past the last part of a ``def``'s parameter list (defaults, annotations);
    the ``def`` keyword when it has none.  Decorators lie before it."""
    a = fn.args
    parts = [*a.posonlyargs, *a.args, *a.kwonlyargs, *a.defaults,
             *(d for d in a.kw_defaults if d is not None)]
    if a.vararg is not None:
        parts.append(a.vararg)
    if a.kwarg is not None:
        parts.append(a.kwarg)
    end = _offset(fn.lineno - 1 + base, fn.col_offset, lines, line_starts)
    for p in parts:
        end = max(end, _offset(p.end_lineno - 1 + base, p.end_col_offset, lines, line_starts))
    return end


def _in_comment(line: str, col: int, start: int = 0) -> bool:
    """Whether column ``col`` of ``line`` lies in a ``#`` comment (scanned from ``start``,
    outside any string)."""
    state, comment = _scan(line[start:], None, col - start)
    return comment


def select(text: str, triggers, why: dict | None = None,
           walk: Iterable[Trigger] | None = None, idx: Index | None = None,
           roots: Iterable[str] | None = None) -> Selection | None:
    """The blanked text to parse, or ``None`` when the whole file must be parsed.

    ``triggers``: the enabled rules' :class:`Trigger` s (:func:`triggers_of`), or plain
    substrings (any of them seeds a unit); ``None`` when a rule without a trigger is enabled.
    ``None`` is also returned for a small file, a file without top-level definitions, when
    nothing would be dropped, or when :func:`index` cannot read the file.  ``idx``: the file's
    :func:`index` when the caller has it.  ``why`` (a debugging aid): filled with
    ``first line → reason`` of each kept unit.  ``walk``: the triggers of rules that visit nodes
    (``visit_Call`` …): a kept top-level definition without a seed of theirs is marked in
    :attr:`Selection.walk_defs` as not needing the tree walk (those rules cannot report there;
    the module-level analyses still see it).

    ``roots`` (with ``triggers`` ``()``): select for a helper that *another* file imports
    (:mod:`attncheck.lint.project`) instead — the seeds are the top-level functions named
    ``roots``, the closure is the same except that callers are not kept (another file's
    analyzer runs the helper with its own call's arguments, never this file's), and a kept
    function or method also keeps the methods, in any class of this file, that it names as
    attributes: the instance the caller passes in (``module`` of ``eager_attention_forward(
    module, …)``) is looked up in this file's classes by its class name."""
    if triggers is None:
        return None
    if not isinstance(triggers, tuple) or not all(isinstance(t, Trigger) for t in triggers):
        toks = sorted(set(triggers))
        if not toks:
            return None
        triggers = (Trigger((re.compile("|".join(re.escape(t) for t in toks)),)),)
    if text.count("\n") + 1 < MIN_LINES:
        return None
    if idx is None:
        idx = index(text)
        if idx is None:
            return None
    lines, units, tops = idx.lines, idx.units, idx.tops
    if not any(name for name, _ in tops):
        return None
    for u in units:
        u.keep = False
    n_units = len(units)
    n_text = len(text)
    line_starts = list(accumulate(map(operator.add, map(len, lines), repeat(1)), initial=0))
    unit_starts = [line_starts[u.start] for u in units]

    unit_texts: dict[int, str] = {}
    facts_of: dict[int, _Facts] = {}

    def text_of(ui: int) -> str:
        t = unit_texts.get(ui)
        if t is None:
            u = units[ui]
            t = unit_texts[ui] = text[line_starts[u.start]:max(line_starts[u.end] - 1, line_starts[u.start])]
        return t

    def nodes_of(ui: int) -> tuple[list, int]:
        u = units[ui]
        if u.nodes is None:  # a module statement of a file read in pieces: parse it again
            return ast.parse(text[line_starts[u.start]:line_starts[u.end]]).body, u.start
        return u.nodes, u.base

    def facts(ui: int) -> _Facts:
        f = facts_of.get(ui)
        if f is None:
            f = facts_of[ui] = _Facts(units[ui], *nodes_of(ui))
        return f

    nested_of: dict[int, tuple[set[str], set[str]]] = {}

    def nested(ui: int) -> tuple[set[str], set[str]]:
        """The names of the ``def`` s nested in unit ``ui`` and those its imports bind
        (:attr:`_Facts.nested`, :attr:`_Facts.imports`; read from its statements only when its
        facts are not needed otherwise)."""
        f = facts_of.get(ui)
        if f is not None:
            return f.nested, f.imports
        got = nested_of.get(ui)
        if got is None:
            nodes, _ = nodes_of(ui)
            got = nested_of[ui] = _nested_statements(
                nodes, nodes[0] if units[ui].kind in ("func", "meth") else None)
        return got

    def occurrences(word: str, lo: int = 0, hi: int | None = None) -> Iterator[int]:
        """Offsets where ``word`` occurs as a whole identifier in ``text[lo:hi]``."""
        k = len(word)
        i = text.find(word, lo, hi)
        while i >= 0:
            j = i + k
            a = text[i - 1] if i else " "
            b = text[j] if j < n_text else " "
            if not (a.isalnum() or a == "_") and not (b.isalnum() or b == "_"):
                yield i
            i = text.find(word, j, hi)

    def unit_at(pos: int) -> int:
        return bisect.bisect_right(unit_starts, pos) - 1

    ident_units: dict[str, set[int]] = {}

    def units_with(word: str, kind: str, lo: int = 0, hi: int | None = None) -> set[int]:
        """Units whose code reads ``word`` as a plain name (``kind`` "names"), an attribute
        ("attrs") or ``self.word`` ("self_attrs")."""
        if ident_units and lo == 0 and hi is None:
            found = ident_units.get(word, ())
        else:
            found = {unit_at(i) for i in occurrences(word, lo, hi)}
        return {ui for ui in found if (units[ui].code or units[ui].kind != "mod")
                and word in getattr(facts(ui), kind)}

    def index_identifiers() -> None:
        """Where each identifier occurs, in one scan: for many names to look up (a generated
        module binding thousands of constants), instead of one text search per name."""
        for m in _IDENT.finditer(text):
            ident_units.setdefault(m.group(), set()).add(unit_at(m.start()))

    # ---- top-level names, classes, methods
    top_units: dict[int, list[int]] = {}
    for ui, u in enumerate(units):
        top_units.setdefault(u.top, []).append(ui)
    by_name: dict[str, list[int]] = {}
    for ti, (name, _) in enumerate(tops):
        if name:
            by_name.setdefault(name, []).append(ti)
    class_tops = {ti for ti, (name, is_class) in enumerate(tops) if is_class}
    methods: dict[int, dict[str, list[int]]] = {}
    for ui, u in enumerate(units):
        if u.kind == "meth":
            methods.setdefault(u.top, {}).setdefault(u.name, []).append(ui)
    class_names = {tops[ti][0] for ti in class_tops}
    method_names = {name for ms in methods.values() for name in ms}
    bases: dict[int, set[int]] = {}
    for ti in class_tops:
        head = idx.class_bases[ti] & class_names
        head.discard(tops[ti][0])
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
    # the classes an instance's ``self.m()`` may resolve in: any class of the same-file
    # inheritance family (bases, subclasses, and the other bases of a subclass: a base's method
    # calling ``self.m()`` reaches the subclass's ``m``, a mixin's reaches its sibling's)
    related: dict[int, set[int]] = {}
    for ti in class_tops:
        if ti in related:
            continue
        family, stack = {ti}, [ti]
        while stack:
            f = stack.pop()
            for g in ancestors[f] | descendants[f]:
                if g not in family:
                    family.add(g)
                    stack.append(g)
        for f in family:
            related[f] = family

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

    context_memo: dict[tuple[int, int], bool] = {}

    def in_context(trig: Trigger, ui: int) -> bool:
        key = (id(trig), ui)
        got = context_memo.get(key)
        if got is None:
            got = context_memo[key] = context_of(trig, ui)
        return got

    def context_of(trig: Trigger, ui: int) -> bool:
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
    not_code: dict[int, tuple[int, list[tuple[int, int]]]] = {}

    def is_code(ui: int, pos: int) -> bool:
        """Whether ``pos`` is code a rule reading code only can report on: not in a comment, a
        docstring, a string over several lines, a ``def``'s decorators or parameter list."""
        got = not_code.get(ui)
        if got is None:
            nodes, base = nodes_of(ui)
            u = units[ui]
            sig = _signature_end(nodes[0], base, lines, line_starts) \
                if u.kind in ("func", "meth") else 0
            got = not_code[ui] = (sig, _code_spans(nodes, base, lines, line_starts))
        sig, spans = got
        if pos < sig:
            return False
        li = bisect.bisect_right(line_starts, pos) - 1
        start = 0
        for a, b in spans:
            if a <= pos < b:
                return False
            if line_starts[li] <= b <= pos:
                start = max(start, b - line_starts[li])  # a string ends earlier on this line
        return not _in_comment(lines[li], pos - line_starts[li], start)

    for pat, trigs in by_pattern.values():
        walks = any(id(t) in walk_ids for t in trigs)
        code_only = all(t.code_only for t in trigs)
        first = idx.first_matches.get(pat.pattern, False)
        if first is None:
            continue  # searched already, and nowhere
        pos = 0
        search = _searcher(pat, text)
        while True:
            if first is not False:
                m, first = first, False
            else:
                m = search(pos)
            if m is None:
                break
            ui = unit_at(m.start())
            pos = max(m.end(), m.start() + 1)
            u = units[ui]
            if seed[ui] and (wseed[ui] or not walks) and u.kind == "func" and not facts(ui).imports:
                pos = max(pos, line_starts[u.end])  # nothing more to learn in this unit
                continue
            bare = u.kind == "mod" and not u.code
            if code_only and (u.kind == "class" or not (bare or is_code(ui, m.start()))):
                continue
            # what this match teaches depends on its line only (the statements bound there)
            pos = max(pos, line_starts[bisect.bisect_right(line_starts, m.start())])
            hit = hit_walk = False
            for t in trigs:
                if t.methods is not None and not (u.kind == "meth" and u.name in t.methods) \
                        and not t.methods & nested(ui)[0]:
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
                # whether a trigger applies depends on the unit alone (its kind and name, the
                # defs nested in it, its context): no later match in it applies either
                pos = max(pos, line_starts[u.end])
                continue
            targets = (aliases,) + ((walk_aliases,) if hit_walk else ())
            if bare:  # a literal binding (``NEG = -1e9``): kept when kept code reads it
                for mods, _ in targets:
                    mods.update(u.binds)
                continue
            if u.kind == "mod":
                seed[ui] = True
                wseed[ui] = wseed[ui] or hit_walk
                names = facts(ui).bound_at(bisect.bisect_right(line_starts, m.start()) - 1)[0]
                for mods, _ in targets:
                    mods.update(names)
                continue
            seed[ui] = True
            wseed[ui] = wseed[ui] or hit_walk
            if u.kind in ("func", "meth"):
                # an import inside a function feeds the module-wide alias table
                # (``from torch.nn.functional import softmax as sm`` there, ``sm(s)`` anywhere)
                fa = facts(ui)
                if fa.imports:
                    names = fa.bound_at(bisect.bisect_right(line_starts, m.start()) - 1)[0]
                    for mods, _ in targets:
                        mods.update(names & fa.imports)
            if u.kind in ("func", "meth") and u.name and not _dunder(u.name):
                # what it returns may be the match: ``self.act = self.make_act()``
                for mods, attrs in targets:
                    if u.kind == "func":
                        mods.add(u.name)
                    else:
                        for f in related.get(u.top, {u.top}):
                            attrs.setdefault(f, set()).add(u.name)
            if u.kind in ("class", "meth"):
                fa = facts(ui)
                names, self_names = fa.bound_at(bisect.bisect_right(line_starts, m.start()) - 1)
                names |= self_names
                if names:
                    if u.kind == "meth":  # ``big = -1e9`` then ``self.fill = big``
                        names |= fa.attrs_from(names)
                    for mods, attrs in targets:
                        for f in related.get(u.top, {u.top}):
                            attrs.setdefault(f, set()).update(names)
    # a unit reading a bound name is a seed; when it binds something from it in turn
    # (``NEG = BIG``, ``self.neg = NEG``), that name is bound too: to a fixed point
    for (mods, attrs), flags in ((aliases, seed), (walk_aliases, wseed)):
        done_mods: set[str] = set()
        done_attrs: set[tuple[int, str]] = set()
        while True:
            hits: list[tuple[int, list[int], int | None]] = []
            if not ident_units and len(mods - done_mods) > 64:
                index_identifiers()
            for name in mods - done_mods:
                hits.extend((ui, facts(ui).names[name], None) for ui in units_with(name, "names"))
            done_mods |= mods
            new_attrs = {(f, n) for f, ns in attrs.items() for n in ns} - done_attrs
            done_attrs |= new_attrs
            for f, name in new_attrs:
                us = top_units[f]
                lo, hi = unit_starts[us[0]], line_starts[units[us[-1]].end]
                hits.extend((ui, facts(ui).self_attrs[name], f)
                            for ui in units_with(name, "self_attrs", lo, hi))
            if flags is wseed:
                # a function or a static method may get the instance as a parameter and read the
                # attribute off it (``module.act(s)`` in HF's ``eager_attention_forward(module,
                # …)``): a node-visiting rule may report there once the closure keeps it (as a
                # helper of a kept caller: the analyses need nothing more).  A method's name is
                # not such an attribute: the closure keeps its callers, functions too.
                for name in {n for _, n in new_attrs} - method_names:
                    for ui in units_with(name, "other_attrs"):
                        if units[ui].kind in ("func", "meth"):
                            wseed[ui] = True
            if not hits:
                break
            for ui, at_lines, f in hits:
                u = units[ui]
                if f is not None and u.top != f:
                    continue
                flags[ui] = seed[ui] = True
                if u.kind == "func":
                    continue
                fa = facts(ui)
                for li in at_lines:
                    names, self_names = fa.bound_at(li)
                    if u.kind == "meth":  # a method binds attributes only (not its locals)
                        names = self_names | fa.attrs_from(names | self_names)
                    else:
                        names |= self_names
                    if u.kind == "mod":
                        mods.update(names)
                    else:
                        for g in related.get(u.top, {u.top}):
                            attrs.setdefault(g, set()).update(names)

    # ---- closure
    mod_binds = idx.binds
    # imports inside functions and classes also feed the alias table: their names bind there
    local_binds: dict[str, list[int]] = {}
    for i in occurrences("import"):
        ui = unit_at(i)
        if units[ui].kind != "mod":
            for name in nested(ui)[1]:
                if ui not in local_binds.setdefault(name, []):
                    local_binds[name].append(ui)
    top_names = set(by_name)
    work: list[int] = []
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

    callers: dict[tuple[str, str], list[int]] = {}

    def callers_of(ui: int) -> list[int]:
        """Units that may call function or method unit ``ui`` (a function read as a name; a
        method read as an attribute, in its class and subclasses — ``self.m()`` of a subclass
        reaches it too — and in top-level functions and module code, which may get the instance
        as a parameter: HF's ``eager_attention_forward(module, ...)``)."""
        u = units[ui]
        key = (u.name, "names" if u.kind == "func" else "attrs")
        if key not in callers:
            callers[key] = sorted(units_with(*key))
        scope = None if u.kind == "func" else related.get(u.top, {u.top})
        return [vi for vi in callers[key] if vi != ui and (
            scope is None or units[vi].top in scope or units[vi].kind in ("func", "mod"))]

    def alias_readers(ui: int) -> list[int]:
        """Units reading a name that module statement ``ui`` binds to a function of the file
        (``ATTEND = _attend``; not an import): each may call that function through it."""
        u = units[ui]
        if not u.binds or not u.code:
            return []
        fa = facts(ui)
        if fa.imports or not any(ti not in class_tops for name in top_names.intersection(fa.names)
                                 for ti in by_name[name]):
            return []
        return sorted({vi for name in u.binds for vi in units_with(name, "names") if vi != ui})

    shells_kept: set[int] = set()

    def keep_shell(ti: int) -> None:
        if ti in shells_kept:
            return
        shells_kept.add(ti)
        for ui in top_units[ti]:
            u = units[ui]
            if u.kind == "class" or u.kind == "func" or (u.kind == "meth" and u.name == "__init__"):
                keep(ui)

    if roots is not None:
        for name in roots:
            for ti in by_name.get(name, ()):
                if ti not in class_tops:
                    seed[top_units[ti][0]] = True
    for ui in range(n_units):
        if seed[ui]:
            keep(ui)
    for ui in idx.torch_imports:
        keep(ui)  # rules look up torch's local name in the whole alias table
    while True:
        while work:
            ui = work.pop()
            u = units[ui]
            reason[0] = f"from line {u.start + 1} ({u.name})"
            if not down_done[ui]:
                down_done[ui] = True
                fa = facts(ui)
                if u.kind in ("meth", "class"):
                    keep_shell(u.top)
                name = tops[u.top][0]
                if name and len(by_name[name]) > 1:
                    # the analyses look definitions up by name (the last one wins): a kept
                    # definition keeps the others of its name
                    for ti in by_name[name]:
                        keep_shell(ti)
                # helpers named (functions: called, or bound to a name that is called —
                # ``SPLIT = split_heads`` at module level), and base classes (from a class
                # header); a class instantiated in a body is not followed (the analyses never
                # resolve into it)
                for name in top_names.intersection(fa.names):
                    for ti in by_name[name]:
                        if ti != u.top and (u.header or ti not in class_tops):
                            keep_shell(ti)
                for name in fa.names:
                    for vi in mod_binds.get(name, ()):
                        keep(vi)
                    for vi in local_binds.get(name, ()):
                        keep(vi)
                if u.top in ancestors:  # self.m() resolves in the class and its bases
                    # ... and so does module.m() in a function it passes itself to
                    # (through the functions those functions name, to a fixed point)
                    via: set[str] = set()
                    seen_fns: set[int] = set()
                    todo = [ti for name in top_names.intersection(fa.names) for ti in by_name[name]
                            if ti not in class_tops]
                    while todo:
                        ti = todo.pop()
                        if ti in seen_fns:
                            continue
                        seen_fns.add(ti)
                        ff = facts(top_units[ti][0])
                        via |= ff.attr_calls
                        todo.extend(tj for name in top_names.intersection(ff.names)
                                    for tj in by_name[name] if tj not in class_tops)
                    # (a class-body statement may name a method plainly: ``forward = _forward``)
                    named = fa.attrs | via | (fa.names.keys() if u.kind == "class" else set())
                    for f in related[u.top]:
                        ms = methods.get(f, {})
                        for name in ms.keys() & named:
                            for mi in ms[name]:
                                keep(mi)
                if roots is not None and u.kind in ("func", "meth") and fa.attrs:
                    for ms in methods.values():
                        for name in ms.keys() & fa.attrs:
                            for mi in ms[name]:
                                keep(mi)
            # its callers (``forward`` too: ``self.forward(q, k, v, mask)`` binds its parameters;
            # not the dunders, called by syntax, but a private ``__name`` is an ordinary method)
            if not up_done[ui] and roots is None:
                up_done[ui] = True
                if u.kind == "func" or (u.kind == "meth" and not _dunder(u.name)):
                    for vi in callers_of(ui):
                        keep(vi)
                elif u.kind == "mod":
                    for vi in alias_readers(ui):
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
    for ti, (name, is_class) in enumerate(tops):
        us = [units[ui] for ui in top_units[ti]]
        if name and any(u.keep for u in us):
            kept_defs.append(name)
            walk_defs.append(any(wseed[ui] for ui in top_units[ti]))
            split = is_class and len(us) > 1
            kept_methods.append([u.name for u in us if u.kind == "meth" and u.keep] if split else None)
    # a run of dropped units becomes blank lines, or — from three lines on — one string
    # statement over the same lines (``"""`` … ``"""``): libcst reads it as one token instead of
    # one node per blank line, and a string statement is no code to the rules and analyses
    ui = 0
    while ui < n_units:
        u = units[ui]
        if u.keep:
            kept += u.end - u.start
            ui += 1
            continue
        last = ui
        while last + 1 < n_units and not units[last + 1].keep:
            last += 1
        a, b = u.start, units[last].end
        for i in range(a, b):
            out[i] = ""
        if b - a >= 3:
            first = lines[a]
            indent = first[:len(first) - len(first.lstrip(" \t\f"))] if u.kind in ("meth", "class") \
                and not u.header else ""
            out[a] = indent + '"""'
            out[b - 1] = '"""'
        ui = last + 1
    for ui in range(n_units):
        fa = facts_of.get(ui) if units[ui].keep else None  # the closure read every kept unit
        if fa is not None and fa.annotations:
            _blank_annotations(out, lines, fa.annotations, fa.base)
    return Selection("\n".join(out), kept_defs, kept, len(lines), kept_methods, walk_defs)


def _col(line: str, col: int) -> int:
    """The character column of ``ast``'s UTF-8 byte column ``col`` in ``line``."""
    return col if line.isascii() else len(line.encode("utf-8")[:col].decode("utf-8", "ignore"))


#: between a parameter's name and its annotation; a return annotation's arrow and itself
_ANNOTATION_GAP = re.compile(r"[ \t]*:[ \t]*")
_RETURN_GAP = re.compile(r"->[ \t]*")


def _blank_annotations(out: list[str], lines: list[str], annotations: list, base: int) -> None:
    """Replace by spaces, in the lines ``out``, the annotations :attr:`_Facts.annotations`
    lists, with the ``:`` (``->``) before them: a parameter's (over several lines too: it is
    inside the parameter list's brackets), and a ``def``'s return annotation on one line
    (outside brackets a blanked line break would end the statement).  Every line break and
    every other column stays, so the kept code's positions do not change; an annotation in
    parentheses, or with a comment or a line break before it, is left as it is.  An annotated
    assignment keeps its annotation: without it ``x: T = v`` would parse as an ``Assign``,
    which some rules treat differently.  libcst parses about 6 % less text on transformers'
    kept regions."""
    for node in annotations:
        if type(node) is ast.arg:
            a = node.annotation
            l0 = node.lineno - 1 + base
            c0 = _col(lines[l0], node.col_offset) + len(node.arg)
            if lines[l0][c0 - len(node.arg):c0] != node.arg:  # a name NFKC-normalised by ``ast``
                continue
            gap = _ANNOTATION_GAP
        else:  # a ``def``'s return annotation
            a = node.returns
            if a.end_lineno != a.lineno:
                continue
            l0 = a.lineno - 1 + base
            head = lines[l0][:_col(lines[l0], a.col_offset)].rstrip(" \t")
            if not head.endswith("->"):
                continue
            c0 = len(head) - 2
            gap = _RETURN_GAP
        la, le = a.lineno - 1 + base, a.end_lineno - 1 + base
        ca, ce = _col(lines[la], a.col_offset), _col(lines[le], a.end_col_offset)
        if la != l0 or not gap.fullmatch(lines[l0], c0, ca):
            continue
        for i in range(l0, le + 1):
            line = out[i]
            b = ce if i == le else len(line) - line.endswith("\r")
            a0 = c0 if i == l0 else 0
            out[i] = line[:a0] + " " * (b - a0) + line[b:]


def _dunder(name: str | None) -> bool:
    return bool(name) and len(name) > 4 and name.startswith("__") and name.endswith("__")


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
