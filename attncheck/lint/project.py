"""Helpers imported from other files of the linted tree.

Attention code often builds its causal mask, splits heads or computes its scale in a
``utils.py`` that the layer imports (``from .utils import make_causal_mask``, ``from ..utils
import split_heads as sh``, ``import utils as U; U.make_causal_mask(L)``).  The analyses
(:mod:`attncheck.lint.analysis.provenance`, :mod:`attncheck.lint.analysis.masks`) follow such a
call the way they follow a same-file helper: they run the callee's body, from its own parsed
file, with the caller's argument values.

- :class:`Project` is the set of linted files (real paths) and the linted roots, built by the
  engine before any file is linted (so findings depend neither on file order nor on ``--jobs``).
  A module name resolves to a linted file only: ``.utils`` from ``pkg/layer.py`` is
  ``pkg/utils.py`` or ``pkg/utils/__init__.py``; an absolute ``a.b`` is looked up under the
  parent of the importer's top package (the topmost directory above it whose ``__init__.py`` is
  linted), the importer's own directory (a script's sibling import), each linted directory and
  its parent, in that order.  A module outside the linted files is unknown (no finding from it).
  Nothing is imported or executed.
- :func:`imported_function` maps a callee expression through the caller's import table
  (:class:`~attncheck.lint.context.ImportTable`, relative imports included) to a top-level
  ``def`` of a linted file, following re-exports (``pkg/__init__.py``'s ``from .utils import
  f``) up to :data:`MAX_REEXPORTS` files deep.
- Every look-up a file's analysis makes — each module name with the file it resolved to (or
  none), each file read with its content hash — is recorded in :class:`Dependencies` while the
  engine lints that file; the result cache (:mod:`attncheck.lint.cache`) stores the record with
  the findings and a later run reuses them only when every look-up still gives the same file
  and every file read still has the same content (:func:`Dependencies.still_valid`).
- :func:`rehome` moves the syntax nodes of another file that a helper's return value carries
  (where a mask was built, where heads were split) to the call site: a finding is always
  reported in the file being linted, at the call that brought the value in.

A callee file is first read by the stdlib :mod:`ast` (:func:`attncheck.lint.regions.index`,
about a tenth of libcst's time), which says what the imported name is at its top level: a
class (or a ``def`` reached through an attribute, ``f.x``) is no helper the analyses can run,
and nothing is parsed with libcst; for a top-level ``def`` libcst parses only the region the
helper needs (:func:`attncheck.lint.regions.select` with the name as its root, from the index
just read when the file is new to the process: its same-file
helpers, the module bindings and imports they read, same-named definitions, and the methods any
class of the file has under an attribute name they read); only a name the file merely binds
(a re-export) has the whole file parsed, for its import table.  The line numbers are the
file's own, and the callee's analyzer sees the same definitions, imports and constants as in
the whole file, so findings are the same (``--no-regions`` loads callee files whole, as the
check of this).  Each parse is kept per process, content and name (:data:`MAX_LOADED_BYTES` of
source kept); a callee file larger than :data:`MAX_CALLEE_BYTES` is not followed.
"""
from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import os
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

#: re-exporting files followed from the importer to the defining file (``pkg/__init__.py``)
MAX_REEXPORTS = 3
#: bytes of source of the parsed callee files kept per process (libcst's tree takes several
#: hundred bytes per byte of source; the least recently used file goes first)
MAX_LOADED_BYTES = 500_000
#: a larger callee file is not parsed (its helpers stay unknown)
MAX_CALLEE_BYTES = 500_000


class Project:
    """The linted files (``files``: real paths of ``.py`` files) and the linted directories
    (``roots``: real paths).  Immutable and picklable: the engine builds it once per run and
    hands it to every worker."""

    __slots__ = ("files", "roots", "_hash", "_stems")

    def __init__(self, files: Iterable[str], roots: Iterable[str] = ()) -> None:
        self.files = frozenset(os.path.realpath(f) for f in files)
        self.roots = tuple(sorted({os.path.realpath(r) for r in roots}))
        self._hash = hash((self.files, self.roots))
        self._stems: frozenset[str] | None = None

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Project) and self.files == other.files
                                 and self.roots == other.roots)

    def __getstate__(self) -> tuple:
        return self.files, self.roots

    def __setstate__(self, state: tuple) -> None:
        self.files, self.roots = state
        self._hash = hash((self.files, self.roots))
        self._stems = None

    def _module_in(self, base: str, parts: list[str]) -> str | None:
        stem = os.path.join(base, *parts)
        for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
            if cand in self.files:
                return cand
        return None

    def _top_package_parent(self, directory: str) -> str:
        d = directory
        while os.path.join(d, "__init__.py") in self.files:
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        return d

    def module_file(self, importer: str, level: int, module: str) -> str | None:
        """The linted file of ``module`` imported from the file ``importer`` (``level``: the
        leading dots of a relative import, 0 for an absolute one), or ``None``."""
        parts = [p for p in module.split(".") if p]
        here = os.path.dirname(importer)
        if level > 0:
            base = relative_base(importer, level)
            if not parts:
                init = os.path.join(base, "__init__.py")
                return init if init in self.files else None
            return self._module_in(base, parts)
        if not parts:
            return None
        for b in self._absolute_bases(here):
            found = self._module_in(b, parts)
            if found is not None:
                return found
        return None

    def _absolute_bases(self, here: str) -> list[str]:
        """The directories an absolute import from the directory ``here`` is looked up in, in
        order (see the class docstring), each once."""
        bases = [self._top_package_parent(here), here]
        for r in self.roots:
            bases += [r, os.path.dirname(r)]
        return list(dict.fromkeys(bases))

    def _linted_stems(self) -> frozenset[str]:
        """Each linted file's path without ``.py`` and every directory above a linted file."""
        if self._stems is None:
            out: set[str] = set()
            for f in self.files:
                out.add(f[:-3] if f.endswith(".py") else f)
                d = os.path.dirname(f)
                while d not in out:
                    out.add(d)
                    parent = os.path.dirname(d)
                    if parent == d:
                        break
                    d = parent
            self._stems = frozenset(out)
        return self._stems

    def may_hold(self, importer: str, level: int, head: str) -> bool:
        """Whether a module named ``head`` or ``head.…`` (``head``: one name), imported from the
        file ``importer`` with ``level`` leading dots, can be a linted file.  ``False`` proves
        that every :meth:`module_file` look-up of such a module gives ``None``: it would be
        ``BASE/head.py``, or a file under the directory ``BASE/head``, for one of the
        directories :meth:`module_file` looks in."""
        if level > 0:
            bases = [relative_base(importer, level)]
        else:
            bases = self._absolute_bases(os.path.dirname(importer))
        stems = self._linted_stems()
        return any(os.path.join(b, head) in stems for b in bases)


def relative_base(importer: str, level: int) -> str:
    """The directory a relative import with ``level`` leading dots names from ``importer``."""
    base = os.path.dirname(importer)
    for _ in range(level - 1):
        base = os.path.dirname(base)
    return base


class Dependencies:
    """What one linted file's analysis read of other files: module look-ups
    ``(importer, level, module) → file or None`` and files read ``path → sha256 or None``."""

    __slots__ = ("files", "memo", "modules")

    def __init__(self) -> None:
        self.modules: dict[tuple[str, int, str], str | None] = {}
        self.files: dict[str, str | None] = {}
        #: (id of a FileContext, callee name) → (that context, resolution), for this file only
        self.memo: dict[tuple[int, str], tuple[Any, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.modules or self.files)

    def to_json(self) -> dict:
        return {"modules": sorted([i, lv, m, p] for (i, lv, m), p in self.modules.items()),
                "files": dict(sorted(self.files.items()))}

    @staticmethod
    def still_valid(project: Project | None, record: dict) -> bool:
        """Whether a stored :meth:`to_json` record gives the same answers now: each module
        look-up the same file, each file the same content."""
        modules, files = record.get("modules", ()), record.get("files", {})
        if (modules or files) and project is None:
            return False
        for importer, level, module, path in modules:
            if project.module_file(importer, level, module) != path:
                return False
        return all(content_hash(p) == h for p, h in files.items())


_RECORD: contextvars.ContextVar[Dependencies | None] = contextvars.ContextVar(
    "cross_file_dependencies", default=None)


def recording(deps: Dependencies) -> contextvars.Token:
    """Record the look-ups of the file being linted in ``deps`` (until :func:`stop_recording`)."""
    return _RECORD.set(deps)


def stop_recording(token: contextvars.Token) -> None:
    _RECORD.reset(token)


def content_hash(path: str) -> str | None:
    """sha256 of the file's bytes; ``None`` when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _module_file(project: Project, importer: str, level: int, module: str) -> str | None:
    found = project.module_file(importer, level, module)
    rec = _RECORD.get()
    if rec is not None:
        rec.modules[(importer, level, module)] = found
    return found


#: parsed callee files: (project, path, root: the imported ``def`` whose region was parsed, or
#: ``None`` for the whole file) -> (sha256 of the bytes, FileContext, characters parsed).  The
#: one module-level cache the analyses share, and a pure one: an entry is used only while the
#: file's bytes hash the same, and what it holds (the libcst tree, the module index, qualified
#: names) is a function of those bytes, the project and the root alone.  No analysis fact of a
#: caller is kept: each analysis builds its own analyzer over a loaded callee
#: (``Interpreter.imported``).
_LOADED: OrderedDict[tuple[Project, str, str | None], tuple[str, Any, int]] = OrderedDict()
#: the top-level names of each callee file read by ``ast``: path → (sha256, functions, classes),
#: or ``None`` for a file ``ast`` cannot read
_NAMES: OrderedDict[str, tuple[str, frozenset[str], frozenset[str]] | None] = OrderedDict()
#: callee files whose top-level names are kept
MAX_NAMED_FILES = 2_000

_WHOLE: contextvars.ContextVar[bool] = contextvars.ContextVar("whole_callee_files",
                                                              default=False)


def whole_files(whole: bool) -> contextvars.Token:
    """Load callee files whole (``True``: the ``--no-regions`` check of the region loads)
    until :func:`stop_whole_files`."""
    return _WHOLE.set(whole)


def stop_whole_files(token: contextvars.Token) -> None:
    _WHOLE.reset(token)


def _read_callee(path: str) -> tuple[bytes | None, str | None]:
    """The bytes of a callee file (``None``: unreadable or over :data:`MAX_CALLEE_BYTES`) and
    their sha256, recorded as a file the linted file depends on."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CALLEE_BYTES + 1)
    except OSError:
        data = None
    sha = hashlib.sha256(data).hexdigest() if data is not None else None
    rec = _RECORD.get()
    if rec is not None:
        rec.files[path] = sha
    if data is None or len(data) > MAX_CALLEE_BYTES:
        return None, sha
    return data, sha


def load(project: Project, path: str) -> Any:
    """The :class:`~attncheck.lint.context.FileContext` of the linted file ``path`` (whole-file
    libcst parse), or ``None`` when it cannot be read, decoded or parsed."""
    data, sha = _read_callee(path)
    return None if data is None else _load(project, path, data, sha, None)


def _load(project: Project, path: str, data: bytes, sha: str, root: str | None,
          idx: Any = None) -> Any:
    key = (project, path, root)
    hit = _LOADED.pop(key, None)
    if hit is not None and hit[0] == sha:
        _LOADED[key] = hit
        return hit[1]
    ctx, size = _parse(project, path, data, root, idx)
    _LOADED[key] = (sha, ctx, size)
    total = sum(n for _, _, n in _LOADED.values())
    while total > MAX_LOADED_BYTES and len(_LOADED) > 1:
        total -= _LOADED.popitem(last=False)[1][2]
    return ctx


def _parse(project: Project, path: str, data: bytes, root: str | None,
           idx: Any = None) -> tuple[Any, int]:
    """The file's context and the characters handed to libcst: the region of the top-level
    function ``root`` (the whole file when ``root`` is ``None`` or the region does not parse
    to the selected definitions).  ``idx``: the file's region index when the caller has it."""
    import libcst as cst

    from attncheck.lint import regions
    from attncheck.lint.context import FileContext
    from attncheck.lint.engine import _parse_errors, _parse_screened, _Unreadable, decode_source

    try:
        text, _ = decode_source(data)
    except _Unreadable:
        return None, len(data)
    module = None
    if root is not None:  # ``text`` passed the ``ast`` screen (:func:`_top_names`)
        sel = regions.select(text, (), roots=(root,), idx=idx)
        if sel is not None:
            try:
                module = _parse_screened(sel.text)
            except _parse_errors():
                module = None
            if module is not None and not regions.structure_matches(module, sel):
                module = None
            if module is not None:
                size = len(sel.text) - sel.text.count("\n")
    if module is None:
        try:
            module = cst.parse_module(text)
        except _parse_errors():
            return None, len(data)
        size = len(text)
    return FileContext(module, text, path, project=project, path=path), size


def _top_names(path: str, data: bytes,
               sha: str) -> tuple[frozenset[str], frozenset[str], Any] | None:
    """The names of the top-level functions and classes of a callee file (the definitions
    :class:`~attncheck.lint.analysis.index.ModuleIndex` holds), read by ``ast``, and the region
    index they were read from when it is read now (``None`` when they were known): the caller
    selects a helper's region from it instead of reading the file again.  The index itself is
    not kept (its ``ast`` nodes take about 36 bytes per byte of source, which Python's cyclic
    collector would traverse for as long as they live).  ``None`` when ``ast`` cannot read the
    file (then it is parsed whole by libcst, which decides)."""
    hit = _NAMES.pop(path, None)
    if hit is not None and hit[0] == sha:
        _NAMES[path] = hit
        return hit[1], hit[2], None
    from attncheck.lint import regions
    from attncheck.lint.engine import _Unreadable, decode_source

    try:
        idx = regions.index(decode_source(data)[0])
    except _Unreadable:
        idx = None
    if idx is None:
        return None
    funcs = frozenset(n for n, is_class in idx.tops if n and not is_class)
    classes = frozenset(n for n, is_class in idx.tops if n and is_class)
    _NAMES[path] = (sha, funcs, classes)
    while len(_NAMES) > MAX_NAMED_FILES:
        _NAMES.popitem(last=False)
    return funcs, classes, idx


def imported_function(ctx: Any, func: Any) -> tuple[Any, Any] | None:
    """See :meth:`attncheck.lint.context.FileContext.imported_function`."""
    from attncheck.lint.context import dotted_name

    name = dotted_name(func)
    if name is None or ctx.path is None:
        return None
    rec = _RECORD.get()
    if rec is None:
        return _resolve(ctx, name.split("."), 0)
    key = (id(ctx), name)
    hit = rec.memo.get(key)
    if hit is None:  # the memo holds ``ctx``: its id is not reused while the record lives
        hit = rec.memo[key] = (ctx, _resolve(ctx, name.split("."), 0))
    return hit[1]


def may_resolve(ctx: Any, name: str) -> bool:
    """Whether a call through the imported name ``name`` (a key of the import table's
    ``aliases`` or ``relative``: ``name(…)``, ``name.f(…)``) can resolve to a function of a
    linted file.  ``False`` proves :func:`imported_function` gives ``None`` for every such
    callee: the first module it looks up is no linted file, whatever the attributes."""
    project, path = ctx.project, ctx.path
    if project is None or path is None:
        return False
    imports = ctx.imports
    rel = imports.relative.get(name)
    if rel is not None:
        level, module, imported = rel
        if not module:  # ``from . import x``: ``x`` itself, or an attribute of ``__init__.py``
            return project.may_hold(path, level, imported) \
                or os.path.join(relative_base(path, level), "__init__.py") in project.files
        return project.may_hold(path, level, module.split(".")[0])
    full = imports.aliases.get(name)
    if full is None:
        return False
    return project.may_hold(path, 0, full.split(".")[0])


def _resolve(ctx: Any, parts: list[str], depth: int) -> tuple[Any, Any] | None:
    head, rest = parts[0], parts[1:]
    imports = ctx.imports
    targets: list[tuple[int, str, list[str]]]
    if head in imports.relative:
        level, module, name = imports.relative[head]
        sub = f"{module}.{name}" if module else name
        # ``from .pkg import utils`` names a module; ``from .utils import f`` an attribute
        targets = [(level, sub, rest), (level, module, [name, *rest])]
    elif head in imports.aliases:
        full = imports.aliases[head].split(".") + rest
        targets = [(0, ".".join(full[:i]), full[i:]) for i in range(len(full) - 1, 0, -1)]
    else:
        return None
    for level, module, attrs in targets:
        if not attrs:
            continue
        path = _module_file(ctx.project, ctx.path, level, module)
        if path is None:
            continue
        data, sha = _read_callee(path)
        if data is None:
            return None
        names = None if _WHOLE.get() else _top_names(path, data, sha)
        if names is not None:
            funcs, classes, idx = names
            if attrs[0] in funcs or attrs[0] in classes:
                # a top-level definition: a helper to run only as ``f`` itself
                if len(attrs) > 1 or attrs[0] not in funcs:
                    return None
                callee = _load(ctx.project, path, data, sha, attrs[0], idx)
                if callee is None:
                    return None
                f = callee.index.functions.get(attrs[0])
                return (callee, f) if f is not None else None
        callee = _load(ctx.project, path, data, sha, None)
        if callee is None:
            return None
        if len(attrs) == 1:
            f = callee.index.functions.get(attrs[0])
            if f is not None:
                return callee, f
        if depth < MAX_REEXPORTS and attrs[0] not in callee.index.functions \
                and attrs[0] not in callee.index.classes:
            return _resolve(callee, attrs, depth + 1)
        return None
    return None


def _node_ids(ctx: Any) -> frozenset[int]:
    ids = ctx.__dict__.get("_node_ids")
    if ids is None:
        from attncheck.lint.analysis.syntax import child_nodes

        out: set[int] = set()
        stack = [ctx.module]
        while stack:
            n = stack.pop()
            out.add(id(n))
            stack.extend(child_nodes(n))
        ids = ctx.__dict__["_node_ids"] = frozenset(out)
    return ids


#: nesting followed inside a returned value (tensors hold the tensors they came from)
_REHOME_DEPTH = 12


def rehome(value: Any, callee: Any, call: Any, opaque: tuple[type, ...] = (),
           unknown: Any = None) -> Any:
    """``value`` (returned by a helper of the file ``callee``) with every syntax node of that
    file replaced by ``call``, the call site in the linted file.  Dataclass values are copied
    (:func:`dataclasses.replace`), tuples, lists and dicts rebuilt; other values are returned
    as they are.  A value of an ``opaque`` type (one whose nodes are code to run, not places:
    a function value) becomes ``unknown``."""
    import libcst as cst

    return _Rehoming(cst.CSTNode, _node_ids(callee), call, opaque, unknown).walk(value, 0)


class _Rehoming:
    """The state of one :func:`rehome` (a class, not a closure that calls itself: such a
    closure is a reference cycle, freed with what it holds by the cyclic collector only)."""

    __slots__ = ("call", "foreign", "memo", "node", "opaque", "unknown")

    def __init__(self, node: type, foreign: frozenset[int], call: Any, opaque: tuple[type, ...],
                 unknown: Any) -> None:
        self.node = node  # libcst's node base class
        self.foreign = foreign
        self.call = call
        self.opaque = opaque
        self.unknown = unknown
        self.memo: dict[int, Any] = {}

    def walk(self, v: Any, depth: int) -> Any:
        if isinstance(v, self.node):
            return self.call if id(v) in self.foreign else v
        if self.opaque and isinstance(v, self.opaque):
            return self.unknown
        if depth > _REHOME_DEPTH or v is None or isinstance(v, (str, int, float, bool)):
            return v
        key = id(v)
        memo = self.memo
        if key in memo:
            return memo[key]
        out = v
        t = type(v)
        if t is tuple or t is list:
            items = [self.walk(x, depth + 1) for x in v]
            if any(a is not b for a, b in zip(items, v)):
                out = t(items)
        elif t is dict:
            vals = {k: self.walk(x, depth + 1) for k, x in v.items()}
            if any(vals[k] is not x for k, x in v.items()):
                out = vals
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            changes = {}
            for f in dataclasses.fields(v):
                if not f.init:
                    continue
                x = getattr(v, f.name)
                y = self.walk(x, depth + 1)
                if y is not x:
                    changes[f.name] = y
            if changes:
                out = dataclasses.replace(v, **changes)
        memo[key] = out
        return out
