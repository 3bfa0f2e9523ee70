"""A read-only traversal of a libcst tree that calls the rules' ``visit_*``/``leave_*`` methods.

libcst's own ``Module.visit`` rebuilds every node while it walks (each node's
``_visit_and_replace_children`` constructs and validates a copy), which costs more than the parse
itself.  Rules only read the tree, so the engine walks it instead: each node type's children are
visited in the order its ``_visit_and_replace_children`` lists them (read once per type from
libcst's source, so the order follows the installed libcst), skipping fields that only hold
whitespace and punctuation.  The nodes handed to the rules are the parsed ones, so metadata
(positions) keyed by node identity is unchanged.

:func:`supports` says whether a set of visitor methods can run on this walker: attribute
visitors (``visit_FunctionDef_body``) and visitors of the skipped whitespace/punctuation node types
need libcst's visit.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from typing import Any

import libcst as cst

from attncheck.lint.attrs import tuple_getter

_FIELD = re.compile(r"visit_\w+\(\s*self,\s*\"(\w+)\"")

#: fields that hold only whitespace, comments or punctuation (never a rule's subject)
_SKIP_FIELDS = frozenset({
    "leading_lines", "lines_after_decorators", "header", "footer", "lpar", "rpar", "lbracket",
    "rbracket", "lbrace", "rbrace", "comma", "semicolon", "dot", "equal", "colon", "newline",
    "trailing_whitespace", "asynchronous", "operator", "star_tok", "walrus", "arrow",
})
#: node types only found in skipped fields: visitors of these need libcst's own traversal
_SKIPPED_TYPES = frozenset({
    "EmptyLine", "TrailingWhitespace", "Newline", "Comment", "SimpleWhitespace",
    "ParenthesizedWhitespace", "LeftParen", "RightParen", "LeftSquareBracket",
    "RightSquareBracket", "LeftCurlyBrace", "RightCurlyBrace", "Comma", "Semicolon", "Dot",
    "AssignEqual", "Colon", "Asynchronous",
    # operators
    "Add", "Subtract", "Multiply", "Divide", "FloorDivide", "Modulo", "Power", "MatrixMultiply",
    "LeftShift", "RightShift", "BitAnd", "BitOr", "BitXor", "And", "Or", "Not", "Minus", "Plus",
    "BitInvert", "Equal", "NotEqual", "LessThan", "LessThanEqual", "GreaterThan",
    "GreaterThanEqual", "In", "NotIn", "Is", "IsNot", "AddAssign", "SubtractAssign",
    "MultiplyAssign", "DivideAssign", "FloorDivideAssign", "ModuloAssign", "PowerAssign",
    "MatrixMultiplyAssign", "LeftShiftAssign", "RightShiftAssign", "BitAndAssign",
    "BitOrAssign", "BitXorAssign", "Arrow", "ImportStar",
})

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(tp: type) -> tuple[str, ...]:
    f = _FIELDS.get(tp)
    if f is None:
        src = inspect.getsource(tp._visit_and_replace_children)
        names = []
        for n in _FIELD.findall(src):
            if n not in _SKIP_FIELDS and "whitespace" not in n and n not in names:
                names.append(n)
        f = _FIELDS[tp] = tuple(names)
    return f


def fields_in_visit_order(tp: type) -> tuple[str, ...]:
    """The fields of node type ``tp`` that can hold nodes other than whitespace and
    punctuation, in the order libcst's traversal visits them."""
    return _fields(tp)


def supports(method_names) -> bool:
    """Whether visitor methods with these names can run on :class:`Walker`."""
    for name in method_names:
        kind, _, rest = name.partition("_")
        if kind not in ("visit", "leave") or "_" in rest or rest in _SKIPPED_TYPES:
            return False
    return True


#: :meth:`Walker._plan_of` for a class that is no node (``str``, ``None``, libcst's sentinels)
#: or a node class with no visitor and no field to enter (``Name``, ``Integer`` …): not walked
_INERT = ()
#: node class → a function returning its :func:`_fields` as a tuple
_GETTERS: dict[type, Callable[[Any], tuple]] = {}


class Walker:
    """Calls ``methods["visit_<Type>"]`` before and ``methods["leave_<Type>"]`` after each node's
    children (libcst's batched-visitor protocol, without rebuilding the tree).  Nodes whose id is
    in ``skip`` (elements of a sequence field, e.g. top-level statements) are not entered.  A
    node with no visitor and nothing to enter is passed over without a call."""

    def __init__(self, methods: dict[str, list[Callable]], skip: set[int] | None = None) -> None:
        self.methods = methods
        self.skip = skip or set()
        self._plan: dict[type, tuple] = {}

    def _plan_of(self, tp: type) -> tuple:
        if not hasattr(tp, "_visit_and_replace_children"):
            plan: tuple = _INERT
        else:
            name = tp.__name__
            visits = tuple(self.methods.get("visit_" + name, ()))
            leaves = tuple(self.methods.get("leave_" + name, ()))
            fields = _fields(tp)
            getter = _GETTERS.get(tp)
            if getter is None:
                getter = _GETTERS[tp] = tuple_getter(fields)
            plan = (visits, leaves, getter) if visits or leaves or fields else _INERT
        self._plan[tp] = plan
        return plan

    def walk(self, node: cst.CSTNode) -> None:
        plan = self._plan.get(node.__class__)
        if plan is None:
            plan = self._plan_of(node.__class__)
        if plan is not _INERT:
            self._walk(node, plan)

    def _walk(self, node: cst.CSTNode, plan: tuple) -> None:
        visits, leaves, getter = plan
        for f in visits:
            f(node)
        walk = self._walk
        plans = self._plan
        skip = self.skip
        for v in getter(node):
            c = v.__class__
            if c is tuple or c is list:
                for x in v:
                    if skip and id(x) in skip:
                        continue
                    p = plans.get(x.__class__)
                    if p is None:
                        p = self._plan_of(x.__class__)
                    if p is not _INERT:
                        walk(x, p)
            else:
                p = plans.get(c)
                if p is None:
                    p = self._plan_of(c)
                if p is not _INERT:
                    walk(v, p)
        for f in leaves:
            f(node)


def visit(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only ``CSTVisitor``, without rebuilding the tree: the
    visitor's ``on_visit`` (``visit_<Type>``; returning ``False`` skips the children) and
    ``on_leave`` run on the same nodes in the same order (whitespace and punctuation skipped, see
    :data:`_SKIP_FIELDS`; attribute visitors are not called)."""
    if visitor.on_visit(node):
        for name in _fields(node.__class__):
            v = getattr(node, name)
            c = v.__class__
            if c is tuple or c is list:
                for x in v:
                    visit(x, visitor)
            elif v is not None and hasattr(c, "_visit_and_replace_children"):
                visit(v, visitor)
    visitor.on_leave(node)


def field_getter(t: type, skip: frozenset[str], cache: dict[type, Any]) -> Any:
    """A function returning, as a tuple and in dataclass field order, the fields of a ``t`` node
    other than ``skip`` and whitespace (``operator.attrgetter``: far cheaper than ``getattr``
    in a loop); cached in ``cache`` per type."""
    g = cache.get(t)
    if g is None:
        g = cache[t] = tuple_getter(tuple(f.name for f in dataclasses.fields(t)
                                          if f.name not in skip and not f.name.startswith("whitespace")))
    return g
