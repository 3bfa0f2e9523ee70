"""Lint engine: discover → read → prefilter → parse once → one batched visit → suppress → sort.

Pipeline for one file:

1. **Read** bytes; NUL bytes or bytes that do not decode (PEP 263 cookie honoured, UTF-8
   default) → an ``ATT000`` finding at the offending position.
2. **Prefilter** on raw text: a rule runs on a file only when one of its ``tokens`` occurs in the
   text (``tokens = ()`` = always).  When no enabled rule is left, the file is *not parsed*.
3. **Parse once** with libcst — only the top-level definitions the remaining rules can need
   (:mod:`attncheck.lint.regions`: the others are blanked, so lines and columns are unchanged;
   findings are the same as with a whole-file parse, ``regions=False``/``--no-regions``); a
   syntax error → ``ATT000`` (position and message from CPython's parser, which reports them
   better).  Text that is not parsed is not syntax-checked.  libcst sees only screened text and
   builds it without its per-node validation; the cyclic garbage collector is off while a file
   is linted (:func:`lint_text`).
4. **One batched visit** of all remaining rules.  Positions (``PositionProvider``) are computed
   only when a rule asks for one (most files have no finding).  When a rule
   raises, the file is re-visited rule by rule; each failing rule yields an ``ATT001`` finding
   naming it, the other rules' findings are kept (``ATTNCHECK_RAISE=1`` in the environment
   re-raises instead: for rule authors' debugging).
5. **Suppression** comments (:mod:`attncheck.lint.suppression`), then deterministic order
   (path, line, column, code, message).

Selection follows ruff: ``select`` replaces the default set (default-on rules), ``extend-select``
adds, ``ignore`` removes; when a rule matches both a select and an ignore selector the more
specific (longer) selector wins, ties go to ``ignore``; ``ALL`` is the least specific.  Config
and CLI flags are two layers applied in that order.  ``ATT000``/``ATT001`` are always on unless
ignored by a selector at least as specific as ``ATT0``.

Across files: a process pool (``jobs``; output order does not depend on it) and a result cache
keyed by engine fingerprint, enabled rules and file content (:mod:`attncheck.lint.cache`), each
entry checked against what the file's analysis read of the other linted files.  Those files are
the project (:mod:`attncheck.lint.project`), fixed before any file is linted: the analyses follow
a helper imported from one of them.  A run
whose files are all cache hits imports neither libcst nor the rule modules.

Nothing here imports torch or imports/executes the code being linted.
"""
from __future__ import annotations

import ast
import dataclasses
import gc
import io
import os
import signal
import sys
import tokenize
import traceback
import types
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from attncheck.config import Config, ConfigError, find_config, load_config, validate_selectors
from attncheck.lint import project as _project
from attncheck.lint import regions as _regions
from attncheck.lint import screen as _screen
from attncheck.lint import suppression
from attncheck.lint.discovery import (
    NOTEBOOK_SUFFIX, STDIN, FileTooLarge, PathError, Source, check_path, discover,
    is_force_excluded, matches, os_reason, read_regular)
from attncheck.lint.finding import Finding
from attncheck.lint.fixes import applicable, apply_fixes

if TYPE_CHECKING:
    from attncheck.lint.cache import Cache
    from attncheck.lint.rule import Rule


class _Lazy:
    """A module imported on first attribute access: a run whose files are all cache hits never
    imports libcst or the rule modules (about a third of a warm run's time otherwise)."""

    def __init__(self, name: str) -> None:
        self.__dict__["_name"] = name

    def __getattr__(self, attr: str):
        import importlib

        return getattr(importlib.import_module(self._name), attr)


cst = _Lazy("libcst")
_meta = _Lazy("libcst.metadata")


def all_rules() -> dict:
    """The rule registry (:func:`attncheck.lint.rule.all_rules`, imported on first use)."""
    from attncheck.lint.rule import all_rules as _all

    return _all()


def FileContext(*args, **kwargs):  # noqa: N802 - stands for the class, imported lazily
    from attncheck.lint.context import FileContext as _FileContext

    return _FileContext(*args, **kwargs)

ENGINE_CODES = frozenset({"ATT000", "ATT001"})
MAX_FIX_PASSES = 10

__all__ = ["LintResult", "lint_paths", "lint_source", "lint_text", "run_rules",
           "resolve_selection", "ConfigError"]


# --------------------------------------------------------------------------------------------
# selection

def _specificity(selector: str) -> int:
    return 0 if selector == "ALL" else len(selector)


def _matches(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def _best(code: str, selectors: Iterable[str]) -> int | None:
    specs = [_specificity(s) for s in selectors if _matches(code, s)]
    return max(specs) if specs else None


@dataclass(frozen=True)
class Layer:
    """One selection layer (config file, then CLI).

    ``origin`` prefixes the selector keys in error messages: ``"--"`` for the command line,
    ``"<file>: [tool.attncheck] "`` for a config file.
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    origin: str = ""


def resolve_selection(registry: dict[str, type[Rule]], layers: Sequence[Layer]) -> frozenset[str]:
    """The enabled rule codes after applying ``layers`` in order (see module docstring)."""
    enabled = {c for c, r in registry.items() if r.default_enabled and c not in ENGINE_CODES}
    engine_off: set[str] = set()
    for layer in layers:
        selectors = tuple(layer.select or ()) + tuple(layer.extend_select)
        for key, values in (("select", layer.select or ()), ("extend-select", layer.extend_select)):
            unknown = [sel for sel in values if not any(_matches(c, sel) for c in registry)]
            if unknown:  # like ruff: a selector that enables nothing is a typo, not a no-op
                raise ConfigError(f"{layer.origin}{key}: rule selector {unknown[0]!r} matches no "
                                  f"rule; known codes: {', '.join(sorted(registry))}")
        new = set()
        for code in registry:
            s = _best(code, selectors)
            i = _best(code, layer.ignore)
            if code in ENGINE_CODES:
                if i is not None and i >= 4 and (s is None or i >= s):
                    engine_off.add(code)
                elif s is not None and s >= 4:
                    engine_off.discard(code)
                continue
            base = code in enabled if layer.select is None else False
            if s is None and i is None:
                on = base
            elif i is None:
                on = True
            elif s is None:
                on = False
            else:
                on = s > i
            if on:
                new.add(code)
        enabled = new
    return frozenset(enabled | (ENGINE_CODES & registry.keys()) - engine_off)


def _per_file_ignored(display: str, path: Path | None, cfg: Config) -> tuple[str, ...]:
    if not cfg.per_file_ignores:
        return ()
    p = path if path is not None else Path(display)
    out: list[str] = []
    for pattern, codes in cfg.per_file_ignores.items():
        if matches(p, [pattern], cfg.root):
            out.extend(codes)
    return tuple(out)


def _apply_file_ignores(enabled: frozenset[str], ignored: tuple[str, ...]) -> frozenset[str]:
    if not ignored:
        return enabled
    return frozenset(
        c for c in enabled
        if not any(_matches(c, s) and (c not in ENGINE_CODES or _specificity(s) >= 4)
                   for s in ignored))


# --------------------------------------------------------------------------------------------
# one file

class _Unreadable(Exception):
    def __init__(self, message: str, line: int = 1, col: int = 0) -> None:
        super().__init__(message)
        self.message, self.line, self.col = message, line, col


def _engine_finding(display: str, code: str, message: str, line: int = 1, col: int = 0,
                    end_line: int | None = None, end_col: int | None = None) -> Finding:
    name = "parse-error" if code == "ATT000" else "internal-error"
    return Finding(display, line, col, end_line if end_line is not None else line,
                   end_col if end_col is not None else col, code, name, "error", message)


def _byte_pos(data: bytes, index: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, index) + 1
    return data.count(b"\n", 0, index) + 1, index - line_start


def decode_source(data: bytes) -> tuple[str, str]:
    """Bytes → (text, encoding).  Raises :class:`_Unreadable` with a position on NUL bytes, a
    bad coding cookie or undecodable bytes."""
    nul = data.find(b"\x00")
    if nul >= 0:
        line, col = _byte_pos(data, nul)
        raise _Unreadable("source contains a NUL byte", line, col)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        # tokenize says "invalid or missing encoding declaration" both for a bad cookie and for
        # non-UTF-8 bytes in the first two lines of a file that has no cookie: tell them apart
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as uexc:
            line, col = _byte_pos(data, uexc.start)
            raise _Unreadable(
                f"not valid UTF-8 (byte 0x{data[uexc.start]:02x} at {line}:{col + 1}) and no "
                "coding declaration: re-encode the file as UTF-8 or add a "
                "'# -*- coding: <encoding> -*-' line", line, col) from None
        raise _Unreadable(f"bad encoding declaration: {exc}") from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line, col = _byte_pos(data, exc.start)
        raise _Unreadable(
            f"cannot decode byte 0x{data[exc.start]:02x} as {encoding} "
            f"({exc.reason})", line, col) from None
    except LookupError:
        raise _Unreadable(f"unknown encoding {encoding!r}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, encoding


def _syntax_error(text: str, display: str, exc: Exception) -> Finding:
    """ATT000 for a libcst parse failure, positioned by CPython's parser when it agrees."""
    try:
        compile(text, display, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as se:
        line = se.lineno or 1
        col = max((se.offset or 1) - 1, 0)
        end_line = getattr(se, "end_lineno", None) or line
        end_col = max((getattr(se, "end_offset", None) or (col + 1)) - 1, col)
        if end_line < line or (end_line == line and end_col < col):
            end_line, end_col = line, col
        kind = type(se).__name__
        return _engine_finding(display, "ATT000", f"cannot parse: {kind}: {se.msg}", line, col,
                               end_line, end_col)
    except (ValueError, RecursionError, MemoryError) as other:
        return _engine_finding(display, "ATT000", f"cannot parse: {other}")
    if isinstance(exc, cst.ParserSyntaxError):
        msg = exc.message.splitlines()[0] if exc.message else "syntax error"
        return _engine_finding(display, "ATT000", f"cannot parse: {msg}", exc.raw_line,
                               exc.raw_column)
    return _engine_finding(display, "ATT000", f"cannot parse: {type(exc).__name__}: {exc}")


def _libcst_accepts(text: str) -> bool:
    try:
        cst.parse_module(text)
        return True
    except _parse_errors():
        return False


def _parse_screened(text: str) -> cst.Module:
    """``libcst.parse_module`` of text a syntax screen has accepted (the ``ast`` index, or
    :func:`_syntax_check`), without re-validating each node as it is built.

    libcst's parser builds every node by calling its class, a frozen dataclass whose generated
    ``__init__`` sets each field through ``object.__setattr__`` and then runs the node's
    ``_validate`` from ``__post_init__``, also for the nodes its own parser builds from valid
    source (libcst's ``CSTNode.__post_init__`` notes that this could move out of parsing).  The
    checks guard nodes built by hand; a parse of screened source builds the same tree without
    them.  While this parse runs, each node class's ``__init__`` is one that stores its fields
    through the slots' own descriptors and skips the checks (:func:`_node_inits`): about a tenth
    of the parse for the checks, and a few percent more for the stores.  Syntax errors are
    still raised by the parser itself."""
    node = cst.CSTNode
    saved = node.__dict__["__post_init__"]
    inits = _node_inits()
    node.__post_init__ = _no_validation
    for cls, fast, _ in inits:
        cls.__init__ = fast
    try:
        return cst.parse_module(text)
    finally:
        for cls, _, original in inits:
            cls.__init__ = original
        node.__post_init__ = saved


def _no_validation(self) -> None:
    return None


_NODE_INITS: list[tuple[type, object, object]] | None = None


def _node_inits() -> list[tuple[type, object, object]]:
    """(class, fast ``__init__``, dataclass ``__init__``) for every libcst node class whose
    ``__init__`` is the one :mod:`dataclasses` generated and whose fields are all slots (libcst
    adds ``__slots__`` to its node classes).  The fast one takes the same parameters with the
    same defaults (a ``default_factory`` called when the argument is missing), stores each
    through its slot's descriptor — what ``object.__setattr__`` finds and calls — and does not
    call ``__post_init__``.  A class that does not fit keeps its own ``__init__`` (and its
    checks, which :func:`_parse_screened` turns off separately)."""
    global _NODE_INITS
    if _NODE_INITS is None:
        found = []
        stack, seen = [cst.CSTNode], set()
        while stack:
            for sub in stack.pop().__subclasses__():
                if sub not in seen:
                    seen.add(sub)
                    stack.append(sub)
                    fast = _fast_init(sub)
                    if fast is not None:
                        found.append((sub, fast, sub.__dict__["__init__"]))
        _NODE_INITS = found
    return _NODE_INITS


def _fast_init(cls: type) -> object | None:
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    if code is None or code.co_filename != "<string>" or not dataclasses.is_dataclass(cls) \
            or "__slots__" not in cls.__dict__:
        return None
    fields = dataclasses.fields(cls)
    if any(not f.init or f.kw_only for f in fields):
        return None
    env: dict[str, object] = {"_MISSING": dataclasses.MISSING}
    params, body = [], []
    for i, f in enumerate(fields):
        slot = cls.__dict__.get(f.name)
        if type(slot) is not types.MemberDescriptorType:
            return None
        env[f"_set{i}"] = slot.__set__
        if f.default is not dataclasses.MISSING:
            env[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
            body.append(f"    _set{i}(self, {f.name})")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory{i}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"    _set{i}(self, _factory{i}() if {f.name} is _MISSING else {f.name})")
        else:  # a required field (dataclasses put them before the defaulted ones)
            params.append(f.name)
            body.append(f"    _set{i}(self, {f.name})")
    src = "def __init__(self, " + ", ".join(params) + "):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(compile(src, f"<attncheck fast init of {cls.__qualname__}>", "exec"), env)
    fast = env["__init__"]
    fast.__qualname__ = f"{cls.__qualname__}.__init__"
    return fast


def _syntax_check(text: str, display: str) -> Finding | None:
    """ATT000 when ``text`` is not valid Python, whatever the prefilter and region selection
    would parse.  CPython's own parser (``ast``, about 10× faster than libcst) screens every file;
    only when it refuses is libcst asked too, so that syntax newer than the running interpreter
    (which libcst accepts) is not reported as a parse error."""
    if len(text) > _screen.PIECEWISE_ABOVE:  # bounded memory (:mod:`attncheck.lint.screen`)
        err = _screen.check(text, refused=_libcst_accepts)
        if err is None:
            return None
        line, col = text.count("\n", 0, err.offset) + 1, err.offset - (
            text.rfind("\n", 0, err.offset) + 1)
        return _engine_finding(display, "ATT000", f"cannot parse: {err.kind}: {err.msg}", line, col)
    try:
        # bytecode compilation is about a third cheaper than building the ``ast`` objects; it
        # also refuses a few valid parses (``return`` outside a function, ...), which libcst
        # then accepts below.  Its warnings (invalid escapes) are not ours to print.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, display, "exec", dont_inherit=True, optimize=0)
        return None
    except RecursionError:
        # nested deeper than CPython itself compiles (thousands of levels); libcst's native
        # parser would overflow the C stack on it (a segmentation fault), so it is not asked
        return _engine_finding(display, "ATT000", "cannot parse: RecursionError: the code is nested "
                               "too deeply for CPython's compiler (Python cannot run this file either)")
    except SyntaxError as exc:
        if _screen.beyond_parser_limits(exc):
            return _syntax_error(text, display, exc)
    except (ValueError, MemoryError, OverflowError):
        pass
    try:
        cst.parse_module(text)
        return None
    except _parse_errors() as exc:
        return _syntax_error(text, display, exc)


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    return f" at {Path(f.filename).name}:{f.lineno}"


class _LazyPositions:
    """``PositionProvider`` metadata computed on first use.

    libcst's position computation re-generates the code of the whole tree; rules only ask for
    the positions of the nodes they report, and most files have no finding, so the engine
    hands rules this mapping instead of resolving positions up front (one computation per file,
    shared by all rules, only when a rule asks)."""

    __slots__ = ("module", "_map")

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._map = None

    def _positions(self):
        if self._map is None:
            wrapper = _meta.MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._map = wrapper.resolve(_meta.PositionProvider)
        return self._map

    def __getitem__(self, node):
        return self._positions()[node]

    def get(self, node, default=None):
        return self._positions().get(node, default)

    def __contains__(self, node) -> bool:
        return node in self._positions()


def _lazy_ok(rules: list[type[Rule]]) -> bool:
    return all(set(r.get_inherited_dependencies()) <= {_meta.PositionProvider} for r in rules)


class _Visitor:
    """Runs rule instances over a module: lazily computed positions when every rule needs at
    most ``PositionProvider`` (the built-in rules), else libcst's ``MetadataWrapper``."""

    def __init__(self, module: cst.Module, rules: list[type[Rule]], skip: set[int] | None = None) -> None:
        self.module = module
        self.skip = skip or set()
        self.lazy = _LazyPositions(module) if _lazy_ok(rules) else None
        self.wrapper = None if self.lazy is not None else \
            _meta.MetadataWrapper(module, unsafe_skip_copy=True)

    def visit_batched(self, instances: list[Rule]) -> None:
        if self.wrapper is not None:
            self.wrapper.visit_batched(instances)
            return
        for inst in instances:
            inst.metadata = {_meta.PositionProvider: self.lazy}
        try:
            methods = _visitor_methods(instances)
            if WALKER and _walk().supports(methods):
                _walk().Walker(methods, self.skip).walk(self.module)
            else:
                from libcst._batched_visitor import _BatchedCSTVisitor

                self.module.visit(_BatchedCSTVisitor(methods))
        finally:
            for inst in instances:
                inst.metadata = {}


#: rule class → names of its visitor methods (libcst's ``get_visitors`` runs
#: ``inspect.getmembers`` on every instance: a noticeable cost per file and rule).
_VISITOR_NAMES: dict[type, tuple[str, ...]] = {}


#: Walk the tree with :mod:`attncheck.lint.walk` (read-only) instead of libcst's rebuilding
#: ``visit``; ``ATTNCHECK_WALKER=0`` uses libcst's.
WALKER = os.environ.get("ATTNCHECK_WALKER", "1") != "0"


def _walk():
    from attncheck.lint import walk

    return walk


def _visitor_methods(instances: list[Rule]) -> dict[str, list]:
    methods: dict[str, list] = {}
    for inst in instances:
        cls = type(inst)
        names = _VISITOR_NAMES.get(cls)
        if names is None or type(inst).get_visitors is not cst.BatchableCSTVisitor.get_visitors:
            names = tuple(inst.get_visitors())
            if type(inst).get_visitors is cst.BatchableCSTVisitor.get_visitors:
                _VISITOR_NAMES[cls] = names
        for name in names:
            methods.setdefault(name, []).append(getattr(inst, name))
    return methods


def _visit(module: cst.Module, ctx: FileContext, rules: list[type[Rule]],
           skip: set[int] | None = None) -> list[Finding]:
    wrapper = _Visitor(module, rules, skip)
    try:
        instances = [r(ctx) for r in rules]
        wrapper.visit_batched(instances)
        return [f for r in instances for f in r.findings]
    except Exception:  # noqa: BLE001 - isolate the failing rule(s) below
        pass
    findings: list[Finding] = []
    for r in rules:
        try:
            inst = r(ctx)
            wrapper.visit_batched([inst])
        except Exception as exc:  # noqa: BLE001 - a rule bug must not crash the run
            if os.environ.get("ATTNCHECK_RAISE"):
                raise
            try:
                detail = str(exc).splitlines()[0] if str(exc) else ""
            except RecursionError:  # a KeyError holding a deeply nested node
                detail = ""
            findings.append(_engine_finding(
                ctx.display_path, "ATT001",
                f"rule {r.code} ({r.name}) raised {type(exc).__name__}"
                f"{': ' + detail if detail else ''}{_where(exc)}; its findings on this file are "
                f"missing (a bug in attncheck: please report it)"))
            continue
        findings.extend(inst.findings)
    return findings


def prefilter(text: str, rules: Iterable[type[Rule]],
              first_matches: dict[str, object] | None = None) -> list[type[Rule]]:
    """The rules that can fire on ``text``: those without a trigger, and those whose trigger
    (``pattern``, else ``tokens``; :func:`attncheck.lint.regions.trigger_of`) matches, and
    its ``requires`` too where it has one.  ``first_matches`` receives each pattern searched
    (its ``pattern`` text) → its first match or ``None`` (the region selection goes on from
    there: :attr:`attncheck.lint.regions.Index.first_matches`)."""
    out = []
    seen: dict[str, object] = {} if first_matches is None else first_matches

    def any_match(patterns) -> bool:
        for p in patterns:
            found = seen.get(p.pattern, False)
            if found is False:
                found = seen[p.pattern] = p.search(text)
            if found is not None:
                return True
        return False

    for r in rules:
        t = _regions.trigger_of(r)
        if t is not None and not (any_match(t.patterns)
                                  and (t.requires is None or any_match(t.requires))):
            continue
        out.append(r)
    return out


@dataclass
class FileOutcome:
    findings: list[Finding]
    parsed: bool = False
    text: str | None = None
    encoding: str = "utf-8"


#: Parse only the regions of a file the enabled rules can need (:mod:`attncheck.lint.regions`);
#: ``ATTNCHECK_REGIONS=0`` in the environment (or ``regions=False``) parses whole files.
REGIONS = os.environ.get("ATTNCHECK_REGIONS", "1") != "0"

def _parse_errors() -> tuple:
    # CSTValidationError: libcst parses ``b"a" "b"`` and then refuses to build the node
    return (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError, MemoryError, ValueError)


_WALKS: dict[type, bool] = {}


def _walks(rule: type[Rule]) -> bool:
    """Whether a rule visits nodes (a ``visit_*``/``leave_*`` other than for ``Module``)."""
    w = _WALKS.get(rule)
    if w is None:
        w = _WALKS[rule] = any(
            n.startswith(("visit_", "leave_")) and n not in ("visit_Module", "leave_Module")
            for k in rule.__mro__ if not k.__module__.startswith("libcst") for n in vars(k))
    return w


def _parse_regions(text: str, active: list[type[Rule]], skip: set[int] | None = None,
                   idx: _regions.Index | None = None) -> cst.Module | None:
    """libcst module of the selected regions of ``text`` (same line numbers), or ``None`` when
    the whole file must be parsed.  ``skip`` receives the ids of top-level definitions the
    node-visiting rules need not walk (no seed of theirs inside); ``idx``: the file's
    :func:`attncheck.lint.regions.index` when already computed."""
    walking = [r for r in active if _walks(r)]
    sel = _regions.select(text, _regions.triggers_of(active),
                          walk=_regions.triggers_of(walking) or (), idx=idx)
    if sel is None:
        return None
    _check_parse_size(len(sel.text) - sel.text.count("\n"))
    try:
        module = _parse_screened(sel.text)
    except _parse_errors():
        return None
    if not _regions.structure_matches(module, sel):
        return None
    if skip is not None:
        defs = [s for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))]
        skip.update(id(d) for d, w in zip(defs, sel.walk_defs) if not w)
    return module


#: The most characters of code (blank lines aside) handed to libcst in one file.  libcst's tree
#: takes several hundred bytes per character; a file whose kept regions are larger is reported
#: as ATT000 ("file too large to analyse") instead of exhausting memory.  Hand-written attention
#: modules are far below it (the largest transformers modeling file: about 0.3 MB).
MAX_PARSE_CHARS = 5_000_000


class _TooLargeToParse(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _check_parse_size(n: int) -> None:
    if n > MAX_PARSE_CHARS:
        raise _TooLargeToParse(n)


def lint_text(text: str, display: str, enabled: frozenset[str],
              registry: dict[str, type[Rule]] | None = None, settings=None,
              regions: bool | None = None, project=None, path: str | None = None) -> FileOutcome:
    """Lint decoded source text with the rules whose codes are in ``enabled``.

    ``regions`` (default :data:`REGIONS`): parse only the top-level definitions the enabled
    rules can need (findings are the same as with a whole-file parse).  ``project``: the linted
    files (:class:`attncheck.lint.project.Project`), whose helpers this file's imports reach;
    ``path`` this file's real path among them."""
    # Python's cyclic garbage collector traverses the young objects every 700 allocations
    # (``gc.get_threshold()``); a parse allocates a node per token and a libcst tree holds no
    # reference cycles (children only), so those passes find nothing: about a tenth of the
    # time of a file.  Nor do the analyses leave the tree in cycles (``FileContext.close`` breaks
    # the index's): it is freed by reference counting as soon as the file's findings are made.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _lint_text(text, display, enabled, registry, settings, regions, project, path)
    finally:
        if collecting:
            gc.enable()


def _lint_text(text: str, display: str, enabled: frozenset[str],
               registry: dict[str, type[Rule]] | None, settings, regions: bool | None,
               project=None, path: str | None = None) -> FileOutcome:
    registry = registry if registry is not None else all_rules()
    visitors = [registry[c] for c in sorted(enabled)
                if c in registry and not getattr(registry[c], "engine_only", False)]
    use_regions = REGIONS if regions is None else regions
    first_matches: dict[str, object] = {}
    active = prefilter(text, visitors, first_matches)
    # the region index is CPython's own parse (``ast``): a file it reads is valid syntax (it
    # accepts what only bytecode compilation refuses, ``return`` outside a function, as libcst
    # does), so it stands in for the syntax screen
    idx = _regions.index(text, first_matches) if use_regions and active \
        and _regions.triggers_of(active) and text.count("\n") + 1 >= _regions.MIN_LINES else None
    if idx is None:
        # also without ATT000: a region parse must not lint a file the whole parse cannot
        # read, and no parse may see a file nested too deeply for the parsers
        broken = _syntax_check(text, display)
        if broken is not None:
            return FileOutcome([broken] if "ATT000" in enabled else [], True, text)
    if not active:
        return FileOutcome([], False, text)
    limit = sys.getrecursionlimit()
    if limit < RECURSION_LIMIT:  # long ``a + b + …`` chains nest deep in the tree
        sys.setrecursionlimit(RECURSION_LIMIT)
    # ``--no-regions`` (the check of the region parse) also parses imported helpers' files whole
    whole = _project.whole_files(True) if not use_regions and project is not None else None
    try:
        return _lint_parsed(text, display, enabled, active, settings, use_regions, idx, project,
                            path)
    finally:
        sys.setrecursionlimit(limit)
        if whole is not None:
            _project.stop_whole_files(whole)


#: Python's recursion limit while a file is parsed and visited (the rules and analyses recurse
#: over expressions: a sum of a few hundred terms passes the default 1,000).  mypy uses 2**14.
RECURSION_LIMIT = 10_000


def _lint_parsed(text: str, display: str, enabled: frozenset[str], active: list[type[Rule]],
                 settings, use_regions: bool, idx: _regions.Index | None = None, project=None,
                 path: str | None = None) -> FileOutcome:
    skip: set[int] = set()
    try:
        module = _parse_regions(text, active, skip, idx) if use_regions else None
        if module is None:
            _check_parse_size(len(text))
    except _TooLargeToParse as big:
        found = [_engine_finding(
            display, "ATT000", f"file too large to analyse: {big.size / 1e6:.1f} MB of code to "
            f"parse > {MAX_PARSE_CHARS / 1e6:g} MB (libcst needs several hundred bytes of memory "
            "per byte); exclude it, or split it")]
        return FileOutcome([f for f in found if f.code in enabled], False, text)
    if module is None:
        skip = set()
        try:
            module = _parse_screened(text)
        except _parse_errors() as exc:
            found = [_syntax_error(text, display, exc)]
            return FileOutcome([f for f in found if f.code in enabled], True, text)
    ctx = FileContext(module, text, display, settings=settings,
                      project=project if path is not None else None, path=path)
    try:
        findings = [f for f in _visit(module, ctx, active, skip) if f.code in enabled]
    finally:
        ctx.close()
    findings = suppression.filter_findings(findings, text)
    return FileOutcome(sorted(set(findings), key=lambda f: f.sort_key), True, text)


def lint_bytes(data: bytes, display: str, enabled: frozenset[str],
               registry: dict[str, type[Rule]] | None = None, settings=None,
               regions: bool | None = None, project=None, path: str | None = None) -> FileOutcome:
    """Decode then :func:`lint_text`; undecodable input → ``ATT000``."""
    try:
        text, encoding = decode_source(data)
    except _Unreadable as u:
        f = _engine_finding(display, "ATT000", f"cannot read source: {u.message}", u.line, u.col)
        return FileOutcome([f] if "ATT000" in enabled else [], False, None)
    out = lint_text(text, display, enabled, registry, settings, regions, project, path)
    out.encoding = encoding
    return out


# --------------------------------------------------------------------------------------------
# public API

def run_rules(source: str, path: str, rules: Iterable[type[Rule]], settings=None) -> list[Finding]:
    """Parse ``source`` once and run ``rules`` (classes) over it; return sorted findings.

    No prefilter, no suppression.  Raises ``libcst.ParserSyntaxError`` when the source does not
    parse (:func:`lint_source` / :func:`lint_paths` turn that into an ATT000 finding).
    """
    module = cst.parse_module(source)
    ctx = FileContext(module, source, path, settings=settings)
    rules = [r for r in rules if not getattr(r, "engine_only", False)]
    if not rules:
        return []
    return sorted(set(_visit(module, ctx, rules)), key=lambda f: f.sort_key)


def lint_source(source: str, path: str = "<string>", select: Iterable[str] | None = None,
                ignore: Iterable[str] | None = None) -> list[Finding]:
    """Lint one file's text with the default rules (or the codes/prefixes in ``select``, minus
    ``ignore``): prefilter, one parse, suppression comments, ATT000 on a syntax error.  No config
    file is read.  Returns findings sorted by (line, column, code)."""
    registry = all_rules()
    layer = Layer(tuple(validate_selectors(list(select), "select")) if select is not None
                  else None, (), tuple(validate_selectors(list(ignore or ()), "ignore")))
    enabled = resolve_selection(registry, [layer])
    return lint_text(source, path, enabled, registry).findings


@dataclass
class LintResult:
    """Outcome of :func:`lint_paths`.

    ``findings`` sorted by (path, cell, line, column, code); ``files`` every file checked (display
    paths, in discovery order); ``errors`` messages (``"PATH: reason"``) for paths that do not
    exist or cannot be read or written; ``parsed`` how many files passed the prefilter and were
    parsed; ``fixed`` fixes applied (written, or for stdin in ``diffs``); ``diffs`` key →
    (old, new) text for what a fix would change (``diff=True`` or after ``fix=True``; the key is
    the path, ``path:cell N`` for a notebook cell); ``sources`` text of files with findings (for
    rendering; ``path:cell N`` for a notebook cell); ``noqa_added`` lines given a ``# noqa``
    and ``noqa_unplaced`` the findings no comment could be placed for (``add_noqa=True``).
    """

    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    parsed: int = 0
    fixed: int = 0
    diffs: dict[str, tuple[str, str]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    noqa_added: int = 0
    noqa_unplaced: list[Finding] = field(default_factory=list)
    #: with ``fix=True``: the bytes of stdin after its fixes (unchanged when none applied)
    stdin_output: bytes | None = None
    #: display path → (file, new bytes, fixes or noqa lines): written by the parent process only
    writes: dict[str, tuple[Path, bytes, int]] = field(default_factory=dict)

    @property
    def internal_errors(self) -> list[Finding]:
        return [f for f in self.findings if f.code == "ATT001"]

    @property
    def diff_files(self) -> int:
        """How many files ``diffs`` changes (notebook cells counted once per notebook)."""
        return len({k.rsplit(":cell ", 1)[0] if k.endswith(tuple("0123456789")) and ":cell " in k
                    else k for k in self.diffs})

    def exit_code(self, exit_zero: bool = False) -> int:
        """0 clean, 1 findings, 2 errors (missing paths, unreadable files, ATT001)."""
        if self.errors or self.internal_errors:
            return 2
        if self.findings and not exit_zero:
            return 1
        return 0


def _as_tuple(values: Iterable[str] | None, where: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    return tuple(validate_selectors(list(values), where))


def default_jobs() -> int:
    """Usable CPU cores (scheduler affinity where the platform has it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class _RuleInfo:
    """What rule selection needs of a rule (from the cache's rule manifest)."""

    code: str
    name: str
    default_enabled: bool


def _selection_registry(cache_dir) -> dict:
    """Code → rule (class, or :class:`_RuleInfo` from the cache's manifest of this engine
    fingerprint, so that a run of cache hits imports no rule module)."""
    if cache_dir is not None:
        from attncheck.lint.cache import load_manifest, save_manifest

        rows = load_manifest(cache_dir)
        if rows is not None:
            registry = {r["code"]: _RuleInfo(r["code"], r["name"], r["default_enabled"]) for r in rows}
            # rules registered in this process beyond the package's own (``@register`` by an API
            # user, after the manifest was written) are selectable too; the rule registry is
            # read only when its module is already loaded, so a run of cache hits still imports
            # no rule module
            loaded = sys.modules.get("attncheck.lint.rule")
            for code, cls in (getattr(loaded, "_REGISTRY", None) or {}).items():
                registry.setdefault(code, cls)
            return dict(sorted(registry.items()))
        registry = all_rules()
        save_manifest(cache_dir, [{"code": c, "name": r.name,
                                   "default_enabled": bool(r.default_enabled)}
                                  for c, r in registry.items()])
        return registry
    return all_rules()


#: Below this many files a process pool costs more than it saves.
MIN_FILES_PER_JOB = 8

#: Default per-file size limit in bytes (``--max-file-size``, in MB): a larger file is reported as
#: ATT000 ("file too large to analyse") without being read.  Below it, a large file costs about
#: one ``compile()`` in time and a bounded amount of memory when it has no attention code (the
#: syntax screen compiles it in pieces, :mod:`attncheck.lint.screen`); what libcst parses is
#: bounded by :data:`MAX_PARSE_CHARS`.
DEFAULT_MAX_FILE_SIZE = 50_000_000


def _stop_workers(pool) -> None:
    """Cancel the queued work and kill the workers of ``pool`` without waiting for the chunks
    they are running (they never write files: the parent does, after all results are in)."""
    kill = getattr(pool, "kill_workers", None)  # Python >= 3.14
    if kill is not None:
        kill()
    else:
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.kill()
    # No cancel_futures: the pool's manager thread fails the pending futures itself once it sees
    # the killed workers, and on Python < 3.12 it raises InvalidStateError (a thread traceback on
    # stderr) for a future that was cancelled meanwhile.  Waiting is short: the workers are dead.
    pool.shutdown(wait=True)


def _worker_init(parent: int) -> None:
    """In each worker process: die with the parent.  Linux's ``PR_SET_PDEATHSIG`` delivers
    SIGKILL when the parent dies; elsewhere (and for the race before it is set) a daemon thread
    polls ``os.getppid()``.  Workers never write files (the parent does, after all results are
    in), so a killed parent leaves every file as it was.  Ctrl-C is the parent's to handle: a
    worker ignores SIGINT (the terminal sends it to the whole process group) and is killed by
    the parent instead, so no worker prints a traceback."""
    import signal
    import threading
    import time

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # forked with SIGINT blocked (see lint_paths)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="attncheck-parent-watch").start()


def lint_paths(paths: Iterable[str | Path], *, select: Iterable[str] | None = None,
               ignore: Iterable[str] | None = None, extend_select: Iterable[str] | None = None,
               config: Config | str | Path | None = None, isolated: bool = False,
               exclude: Iterable[str] | None = None, fix: bool = False,
               unsafe_fixes: bool = False, diff: bool = False,
               stdin: str | bytes | None = None, jobs: int = 1,
               regions: bool | None = None,
               cache_dir: str | Path | None = None, add_noqa: bool = False,
               max_file_size: int | None = DEFAULT_MAX_FILE_SIZE,
               force_exclude: bool = False) -> LintResult:
    """Lint files, notebooks and directories.

    ``paths``: files, directories (walked for ``*.py``/``*.pyi``/``*.ipynb``) or ``"-"`` (stdin;
    ``stdin`` supplies its text instead of reading ``sys.stdin``).  ``select``/``ignore``/
    ``extend_select``: codes, prefixes or ``ALL`` (a comma-separated string also works); they
    override the config as a second selection layer.  ``config``: a :class:`Config`, a path to a
    config file, or ``None`` = the nearest ``pyproject.toml`` with ``[tool.attncheck]`` above
    each path (``isolated=True``: none).  ``exclude``: extra globs relative to the current
    directory.  ``fix``: write fixes back (``unsafe_fixes`` includes unsafe ones); ``diff``:
    compute fixed text without writing (``result.diffs``); stdin is never written: its fixed
    text is in ``result.diffs["-"]``.  ``add_noqa``: write a ``# noqa: CODE`` for every finding
    (``result.noqa_added``, ``result.noqa_unplaced``).  Files are written by this process only,
    after every file is linted, each to a temporary file in its directory and then
    ``os.replace``d over it (encoding, BOM, line endings and permissions kept).
    ``cache_dir``: a result cache directory (:mod:`attncheck.lint.cache`; ``None`` = no cache;
    never used with ``fix``/``diff``/``add_noqa`` or stdin); a cached run returns the same
    result.  ``regions``: ``False`` parses whole files (the findings are the same; for tests and
    benchmarks).  ``jobs``: worker processes (``0`` = all usable cores; a pool is only started
    for at least ``MIN_FILES_PER_JOB`` files per job); the result does not depend on it.
    ``max_file_size``: bytes; a larger file is reported as ATT000 and not read (``None``: no
    limit).
    The ``.py`` files linted together form a project (:mod:`attncheck.lint.project`): a helper
    one of them imports from another is followed by the analyses; the findings do not depend on
    the order of ``paths``, on ``jobs`` or on the cache.
    ``force_exclude``: apply the exclude globs (and the default excluded directories) to paths
    named explicitly too, as ruff's ``--force-exclude`` does (pre-commit names every file).
    A file reached by several spellings (``a.py``, ``./a.py``, an absolute path, through a
    directory) is linted and reported once, under the first spelling.

    Raises :class:`ConfigError` for invalid configuration or selectors.  Paths that cannot be
    linted and files that cannot be read or written are reported in ``result.errors``; the
    other paths are still linted.
    """
    paths = list(paths)
    registry = _selection_registry(cache_dir)
    cli_layer = Layer(_as_tuple(select, "--select"), _as_tuple(extend_select, "--extend-select")
                      or (), _as_tuple(ignore, "--ignore") or (), origin="--")
    explicit: Config | None
    if isinstance(config, Config):
        explicit = config
    elif config is not None:
        explicit = load_config(config)
    else:
        explicit = Config(root=Path.cwd()) if isolated else None
    extra_exclude = list(exclude or ())

    result = LintResult()
    selection_cache: dict[int, frozenset[str]] = {}
    seen: set[str] = set()
    work: list[_Work] = []
    for arg in paths:
        arg = str(arg)
        if arg != STDIN:
            try:  # before the config lookup, which resolves the path
                check_path(arg)
            except PathError as exc:
                result.errors.append(str(exc))
                continue
        if explicit is not None:
            cfg = explicit
        else:
            cfg = find_config(Path.cwd() if arg == STDIN else Path(arg))
        key = id(cfg)
        if key not in selection_cache:
            origin = f"{cfg.path}: [tool.attncheck] " if cfg.path is not None else ""
            layers = [Layer(tuple(cfg.select) if cfg.select is not None else None,
                            tuple(cfg.extend_select), tuple(cfg.ignore), origin), cli_layer]
            selection_cache[key] = resolve_selection(registry, layers)
        enabled = selection_cache[key]
        if force_exclude and arg != STDIN and (
                is_force_excluded(Path(arg), list(cfg.exclude), cfg.root)
                or (extra_exclude and is_force_excluded(Path(arg), extra_exclude, Path.cwd()))):
            continue
        try:
            sources = discover(arg, list(cfg.exclude), cfg.root, result.errors)
            if extra_exclude and arg != STDIN and Path(arg).is_dir():
                sources = [s for s in sources if not matches(s.path, extra_exclude, Path.cwd())]
        except PathError as exc:
            result.errors.append(str(exc))
            continue
        for src in sources:
            identity = src.display if src.path is None else os.path.realpath(src.path)
            if identity in seen:
                continue
            seen.add(identity)
            file_enabled = _apply_file_ignores(
                enabled, _per_file_ignored(src.display, src.path, cfg))
            data = None
            if src.path is None:
                data = _read(src, stdin)
            work.append(_Work(src, cfg, file_enabled, data, fix, unsafe_fixes, diff, regions,
                              None if cache_dir is None else str(cache_dir), add_noqa,
                              max_file_size))

    _link_project(work, paths)
    jobs = default_jobs() if jobs <= 0 else jobs
    jobs = min(jobs, len(work) // MIN_FILES_PER_JOB)
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init,
                                   initargs=(os.getpid(),))
        # The workers are forked while the work is submitted: with Ctrl-C blocked until then, a
        # worker cannot see SIGINT before it ignores it (no worker traceback), and the parent's
        # interrupt is not swallowed inside fork's handlers; a pending one arrives on unblocking.
        can_block = hasattr(signal, "pthread_sigmask")
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if can_block else None
        try:
            size = max(1, len(work) // (jobs * 8))
            try:  # submit, not Executor.map: on Ctrl-C map cancels the queued futures, which
                # the pool's manager thread then fails to mark broken (InvalidStateError, < 3.12)
                futures = [pool.submit(_run_chunk, work[i:i + size])
                           for i in range(0, len(work), size)]
            finally:
                if can_block:
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            reports = [rep for fut in futures for rep in fut.result()]
        except BaseException:  # Ctrl-C (or an error): stop now, not after the queued work
            _stop_workers(pool)
            raise
        pool.shutdown()
    else:
        reports = [_run_work(w) for w in work]
    for rep in reports:
        result.files.extend(rep.files)
        result.errors.extend(rep.errors)
        result.parsed += rep.parsed
        result.fixed += rep.fixed
        result.diffs.update(rep.diffs)
        result.sources.update(rep.sources)
        result.findings.extend(rep.findings)
        result.noqa_added += rep.noqa_added
        result.noqa_unplaced.extend(rep.noqa_unplaced)
        result.writes.update(rep.writes)
        if rep.stdin_output is not None:
            result.stdin_output = rep.stdin_output
    _write_all(result, fix=fix and not diff)
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def _link_project(work: list[_Work], paths: Iterable[str | Path]) -> None:
    """Hand every file the set of linted ``.py`` files and directories
    (:class:`attncheck.lint.project.Project`), built before any file is linted: a helper
    imported from a linted file is followed whatever the order and the number of jobs."""
    files = [str(w.src.path) for w in work if w.src.path is not None and w.src.path.suffix == ".py"]
    if len(files) < 2:
        return
    from attncheck.lint.project import Project

    roots = [str(p) for p in paths if str(p) != STDIN and Path(p).is_dir()]
    project = Project(files, roots)
    for w in work:
        w.project = project


def _write_all(result: LintResult, fix: bool) -> None:
    """Write the files of ``result.writes`` (this process only; see :func:`atomic_write`)."""
    from attncheck.atomic import atomic_write

    for display, (path, data, n) in sorted(result.writes.items()):
        try:
            atomic_write(path, data)
        except OSError as exc:
            result.errors.append(f"{display}: cannot write: {os_reason(exc)}; the file is "
                                 "unchanged")
            if fix:
                result.fixed -= n
            else:
                result.noqa_added -= n
    result.writes.clear()


@dataclass
class _Work:
    src: Source
    cfg: Config
    enabled: frozenset[str]
    data: bytes | None  # pre-read (stdin)
    fix: bool
    unsafe: bool
    diff: bool
    regions: bool | None = None
    cache_dir: str | None = None
    add_noqa: bool = False
    max_file_size: int | None = DEFAULT_MAX_FILE_SIZE
    #: the linted files (:class:`attncheck.lint.project.Project`): imported helpers are followed
    project: object = None

    def real_path(self) -> str | None:
        """This file's real path in :attr:`project` (``None``: stdin, notebooks, no project)."""
        if self.project is None or self.src.path is None or self.src.path.suffix != ".py":
            return None
        return os.path.realpath(self.src.path)


_CACHES: dict[str, "Cache"] = {}


def _cache_for(w: _Work):
    if w.cache_dir is None or w.fix or w.diff or w.add_noqa or w.src.path is None \
            or w.regions is False:
        return None  # --no-regions verifies the region parse: it must not read or write the cache
    c = _CACHES.get(w.cache_dir)
    if c is None:
        from attncheck.lint.cache import Cache

        c = _CACHES[w.cache_dir] = Cache(w.cache_dir)
    return c


def _display_text(data: bytes) -> str:
    try:
        return decode_source(data)[0]
    except _Unreadable:
        return data.decode("utf-8", "replace")


def _read(src: Source, stdin: str | bytes | None, limit: int | None = None) -> bytes:
    if src.path is None:
        if stdin is None:
            return sys.stdin.buffer.read()
        return stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    return read_regular(src.path, limit)


def _too_large(display: str, size: int, limit: int) -> Finding:
    mb = size / 1e6
    return _engine_finding(
        display, "ATT000", f"file too large to analyse: {mb:.1f} MB > {limit / 1e6:g} MB limit "
        f"(not read); pass --max-file-size {int(mb) + 1} to lint it, or exclude it")


def _is_notebook(src: Source) -> bool:
    return src.path is not None and src.path.suffix == NOTEBOOK_SUFFIX


def _run_chunk(works: list) -> list:
    """Lint a chunk of :class:`_Work` items in a worker process (one task per chunk keeps the
    pool's overhead per file small)."""
    return [_run_work(w) for w in works]


def _run_work(w: _Work, registry=None) -> LintResult:
    """Lint one file (in this process or a worker); return a one-file :class:`LintResult`
    (files to write in ``writes``: only the parent writes).  ``registry``: the rule classes
    (default :func:`all_rules`, imported only on a cache miss)."""
    rep = LintResult()
    src, file_enabled = w.src, w.enabled
    try:
        data = w.data if w.data is not None else _read(src, None, w.max_file_size)
    except FileTooLarge as big:
        rep.files.append(src.display)
        if "ATT000" in file_enabled:
            rep.findings.append(_too_large(src.display, big.size, big.limit))
        return rep
    except OSError as exc:
        rep.errors.append(f"{src.display}: cannot read: {os_reason(exc)}")
        return rep
    if w.data is not None and w.max_file_size is not None and len(data) > w.max_file_size:
        rep.files.append(src.display)
        if "ATT000" in file_enabled:
            rep.findings.append(_too_large(src.display, len(data), w.max_file_size))
        return rep
    rep.files.append(src.display)
    cache = _cache_for(w)
    key = None
    if cache is not None:
        key = cache.key(file_enabled, data, w.real_path() is not None)
        hit = cache.get(key, src.display, w.project, w.real_path())
        if hit is not None:
            findings, parsed = hit
            rep.parsed += parsed
            if findings:
                if _is_notebook(src):
                    _notebook_sources(rep, src.display, data)
                else:
                    rep.sources[src.display] = _display_text(data)
            rep.findings.extend(findings)
            return rep
    registry = registry if registry is not None else all_rules()
    deps = _project.Dependencies()
    token = _project.recording(deps)
    try:
        if _is_notebook(src):
            _lint_notebook(w, data, registry, rep)
        else:
            _lint_file(w, data, registry, rep)
    except Exception as exc:  # noqa: BLE001 - an engine bug must not end the run
        if os.environ.get("ATTNCHECK_RAISE"):
            raise
        rep.findings.append(_engine_finding(
            src.display, "ATT001", f"attncheck raised {type(exc).__name__}: {exc}{_where(exc)} "
            f"while linting this file (a bug in attncheck: please report it)"))
        rep.writes.clear()
        return rep
    finally:
        _project.stop_recording(token)
    if key is not None and not any(f.code == "ATT001" for f in rep.findings):
        cache.put(key, rep.findings, bool(rep.parsed), deps, w.real_path())
    return rep


def _lint_file(w: _Work, data: bytes, registry, rep: LintResult) -> None:
    src, file_enabled, cfg, unsafe = w.src, w.enabled, w.cfg, w.unsafe
    out = lint_bytes(data, src.display, file_enabled, registry, cfg, w.regions, w.project,
                     w.real_path())
    rep.parsed += out.parsed
    findings = out.findings
    if (w.fix or w.diff) and out.text is not None and any(applicable(f, unsafe) for f in findings):
        text = out.text
        fixed = 0
        for _ in range(MAX_FIX_PASSES):
            new, n = apply_fixes(text, [f.fix for f in findings if applicable(f, unsafe)])
            if n == 0 or new == text:
                break
            text = new
            fixed += n
            findings = lint_text(text, src.display, file_enabled, registry, cfg, w.regions,
                                 w.project, w.real_path()).findings
            if not any(applicable(f, unsafe) for f in findings):
                break
        if text != out.text:
            if src.path is not None and w.fix and not w.diff:
                try:
                    rep.writes[src.display] = (src.path, text.encode(out.encoding), fixed)
                except UnicodeEncodeError as exc:
                    rep.errors.append(f"{src.display}: cannot write fixes: the fixed text has "
                                      f"{exc.object[exc.start]!r}, which {out.encoding} cannot "
                                      "encode; the file is unchanged")
                    text, findings, fixed = out.text, out.findings, 0
            if text != out.text:
                rep.diffs[src.display] = (out.text, text)
                rep.fixed += fixed
                out.text = text
                if src.path is None and w.fix:
                    try:
                        rep.stdin_output = text.encode(out.encoding)
                    except UnicodeEncodeError:
                        rep.errors.append("-: cannot encode the fixed text as "
                                          f"{out.encoding}; stdin is written back unchanged")
                        rep.fixed -= fixed
    if src.path is None and w.fix and rep.stdin_output is None:
        rep.stdin_output = data
    if w.add_noqa and out.text is not None and src.path is not None and findings:
        from attncheck.lint.suppression import add_noqa_report

        new, n, unplaced = add_noqa_report(out.text, findings)
        rep.noqa_unplaced.extend(unplaced)
        if n:
            try:
                rep.writes[src.display] = (src.path, new.encode(out.encoding), n)
                rep.noqa_added += n
            except UnicodeEncodeError:  # noqa comments are ASCII: cannot happen
                rep.errors.append(f"{src.display}: cannot encode the noqa comments")
    if findings:
        rep.sources[src.display] = out.text if out.text is not None else \
            data.decode("utf-8", "replace")
    rep.findings.extend(findings)


def _notebook_sources(rep: LintResult, display: str, data: bytes) -> None:
    from attncheck.lint import notebook

    try:
        nb = notebook.load(data)
    except notebook.NotebookError:
        return
    for c in nb.cells:
        rep.sources[f"{display}:cell {c.index}"] = c.source


def _lint_notebook(w: _Work, data: bytes, registry, rep: LintResult) -> None:
    """Lint the code cells of a notebook (:mod:`attncheck.lint.notebook`)."""
    from attncheck.lint import notebook

    src, file_enabled, cfg, unsafe = w.src, w.enabled, w.cfg, w.unsafe
    try:
        nb = notebook.load(data)
    except notebook.NotebookError as exc:
        if "ATT000" in file_enabled:
            rep.findings.append(_engine_finding(
                src.display, "ATT000", f"cannot read notebook: {exc.message}", exc.line, exc.col))
        return
    if not nb.python or not nb.cells:
        return
    out = lint_text(nb.module, src.display, file_enabled, registry, cfg, w.regions)
    rep.parsed += out.parsed
    findings = out.findings
    first = nb
    if (w.fix or w.diff) and any(applicable(f, unsafe) for f in findings):
        fixed = 0
        for _ in range(MAX_FIX_PASSES):
            changed: dict[int, str] = {}
            for pos, fs in notebook.cell_findings(
                    nb, [f for f in findings if applicable(f, unsafe)]).items():
                new, n = apply_fixes(nb.cells[pos].source, [f.fix for f in fs])
                if n and new != nb.cells[pos].source:
                    changed[pos] = new
                    fixed += n
            if not changed:
                break
            nb = notebook.load(notebook.dump(nb, changed))
            findings = lint_text(nb.module, src.display, file_enabled, registry, cfg,
                                 w.regions).findings
            if not any(applicable(f, unsafe) for f in findings):
                break
        if nb is not first:
            for old, new in zip(first.cells, nb.cells):
                if old.source != new.source:
                    rep.diffs[f"{src.display}:cell {old.index}"] = (old.source, new.source)
            rep.fixed += fixed
            if w.fix and not w.diff:
                rep.writes[src.display] = (src.path, notebook.dump(nb, {}), fixed)
    if w.add_noqa and findings:
        from attncheck.lint.suppression import add_noqa_report

        changed = {}
        added = 0
        for pos, fs in notebook.cell_findings(nb, findings).items():
            cell = nb.cells[pos]
            new, n, unplaced = add_noqa_report(cell.text, fs)
            rep.noqa_unplaced.extend(unplaced)
            if n:
                changed[pos] = notebook.restore_magics(cell, new)
                added += n
        if changed:
            rep.writes[src.display] = (src.path, notebook.dump(nb, changed), added)
            rep.noqa_added += added
    for c in nb.cells:
        rep.sources[f"{src.display}:cell {c.index}"] = c.source
    rep.findings.extend(notebook.to_cells(nb, f) for f in findings)
