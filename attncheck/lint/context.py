"""Per-file context shared by all rules: the parsed module, import aliases, lazy analyses.

Nothing here imports or executes the code being linted.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any

import libcst as cst


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
    """

    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        _ImportCollector(self.aliases).collect(module)

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
    name replaces an earlier one)."""

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases

    # Imports are statements: do not descend into expressions (a ~10x cheaper walk).
    _DESCEND = (cst.Module, cst.BaseCompoundStatement, cst.BaseSuite, cst.SimpleStatementLine,
                cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally)
    #: node type → whether the walk enters it (libcst's node classes are ABCs: an
    #: ``isinstance`` against them runs Python code, so it is asked once per type)
    _ENTERS: dict[type, bool] = {}

    def collect(self, node: cst.CSTNode) -> None:
        """Record the imports under ``node`` (the read-only order of
        :func:`attncheck.lint.walk.visit`, entering statements only)."""
        from attncheck.lint.walk import fields_in_visit_order

        enters = self._ENTERS
        t = type(node)
        if t is cst.Import:
            self.visit_Import(node)
            return
        if t is cst.ImportFrom:
            self.visit_ImportFrom(node)
            return
        e = enters.get(t)
        if e is None:
            e = enters[t] = issubclass(t, self._DESCEND)
        if not e:
            return
        collect = self.collect
        for name in fields_in_visit_order(t):
            v = getattr(node, name)
            c = v.__class__
            if c is tuple or c is list:
                for x in v:
                    collect(x)
            elif v is not None and hasattr(c, "_visit_and_replace_children"):
                collect(v)

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
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        base = dotted_name(node.module)
        if base is None:
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{base}.{name}"


class FileContext:
    """What the rules see of one file.

    ``display_path`` is the path as reported; ``line_offset`` is added to every reported line
    (non-zero when the engine parses a region of a file rather than the whole file).
    Analyses are attributes computed on first use and shared by all rules.
    """

    def __init__(self, module: cst.Module, source: str, display_path: str,
                 line_offset: int = 0, settings: Any = None) -> None:
        self.module = module
        self.source = source
        self.display_path = display_path
        self.line_offset = line_offset
        self.settings = settings

    @cached_property
    def imports(self) -> ImportTable:
        return ImportTable(self.module)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        """Resolve a callee / attribute through the import table (see :class:`ImportTable`)."""
        return self.imports.resolve(node)

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
