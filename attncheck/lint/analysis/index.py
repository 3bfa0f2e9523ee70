"""The index of one module's definitions that the analyses resolve calls against.

Top-level functions, classes (with their same-file bases and methods) and the functions nested in
them, each with a qualified name (``f``, ``Attention.forward``, ``Attention.forward.helper``).
Built once per file (:attr:`FileContext.index`) and shared by the analyses; it holds no analysis
state.  Only definitions at module level count (as Python binds them when the module runs); a
``def`` under ``if`` / ``try`` at module level is not indexed.  Import aliases are the
:class:`~attncheck.lint.context.ImportTable`'s.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from attncheck.lint.analysis.syntax import identifiers
from attncheck.lint.context import dotted_name


class FunctionInfo:
    """A ``def``: its node, the class it is a method of (``None`` for a function), its qualified
    name and the names of its positional parameters (``self`` included)."""

    __slots__ = ("cls", "node", "params", "qual")

    def __init__(self, node: cst.FunctionDef, cls: ClassInfo | None, qual: str) -> None:
        self.node = node
        self.cls = cls
        self.qual = qual
        params = node.params
        self.params = [p.name.value for p in (*params.posonly_params, *params.params)]

    @property
    def name(self) -> str:
        return self.node.name.value

    def call_params(self) -> list[str]:
        """The parameters a call's arguments bind to: a method's ``self`` is not passed."""
        return self.params[1:] if self.cls is not None and self.params[:1] == ["self"] else self.params

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"FunctionInfo({self.qual})"


class ClassInfo:
    """A ``class``: its node, name, base names (dotted, ``None`` for other expressions) and methods."""

    __slots__ = ("bases", "methods", "name", "node")

    def __init__(self, node: cst.ClassDef) -> None:
        self.node = node
        self.name = node.name.value
        self.bases = [dotted_name(b.value) for b in node.bases]
        self.methods: dict[str, FunctionInfo] = {}

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"ClassInfo({self.name})"


class ModuleIndex:
    """Definitions of one module.

    ``functions``: top-level functions by name; ``classes``: top-level classes by name;
    ``defs``: every top-level function and method, in source order; ``aliases``: names the
    module binds once, at top level, to another name or a dotted name (``split = utils.split``)
    or to a ``lambda`` (run like a function of the file), with that expression.
    """

    #: how many same-file base classes a method or attribute look-up follows
    MAX_BASES = 5

    def __init__(self, module: cst.Module) -> None:
        self.functions: dict[str, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.defs: list[FunctionInfo] = []
        self.aliases: dict[str, cst.BaseExpression] = {}
        bound: set[str] = set()
        for stmt in module.body:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is not cst.Assign:
                        continue
                    for t in small.targets:
                        if type(t.target) is not cst.Name:
                            continue
                        name = t.target.value
                        if name in bound:
                            self.aliases.pop(name, None)  # bound twice: not an alias
                        elif len(small.targets) == 1 and (dotted_name(small.value) is not None
                                                          or type(small.value) is cst.Lambda):
                            self.aliases[name] = small.value  # ``split = utils.split``, a lambda
                        bound.add(name)
            if type(stmt) is cst.FunctionDef:
                f = FunctionInfo(stmt, None, stmt.name.value)
                self.functions[f.name] = f
                self.defs.append(f)
            elif type(stmt) is cst.ClassDef:
                c = ClassInfo(stmt)
                self.classes[c.name] = c
                for s in stmt.body.body:
                    if type(s) is cst.FunctionDef:
                        f = FunctionInfo(s, c, f"{c.name}.{s.name.value}")
                        c.methods[f.name] = f
                        self.defs.append(f)

    def clear(self) -> None:
        """Forget every definition, breaking the method ↔ class reference cycles (those of a
        class that a later one of the same name shadows in :attr:`classes` too)."""
        for f in self.defs:
            if f.cls is not None:
                f.cls.methods.clear()
        self.functions.clear()
        self.classes.clear()
        self.defs.clear()

    def bases_of(self, cls: ClassInfo) -> list[ClassInfo]:
        """The same-file base classes of ``cls``, in declaration order."""
        return [self.classes[b] for b in cls.bases if b in self.classes]

    def method(self, cls: ClassInfo | None, name: str, depth: int = 0) -> FunctionInfo | None:
        """``name`` looked up on ``cls`` and then its same-file bases (depth first, as Python's
        MRO for single inheritance); ``None`` when not defined in this file."""
        if cls is None or depth > self.MAX_BASES:
            return None
        if name in cls.methods:
            return cls.methods[name]
        for b in self.bases_of(cls):
            m = self.method(b, name, depth + 1)
            if m is not None:
                return m
        return None

    def lineage(self, cls: ClassInfo | None) -> list[str]:
        """Names of ``cls`` and all its same-file ancestors (each once)."""
        out: list[str] = []
        stack = [cls] if cls is not None else []
        while stack:
            k = stack.pop()
            if k.name not in out:
                out.append(k.name)
                stack.extend(self.bases_of(k))
        return out

    @staticmethod
    def nested(f: FunctionInfo, defs_in: Callable[[cst.CSTNode], list] | None = None
               ) -> Iterator[FunctionInfo]:
        """Functions defined inside ``f`` (at any depth, not inside a nested class or lambda),
        qualified ``f.qual + "." + name`` and attached to ``f``'s class; each one followed by
        those defined inside it.  ``defs_in``: the ``def`` statements directly in a function
        body (default: read by :func:`~attncheck.lint.analysis.syntax.identifiers`; the mask
        analysis passes its memoised walk, which it needs for the body's names anyway)."""
        return _nested_in(f.node, f, _defs_in if defs_in is None else defs_in)


def _nested_in(fn: cst.FunctionDef, outer: FunctionInfo,
               defs_in: Callable[[cst.CSTNode], list]) -> Iterator[FunctionInfo]:
    # a module-level generator, not a closure that calls itself: such a closure holds its own
    # cell, a reference cycle that would keep ``outer``'s tree for the cyclic collector to free
    for n in defs_in(fn.body):
        yield FunctionInfo(n, outer.cls, f"{outer.qual}.{n.name.value}")
        yield from _nested_in(n, outer, defs_in)


def _defs_in(body: cst.CSTNode) -> list[cst.FunctionDef]:
    defs: list[cst.FunctionDef] = []
    identifiers(body, defs)
    return defs
