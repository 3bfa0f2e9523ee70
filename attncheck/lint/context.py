"""Per-file context shared by all rules: the parsed module, import aliases, lazy analyses.

Nothing here imports or executes the code being linted.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any

import libcst as cst

from attncheck.lint import project as _project
from attncheck.lint.analysis import ops as _ops


def is_library_name(qualname: str) -> bool:
    """Whether a resolved name (``torch.softmax``, ``einops.rearrange``) is PyTorch's or a
    callable of the op catalog (:mod:`attncheck.lint.analysis.ops`): such a callee keeps its
    catalog meaning and is never looked up among the linted files' functions."""
    return qualname.partition(".")[0] == "torch" or qualname in _ops.FUNCTIONS \
        or qualname in _ops.MODULES


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else ``None`` (calls, subscripts, ...)."""
    # exact type tests: libcst's node classes are ABCs, whose ``isinstance`` runs Python code,
    # and ``Name`` and ``Attribute`` have no subclasses
    t = type(node)
    if t is _NAME:
        return node.value
    parts: list[str] = []
    while t is _ATTRIBUTE:
        parts.append(node.attr.value)
        node = node.value
        t = type(node)
    if t is _NAME:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


_NAME, _ATTRIBUTE = cst.Name, cst.Attribute


class ImportTable:
    """Cheap alias table built from the module's import statements (any nesting level).

    ``import torch.nn.functional as F``  → ``F`` ↦ ``torch.nn.functional``
    ``from torch.nn import functional as F`` → same
    ``from torch.nn.functional import scaled_dot_product_attention as sdpa`` →
    ``sdpa`` ↦ ``torch.nn.functional.scaled_dot_product_attention``
    ``import torch`` → ``torch`` ↦ ``torch``

    Relative imports are kept apart in ``relative`` (they name files of the linted tree, which
    only :mod:`attncheck.lint.project` resolves): ``from .utils import f as g`` → ``g`` ↦
    ``(1, "utils", "f")``, ``from .. import utils as U`` → ``U`` ↦ ``(2, "", "utils")``.
    """

    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        self.relative: dict[str, tuple[int, str, str]] = {}
        _ImportCollector(self.aliases, self.relative).collect(module)

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """Fully qualified name of a Name/Attribute chain through the aliases, else its dotted
        text (``self.proj`` stays ``self.proj``); ``None`` when not a name chain."""
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.aliases:
            full = self.aliases[head]
            return f"{full}.{rest}" if rest else full
        return name


class _ImportCollector:
    """Reads the import statements of a module, in libcst's visiting order (a later alias of a
    name replaces an earlier one); relative imports are kept apart in ``relative``."""

    def __init__(self, aliases: dict[str, str],
                 relative: dict[str, tuple[int, str, str]] | None = None) -> None:
        self.aliases = aliases
        self.relative = {} if relative is None else relative

    # Imports are statements: do not descend into expressions (a ~10x cheaper walk).
    _DESCEND = (cst.Module, cst.BaseCompoundStatement, cst.BaseSuite, cst.SimpleStatementLine,
                cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally)
    #: node type → whether the walk enters it (libcst's node classes are ABCs: an
    #: ``isinstance`` against them runs Python code, so it is asked once per type)
    _ENTERS: dict[type, bool] = {}
    #: node type → its fields in libcst's visiting order, as a tuple
    _GETTERS: dict[type, Any] = {}

    def collect(self, node: cst.CSTNode) -> None:
        """Record the imports under ``node`` (the read-only order of
        :func:`attncheck.lint.walk.visit`, entering statements only)."""
        t = type(node)
        if t is cst.Import:
            self.visit_Import(node)
        elif t is cst.ImportFrom:
            self.visit_ImportFrom(node)
        elif self._enters(t):
            self._collect_in(node)

    def _collect_in(self, node: cst.CSTNode) -> None:
        enters = self._ENTERS
        getters = self._GETTERS
        t = type(node)
        g = getters.get(t)
        if g is None:
            from attncheck.lint.attrs import tuple_getter
            from attncheck.lint.walk import fields_in_visit_order

            g = getters[t] = tuple_getter(fields_in_visit_order(t))
        for v in g(node):
            c = v.__class__
            for x in (v if c is tuple or c is list else (v,)):
                tx = type(x)
                if tx is cst.Import:
                    self.visit_Import(x)
                elif tx is cst.ImportFrom:
                    self.visit_ImportFrom(x)
                else:
                    e = enters.get(tx)
                    if e is None:
                        e = self._enters(tx)
                    if e:
                        self._collect_in(x)

    def _enters(self, t: type) -> bool:
        e = self._ENTERS.get(t)
        if e is None:
            e = self._ENTERS[t] = issubclass(t, self._DESCEND)
        return e

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self.aliases.setdefault(head, head)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        base = dotted_name(node.module) if node.module is not None else ""
        if base is None or (not node.relative and not base):
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            if node.relative:
                self.relative[local] = (len(node.relative), base, name)
            else:
                self.aliases[local] = f"{base}.{name}"


class FileContext:
    """What the rules see of one file.

    ``display_path`` is the path as reported; ``line_offset`` is added to every reported line
    (non-zero when the engine parses a region of a file rather than the whole file).
    Analyses are attributes computed on first use and shared by all rules.
    """

    def __init__(self, module: cst.Module, source: str, display_path: str,
                 line_offset: int = 0, settings: Any = None, project: Any = None,
                 path: str | None = None) -> None:
        self.module = module
        self.source = source
        self.display_path = display_path
        self.line_offset = line_offset
        self.settings = settings
        #: the linted files (:class:`attncheck.lint.project.Project`) and this file's real path:
        #: helpers imported from those files are followed (``None``: this file alone)
        self.project = project
        self.path = path

    def close(self) -> None:
        """Drop the analyses and the index.  They refer to each other in cycles (a method's
        :class:`~attncheck.lint.analysis.index.FunctionInfo` and its class), which only
        Python's cyclic garbage collector frees, after traversing them and the subtrees they
        hold; dropped here, the file's objects are freed as soon as the engine lets go of them."""
        index = self.__dict__.get("index")
        if index is not None:
            index.clear()
        self.__dict__.clear()

    @cached_property
    def _qualnames(self) -> dict[int, tuple[cst.BaseExpression, str | None]]:
        return {}

    @cached_property
    def imports(self) -> ImportTable:
        return ImportTable(self.module)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        """Resolve a callee / attribute through the import table (see :class:`ImportTable`);
        once per node (the analyses ask again at each run of a function)."""
        known = self._qualnames
        w = known.get(id(node))
        if w is None:
            w = known[id(node)] = (node, self.imports.resolve(node))  # the node keeps its id
        return w[1]

    def imported_function(self, func: cst.BaseExpression) -> Any:
        """The function of another linted file that the callee expression ``func`` (``f``,
        ``U.f``, ``pkg.utils.f``) names through this file's imports: ``(FileContext of that
        file, FunctionInfo)``, or ``None`` (not imported, outside the linted files, not a
        top-level function; always ``None`` without a :attr:`project`).  PyTorch and the
        callables of the op catalog (:mod:`attncheck.lint.analysis.ops`) keep their catalog
        meaning even when their source is among the linted files."""
        if self.project is None:
            return None
        q = self.qualname(func)
        if q is None or is_library_name(q):
            return None
        return _project.imported_function(self, func)

    @cached_property
    def index(self) -> Any:
        """Functions, classes and methods of the module (``attncheck.lint.analysis.index``)."""
        from attncheck.lint.analysis.index import ModuleIndex

        return ModuleIndex(self.module)

    @cached_property
    def provenance(self) -> Any:
        """Score-provenance analysis (``attncheck.lint.analysis.provenance``)."""
        from attncheck.lint.analysis import provenance

        return provenance.analyze(self)

    @cached_property
    def masks(self) -> Any:
        """Mask-algebra analysis (``attncheck.lint.analysis.masks``)."""
        from attncheck.lint.analysis import masks

        return masks.analyze(self)
