"""Syntax helpers shared by the analyses and the rules: literals, call arguments, node text.

Pure functions of libcst nodes; nothing here evaluates or imports the code being linted.
"""
from __future__ import annotations

from typing import Any

import libcst as cst


def arg_of(call: cst.Call, pos: int | None, kw: str | None) -> cst.Arg | None:
    """The argument of ``call`` at positional index ``pos`` or keyword ``kw``.

    ``None`` when absent, and for any position after a ``*args`` (its length is unknown)."""
    i = 0
    for a in call.args:
        if a.keyword is not None:
            if kw is not None and a.keyword.value == kw:
                return a
            continue
        if a.star:
            return None
        if pos is not None and i == pos:
            return a
        i += 1
    return None


def arg_value(call: cst.Call, pos: int | None, kw: str | None = None) -> cst.BaseExpression | None:
    """The expression of :func:`arg_of`."""
    a = arg_of(call, pos, kw)
    return a.value if a is not None else None


def kwarg(call: cst.Call, kw: str) -> cst.BaseExpression | None:
    """The expression passed as keyword ``kw`` to ``call``, or ``None``."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == kw:
            return a.value
    return None


# --------------------------------------------------------------------------- literals

def _int_literal(node: cst.Integer) -> int:
    """``node.evaluated_value`` without its ``ast.literal_eval`` (a parse per literal): base 0
    reads the text exactly as a Python literal (prefixes, ``_``).  Past CPython's limit on
    digits converted from text the error stays libcst's own."""
    if len(node.value) > 4000:
        return int(node.evaluated_value)
    return int(node.value, 0)


def int_of(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (``3``, ``-1``, ``0xFF``, ``1_000``), else ``None``."""
    if type(node) is cst.Integer:
        return _int_literal(node)
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        v = int_of(node.expression)
        return -v if v is not None else None
    return None


def num_of(node: cst.BaseExpression | None) -> float | None:
    """The value of a numeric literal with an optional sign (``-1e9``, ``+2``, ``0x10``)."""
    t = type(node)
    if t is cst.Integer or t is cst.Float:
        try:  # as :func:`int_of`; ``float()`` reads a float literal's text as Python does
            return float(_int_literal(node) if t is cst.Integer else node.value)
        except (ValueError, OverflowError):  # pragma: no cover - libcst parsed it
            return None
    if t is cst.UnaryOperation:
        v = num_of(node.expression)
        if v is None:
            return None
        if type(node.operator) is cst.Minus:
            return -v
        if type(node.operator) is cst.Plus:
            return v
    return None


# --------------------------------------------------------------------------- node text

_EMPTY = cst.Module([])


def source(node: cst.CSTNode) -> str:
    """The code of ``node`` with runs of whitespace collapsed (for messages)."""
    return " ".join(_EMPTY.code_for_node(node).split())


def short_code(node: cst.CSTNode) -> str:
    """A compact name for an expression: the dotted name of ``Name``/``Attribute`` chains,
    ``x[…]`` for a subscript, ``f(…)`` for a call, else its code."""
    from attncheck.lint.context import dotted_name

    if type(node) in (cst.Name, cst.Attribute):
        d = dotted_name(node)
        if d is not None:
            return d
    if type(node) is cst.Subscript:
        return short_code(node.value) + "[…]"
    if type(node) is cst.Call:
        return short_code(node.func) + "(…)"
    try:
        return _EMPTY.code_for_node(node)
    except Exception:  # pragma: no cover
        return "?"


# --------------------------------------------------------------------------- node walking

#: fields that only ever hold whitespace, punctuation or a marker string (never a ``Name`` or an
#: expression): brackets and braces, a slice's colons, an argument's or parameter's ``*``/``**``
SKIP_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "header", "footer",
    "trailing_whitespace", "lines_after_decorators", "equal", "dot", "colon", "operator",
    "first_line", "empty_lines", "asynchronous", "lbracket", "rbracket", "lbrace", "rbrace",
    "first_colon", "second_colon", "star", "relative", "posonly_ind", "separator",
    "trailing_comma",
})
#: per node type: a function returning the type's non-punctuation fields as a tuple
_GETTERS: dict[type, Any] = {}
#: ``issubclass(t, cst.CSTNode)`` per concrete type: libcst's classes are ABCs, whose
#: ``isinstance`` runs Python-level ``ABCMeta.__instancecheck__`` (slow on hot paths)
_NODE_TYPE: dict[type, bool] = {}


def fields_getter(t: type) -> Any:
    """A function returning, as a tuple, the fields of a ``t`` node that can hold expressions or
    statements (all but whitespace, parentheses, commas and operators), in field order."""
    g = _GETTERS.get(t)
    if g is None:
        from attncheck.lint.walk import field_getter

        g = field_getter(t, SKIP_FIELDS, _GETTERS)
    return g


def is_node_type(t: type) -> bool:
    """``issubclass(t, cst.CSTNode)``, cached per type."""
    r = _NODE_TYPE.get(t)
    if r is None:
        r = _NODE_TYPE[t] = issubclass(t, cst.CSTNode)
    return r


def child_nodes(n: cst.CSTNode) -> list[cst.CSTNode]:
    """Child nodes of ``n`` that can hold expressions or statements, read straight from the
    dataclass fields (libcst's ``children`` property re-visits the node on every read)."""
    node_type = _NODE_TYPE
    k = []
    for v in fields_getter(type(n))(n):
        tv = type(v)
        isn = node_type.get(tv)
        if isn is None:
            isn = is_node_type(tv)
        if isn:
            k.append(v)
        elif tv is tuple or tv is list or isinstance(v, (list, tuple)):
            for x in v:
                tx = type(x)
                isn = node_type.get(tx)
                if isn is None:
                    isn = is_node_type(tx)
                if isn:
                    k.append(x)
    return k


def mentions_name(node: cst.CSTNode, names: frozenset[str] | set[str]) -> bool:
    """Whether some ``Name`` in the subtree of ``node`` (an attribute's ``attr`` included) is
    one of ``names``."""
    name = cst.Name
    stack = [node]
    pop = stack.pop
    push = stack.extend
    while stack:
        n = pop()
        if type(n) is name:
            if n.value in names:
                return True
            continue
        push(child_nodes(n))
    return False


# --------------------------------------------------------------------------- einsum / einops

def parse_einsum(eq: str) -> tuple[list[str], str] | None:
    """``"bhid,bhjd->bhij"`` → (["bhid", "bhjd"], "bhij"); einops-style spaces allowed.

    Multi-letter einops axis names (``"b h i d, b h j d -> b h i j"``) are mapped to unique
    single characters; ``...`` becomes ``…``.  ``None`` without ``->``."""
    if "->" not in eq:
        return None
    lhs, rhs = eq.split("->", 1)
    ins = []
    for part in lhs.split(","):
        tok = part.replace(" ", "").replace("...", "…")
        ins.append(tok)
    out = rhs.replace(" ", "").replace("...", "…")
    # einops multi-letter names: only accept single-letter patterns (or space-separated single tokens)
    if " " in lhs.strip() or " " in rhs.strip():
        names_in = [p.split() for p in lhs.split(",")]
        names_out = rhs.split()
        if any(len(n) > 1 and n != "..." for grp in names_in for n in grp) or any(
                len(n) > 1 and n != "..." for n in names_out):
            # map multi-letter names to unique chars
            table: dict[str, str] = {}

            def ch(n: str) -> str:
                if n == "...":
                    return "…"
                if n not in table:
                    table[n] = chr(0x4E00 + len(table))
                return table[n]

            ins = ["".join(ch(n) for n in grp) for grp in names_in]
            out = "".join(ch(n) for n in names_out)
    return ins, out


#: nested scopes :meth:`NodeCache.walk` does not enter (leaf classes: exact type tests are exact)
_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
#: node classes whose :func:`child_nodes` is always empty (their only kept field is a ``str``)
_LEAVES = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
                     cst.Ellipsis, cst.Pass, cst.Break, cst.Continue})


class NodeCache:
    """Walks of one tree, each computed once: owned by one analysis run and dropped with it.

    Keyed by ``id(node)``; each entry keeps its node alive, so an id is never reused while the
    cache lives."""

    __slots__ = ("_idents", "_kids", "_names", "_ops", "_walks")

    def __init__(self) -> None:
        self._kids: dict[int, list[cst.CSTNode]] = {}
        self._walks: dict[int, tuple[cst.CSTNode, list[cst.CSTNode]]] = {}
        self._ops: dict[int, tuple[cst.CSTNode, list[cst.CSTNode]]] = {}
        self._names: dict[int, tuple[cst.CSTNode, set[str]]] = {}
        self._idents: dict[int, tuple[cst.CSTNode, set[str], list]] = {}

    def children(self, n: cst.CSTNode) -> list[cst.CSTNode]:
        """:func:`child_nodes` of ``n``."""
        k = self._kids.get(id(n))
        if k is None:
            k = self._kids[id(n)] = child_nodes(n)
        return k

    def walk(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """Every node under ``node`` (pre-order, ``node`` first) without descending into nested
        functions, classes or lambdas."""
        w = self._walks.get(id(node))
        if w is not None:
            return w[1]
        out = scope_nodes(node)
        self._walks[id(node)] = (node, out)
        return out

    def ops(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The calls and binary operations of :meth:`walk` (in its order)."""
        w = self._ops.get(id(node))
        if w is not None:
            return w[1]
        call, binop = cst.Call, cst.BinaryOperation
        out = [n for n in self.walk(node) if type(n) is call or type(n) is binop]
        self._ops[id(node)] = (node, out)
        return out

    def names(self, node: cst.CSTNode) -> set[str]:
        """Names read in :meth:`walk` of ``node``: every ``Name`` and every ``self.x…`` chain."""
        from attncheck.lint.context import dotted_name

        w = self._names.get(id(node))
        if w is not None:
            return w[1]
        out = set()
        name, attribute = cst.Name, cst.Attribute
        for n in self.walk(node):
            t = type(n)
            if t is name:
                out.add(n.value)
            elif t is attribute:
                d = dotted_name(n)
                if d is not None and d.startswith("self."):
                    out.add(d)
        self._names[id(node)] = (node, out)
        return out

    def identifiers(self, node: cst.CSTNode) -> set[str]:
        """The ``Name`` values of :meth:`walk` of ``node``, without building (or caching) it,
        and ``"lambda"`` (a keyword: never a name) when it skips a lambda.  Memoised per node."""
        return self._identifiers(node)[1]

    def defs(self, node: cst.CSTNode) -> list[cst.FunctionDef]:
        """The ``def`` statements :meth:`identifiers` of ``node`` skips (functions defined
        directly in it, in :func:`identifiers`' order).  Memoised per node."""
        return self._identifiers(node)[2]

    def _identifiers(self, node: cst.CSTNode) -> tuple[cst.CSTNode, set[str], list]:
        w = self._idents.get(id(node))
        if w is None:
            defs: list[cst.FunctionDef] = []
            w = self._idents[id(node)] = (node, identifiers(node, defs), defs)
        return w


class _IdentifierGetters(dict):
    """Node class → a function returning the fields :func:`child_nodes` reads (a tuple); a
    ``tuple`` or ``list`` → itself (its items are walked); ``None`` for a class whose value holds
    no identifier to walk (``str``, ``None``, libcst's sentinels, leaves) or a nested scope."""

    def __missing__(self, t: type) -> Any:
        if t is tuple or t is list:
            g: Any = _same
        elif t in _SCOPES or t in _LEAVES or not is_node_type(t):
            g = None
        else:
            g = fields_getter(t)
        self[t] = g
        return g


def _same(v: Any) -> Any:
    return v


_IDENT_GETTERS = _IdentifierGetters()


def identifiers(node: cst.CSTNode, defs: list | None = None) -> set[str]:
    """The ``Name`` values in the subtree of ``node`` without entering nested functions, classes
    or lambdas, and ``"lambda"`` when a lambda is skipped (:meth:`NodeCache.identifiers`).  One
    dispatch per value: each node's fields are pushed as they are, and ``None``, strings and
    punctuation fall out on the getter look-up.  ``defs``, when given, receives the
    ``FunctionDef`` nodes skipped (in the order met: the last statement's first)."""
    out: set[str] = set()
    add = out.add
    getters = _IDENT_GETTERS
    name = cst.Name
    lam = cst.Lambda
    fdef = cst.FunctionDef if defs is not None else None
    t = node.__class__
    if t is name:
        return {node.value}
    stack = list(fields_getter(t)(node))  # ``node`` itself is entered even when a scope
    pop = stack.pop
    extend = stack.extend
    while stack:
        n = pop()
        t = n.__class__
        if t is name:
            add(n.value)
            continue
        g = getters[t]
        if g is not None:
            extend(g(n))
        elif t is lam:
            add("lambda")
        elif t is fdef:
            defs.append(n)
    return out


class _ScopeKinds(dict):
    """Node class → how :func:`scope_nodes` treats a value of it: ``None`` (not a node: ``str``,
    ``None``, libcst's sentinels; or a nested scope, not entered, unless ``nested``),
    :data:`_LEAF` (kept, nothing to enter), else the class's :func:`fields_getter`; ``tuple``
    and ``list`` → ``list``."""

    def __init__(self, nested: bool) -> None:
        super().__init__()
        self.scopes = frozenset() if nested else _SCOPES

    def __missing__(self, t: type) -> Any:
        if t is tuple or t is list:
            k: Any = list
        elif t in self.scopes or not is_node_type(t):
            k = None
        elif t in _LEAVES:
            k = _LEAF
        else:
            k = fields_getter(t)
        self[t] = k
        return k


_SCOPE_KINDS = _ScopeKinds(nested=False)
_ALL_KINDS = _ScopeKinds(nested=True)
_LEAF = ()


def scope_nodes(node: cst.CSTNode, nested: bool = False) -> list[cst.CSTNode]:
    """Every node under ``node`` in pre-order (``node`` first; each node's :func:`child_nodes`
    in order) without entering nested functions, classes or lambdas (``node`` itself is entered
    when it is one), or with them when ``nested``.  Fields are pushed as they are and expanded
    when popped, so no child list is built per node."""
    out: list[cst.CSTNode] = [node]
    t = node.__class__
    if t in _LEAVES:
        return out
    add = out.append
    kinds = _ALL_KINDS if nested else _SCOPE_KINDS
    seq = list
    leaf = _LEAF
    stack = list(fields_getter(t)(node))
    stack.reverse()
    pop = stack.pop
    extend = stack.extend
    while stack:
        n = pop()
        k = kinds[n.__class__]
        if k is None:
            continue
        if k is seq:
            extend(n[::-1])
        elif k is leaf:
            add(n)
        else:
            add(n)
            extend(k(n)[::-1])
    return out
