"""Per-file context shared by all rules: the parsed module, import aliases, lazy analyses.

Nothing here imports or executes the code being linted.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any

import libcst as cst


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else ``None`` (calls, subscripts, ...)."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


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
        from attncheck.lint.walk import visit  # read-only: libcst's visit rebuilds the tree

        visit(module, _ImportCollector(self.aliases, self.relative))

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


class _ImportCollector(cst.CSTVisitor):
    def __init__(self, aliases: dict[str, str],
                 relative: dict[str, tuple[int, str, str]] | None = None) -> None:
        self.aliases = aliases
        self.relative = {} if relative is None else relative

    # Imports are statements: do not descend into expressions (a ~10x cheaper walk).
    _DESCEND = (cst.Module, cst.BaseCompoundStatement, cst.BaseSuite, cst.SimpleStatementLine,
                cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.Import, cst.ImportFrom)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, self._DESCEND):
            return False
        return super().on_visit(node)

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

    @cached_property
    def imports(self) -> ImportTable:
        return ImportTable(self.module)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        """Resolve a callee / attribute through the import table (see :class:`ImportTable`)."""
        return self.imports.resolve(node)

    def imported_function(self, func: cst.BaseExpression) -> Any:
        """The function of another linted file that the callee expression ``func`` (``f``,
        ``U.f``, ``pkg.utils.f``) names through this file's imports: ``(FileContext of that
        file, FunctionInfo)``, or ``None`` (not imported, outside the linted files, not a
        top-level function; always ``None`` without a :attr:`project`).  PyTorch and the
        callables of the op catalog (:mod:`attncheck.lint.analysis.ops`) keep their catalog
        meaning even when their source is among the linted files."""
        if self.project is None:
            return None
        from attncheck.lint.analysis import ops
        from attncheck.lint.project import imported_function

        q = self.qualname(func)
        if q is None or q.partition(".")[0] == "torch" or q in ops.FUNCTIONS or q in ops.MODULES:
            return None
        return imported_function(self, func)

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
