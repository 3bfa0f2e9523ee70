"""The statement executor the static analyses share: frames, one join, one loop policy, one inliner.

Score provenance (:mod:`attncheck.lint.analysis.provenance`) and the mask algebra
(:mod:`attncheck.lint.analysis.masks`) are abstract interpreters over function bodies; neither
imports nor runs the linted code.  What they share is here:

* :class:`Frame` runs one function body statement by statement over an environment (name →
  abstract value).  ``if``/``elif``/``else`` run each branch on a copy of the state and **join**
  the results (:meth:`Frame.join_states`, the one join); ``for``/``while`` run the body once on a
  copy and join it with the state before the loop (the body may run zero times — the one loop
  policy); ``with`` and ``try`` run their blocks in order; ``return`` joins the returned values.
* A *domain* is a subclass of :class:`Frame`: it gives the value lattice (:attr:`Frame.UNKNOWN`,
  :meth:`Frame.join`, what a name bound on one path only becomes, :meth:`Frame.join_absent`) and
  the transfer functions (:meth:`Frame.eval` for expressions, :meth:`Frame.assign` for targets,
  hooks for augmented assignment, expression statements and the expressions a statement reads).
* Calls are resolved **by value** (:class:`FuncRef`): a name bound to a local ``def`` or
  ``lambda``, a function passed as an argument, a method reached through ``self``, a
  ``functools.partial`` of any of these.  Names that no local binds resolve through
  :meth:`Interpreter.lookup_function`, the one place that consults the module index.
* Sequences are domain-independent: a tuple or list of known length is a :class:`Tup` of the
  domain's values, any number of like values (the parts of a split, a ``map`` over them) a
  :class:`Many`.  ``map``, ``zip``, comprehensions / generator expressions, starred arguments
  and starred unpacking are computed over them here (:meth:`Frame.map_values`,
  :func:`zip_values`, :meth:`Frame.eval_comp`, :func:`positional_values`, :func:`unpack`),
  calling a function value through the domain's :meth:`Frame.call_value`.
* A resolved helper is *inlined* at its call site: its body runs in a new frame with the caller's
  argument values bound to its parameters, at most :data:`MAX_INLINE_DEPTH` calls deep (and never
  into a function already being run: recursion is unknown).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import libcst as cst


def replace(obj: Any, /, **changes: Any) -> Any:
    """``dataclasses.replace(obj, **changes)`` for the analyses' value classes (``Tensor`` has
    thirty fields; the standard one builds the keyword arguments and runs ``__init__``, which sets
    each field of a frozen class through ``object.__setattr__``): a copy of the instance
    dictionary with ``changes`` applied, for a dataclass whose ``__init__`` only stores its
    fields (no ``__post_init__``, ``InitVar``, ``init=False`` field, ``__slots__`` or cached
    property); ``dataclasses.replace`` for any other class."""
    cls = obj.__class__
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = _stores_fields_only(cls)
    if not plain:
        return dataclasses.replace(obj, **changes)
    new = object.__new__(cls)
    d = new.__dict__
    d.update(obj.__dict__)
    d.update(changes)
    return new


_PLAIN: dict[type, bool] = {}


def _stores_fields_only(cls: type) -> bool:
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__") \
            or any("__slots__" in vars(k) for k in cls.__mro__[:-1]):
        return False
    if any(isinstance(v, cached_property) for k in cls.__mro__ for v in vars(k).values()):
        return False
    every = cls.__dataclass_fields__.values()
    return len(dataclasses.fields(cls)) == len(every) and all(f.init for f in every)


#: how many nested helper calls are inlined below the analysed function (``a(b(c(x)))``); a
#: deeper call's value is unknown
MAX_INLINE_DEPTH = 3


@dataclass(frozen=True)
class FuncRef:
    """A callable resolved by value.

    ``name``: the function's name (``"<lambda>"`` for a lambda); ``fn``: its ``FunctionDef`` or
    ``Lambda`` node; ``bound_self``: the receiver of a method reached through ``self`` (the
    domain's value for the instance); ``closure``: for a local ``def`` / ``lambda``, the
    environment of the frame that defined it (looked up when called: Python closures bind late);
    ``args`` / ``kwargs``: arguments bound ahead of the call's by ``functools.partial``;
    ``owner``: the :class:`Interpreter` of the file that defines the function (``None``: the
    file being analysed)."""

    name: str
    bound_self: Any = None
    fn: Any = field(default=None, compare=False, repr=False)
    closure: Any = field(default=None, compare=False, repr=False)
    args: tuple = field(default=(), compare=False, repr=False)
    kwargs: tuple = field(default=(), compare=False, repr=False)
    owner: Any = field(default=None, repr=False)

    def partial(self, args: list, kwargs: dict) -> FuncRef:
        """``functools.partial(self, *args, **kwargs)``."""
        return replace(self, args=self.args + tuple(args), kwargs=self.kwargs + tuple(kwargs.items()))

    def call_args(self, pos: list, kw: dict) -> tuple[list, dict]:
        """The positional and keyword arguments a call with ``pos`` / ``kw`` passes, partial
        arguments first."""
        if not self.args and not self.kwargs:
            return pos, kw
        return list(self.args) + list(pos), {**dict(self.kwargs), **kw}


@dataclass(frozen=True)
class Tup:
    """A tuple or list of known length: ``items`` are the domain's values; ``star_unknown``:
    it holds a part of unknown length (``(*xs, y)`` with ``xs`` unknown), so positions are not
    known."""

    items: tuple
    star_unknown: bool = False


@dataclass(frozen=True)
class Many:
    """Any number of like values, each ``t`` (the parts of ``split`` / ``chunk`` / ``unbind``, a
    ``map`` or a generator expression over them)."""

    t: Any


def positional_values(node: cst.Call, args: list) -> list:
    """The positional argument values of a call (``args``: the value of each argument): a
    starred tuple of known length (``f(*qkv)`` with ``qkv = (q, k, v)``) spreads its items; any
    other starred argument leaves the positions after it unknown, so they are dropped."""
    pos: list = []
    for a, v in zip(node.args, args):
        if a.keyword is not None or a.star == "**":
            continue
        if a.star:
            if not isinstance(v, Tup) or v.star_unknown:
                break
            pos.extend(v.items)
        else:
            pos.append(v)
    return pos


def keyword_values(node: cst.Call, args: list) -> dict:
    """The keyword argument values of a call, by name (``args`` as for :func:`positional_values`)."""
    return {a.keyword.value: v for a, v in zip(node.args, args) if a.keyword is not None}


def zip_values(seqs: list, unknown: Any) -> Any:
    """``zip(a, b, ...)``: tuples of known length pair item by item (to the shortest); like values
    (:class:`Many`) give like tuples; anything else is ``unknown``."""
    if all(isinstance(p, Tup) and not p.star_unknown for p in seqs):
        return Tup(tuple(Tup(items) for items in zip(*(p.items for p in seqs))))
    if all(isinstance(p, (Tup, Many)) for p in seqs):
        return Many(Tup(tuple(p.t if isinstance(p, Many) else unknown for p in seqs)))
    return unknown


def unpack(elts: list, v: Any, unknown: Any) -> list:
    """The values ``a, *b, c = v`` binds to each of the target elements ``elts`` (``Element``
    nodes; at most one ``StarredElement``): from a :class:`Tup` of known length, names before the
    star take leading items, names after it trailing ones and the starred name a :class:`Tup` of
    what is left; from :class:`Many`, its value for each plain name; else ``unknown``."""
    stars = [i for i, e in enumerate(elts) if type(e) is cst.StarredElement]
    n = len(elts)
    if len(stars) > 1:
        return [unknown] * n
    if isinstance(v, Many):
        return [v.t if type(e) is not cst.StarredElement else Many(v.t) for e in elts]
    if not isinstance(v, Tup) or v.star_unknown:
        return [unknown] * n
    items = v.items
    if not stars:
        return list(items) if len(items) == n else [unknown] * n
    i0 = stars[0]
    n_after = n - i0 - 1
    if len(items) < n - 1:
        return [unknown] * n
    return [*items[:i0], Tup(items[i0:len(items) - n_after]), *items[len(items) - n_after:]]


#: ``functools.partial`` (and ``partial`` imported from it)
PARTIAL = frozenset({"functools.partial"})

_MISSING = object()  # a name not bound on one path of a join
_NO_RETURN = object()  # no ``return`` statement ran


class Interpreter:
    """The per-file part of an analysis: the module index, the inlining stack and depth limit.

    A domain subclasses it (provenance's ``Analyzer``, the mask algebra's ``_Analyzer``) and
    gives frames their domain (:meth:`new_frame`)."""

    def __init__(self, ctx: Any, loading: set[str] | None = None) -> None:
        self.ctx = ctx
        self.index = ctx.index
        #: functions being run (by node identity), innermost last: never inlined again
        self.stack: list[Any] = []
        #: analyzers of the other linted files whose functions this one runs, by file
        self.imported_from: dict[str, Interpreter] = {}
        #: files whose analyzer is being built along this chain of imports (module-level code
        #: of files importing each other), shared with the analyzers built for them
        self.loading: set[str] = set() if loading is None else loading
        #: :meth:`function_value` of a name no local binds, by name
        self._free_names: dict[str, FuncRef | None] = {}

    # ---- call resolution: the one place a called name meets the module index
    def lookup_function(self, name: str, cls: Any = None) -> Any:
        """The ``FunctionInfo`` a name no local binds calls: a method of ``cls`` (or its bases)
        for ``self.name``, else a top-level function of this file; ``None`` when not defined
        here."""
        if cls is not None:
            return self.index.method(cls, name)
        return self.index.functions.get(name)

    def imported(self, func: cst.BaseExpression, env: dict) -> tuple[Interpreter, Any] | None:
        """The function of another linted file that the callee ``func`` names through an import
        (:meth:`FileContext.imported_function`), with the analyzer of that file (same domain;
        its names resolve through its own imports): ``(analyzer, FunctionInfo)``. ``None``
        otherwise, and when a local name or a same-file function shadows the import."""
        head = func
        while type(head) is cst.Attribute:
            head = head.value
        if type(head) is not cst.Name or head.value in env or head.value in self.index.functions:
            return None
        imports = self.ctx.imports
        if head.value not in imports.aliases and head.value not in imports.relative:
            return None
        found = self.ctx.imported_function(func)
        if found is None:
            return None
        callee, f = found
        an = self.imported_from.get(callee.path)
        if an is None or an.ctx is not callee:
            if callee.path in self.loading:  # module-level code of files importing each other
                return None
            self.loading.add(callee.path)
            try:
                an = self.imported_from[callee.path] = type(self)(callee, self.loading)
            finally:
                self.loading.discard(callee.path)
            self.adopt_imported(an)
        return an, f

    def function_value(self, node: cst.Name | cst.Attribute, env: dict, depth: int = 0) -> FuncRef | None:
        """The function a name that no local binds (not in ``env``) refers to, as a value
        (``f = helper``, ``apply(helper, x)``, ``map(helper, xs)``): a top-level function of this
        file, else a top-level function of another linted file imported here (:meth:`imported`:
        ``helper`` from ``from .utils import helper``, or ``utils.helper`` of an imported module),
        else what a module-level alias (``split = utils.split_heads``) names; ``None`` for
        anything else.  A plain name's answer depends on the name alone (the module index, the
        imports, the aliases): it is kept per name, except while another file's analyzer is
        being built (:attr:`loading`: an import cycle answers ``None`` until it is) and for a
        function of another file (:meth:`imported` picks that file's analyzer at each call)."""
        if depth == 0 and type(node) is cst.Name and node.value not in env:
            known = self._free_names
            name = node.value
            if name in known:
                return known[name]
            v = self._function_value(node, env, 0)
            if not self.loading and (v is None or v.owner is None):
                known[name] = v
            return v
        return self._function_value(node, env, depth)

    def _function_value(self, node: cst.Name | cst.Attribute, env: dict, depth: int) -> FuncRef | None:
        if type(node) is cst.Name:
            f = self.lookup_function(node.value)
            if f is not None:
                return FuncRef(node.value, fn=f.node)
        found = self.imported(node, env)
        if found is not None:
            an, f = found
            return FuncRef(f.name, fn=f.node, owner=an)
        if type(node) is cst.Name and node.value not in env and depth < 3:
            target = self.index.aliases.get(node.value)
            if type(target) is cst.Lambda:  # ``ATTEND = lambda q, k, v: ...`` at module level
                return FuncRef(node.value, fn=target)
            if target is not None:
                return self.function_value(target, {}, depth + 1)
        return None

    def adopt_imported(self, an: Interpreter) -> None:
        """Prepare the analyzer of another file whose functions this one runs (a domain hook)."""

    def resolve_callee(self, frame: Frame, func: cst.BaseExpression) -> Any:
        """What a call's ``func`` expression calls, by value: a :class:`FuncRef` when it is a
        function the analysis can inline — the value ``frame`` gives ``func`` (a local ``def`` /
        ``lambda``, a function passed in or stored in a local, a ``functools.partial``), else the
        function of this file a name no local binds resolves to (:meth:`lookup_function`) —
        otherwise the domain's value of ``func`` (an ``nn`` module, unknown)."""
        v = frame.eval_callee(func)
        if isinstance(v, FuncRef):
            return v
        if type(func) is cst.Name and func.value not in frame.env:
            f = self.lookup_function(func.value)
            if f is not None:
                return FuncRef(func.value, fn=f.node)
        return v

    def function_of(self, ref: FuncRef, cls: Any = None) -> Any:
        """The ``FunctionDef`` / ``Lambda`` node ``ref`` runs (``cls``: the class of its
        ``bound_self``)."""
        if ref.fn is not None:
            return ref.fn
        f = (ref.owner or self).lookup_function(ref.name, cls)
        return f.node if f is not None else None

    # ---- the inliner
    def can_inline(self, fn: Any, depth: int) -> bool:
        """Whether ``fn`` may be run at inlining ``depth`` (1 = called from the analysed body)."""
        return fn is not None and depth <= MAX_INLINE_DEPTH and fn not in self.stack

    def run_body(self, frame: Frame, fn: Any) -> Any:
        """Run ``fn``'s body (a ``def``: its statements; a ``lambda``: its expression) in
        ``frame``; return the join of what it returns (:attr:`Frame.UNKNOWN` if nothing)."""
        if type(fn) is cst.Lambda:
            return frame.eval(fn.body)
        self.stack.append(fn)
        try:
            frame.exec_block(fn.body)
        except RecursionError:  # pragma: no cover - pathological nesting
            pass
        finally:
            self.stack.pop()
        return frame.returned_value()


def positional_params(fn: Any) -> list[str]:
    """Names of the positional parameters of a ``def`` / ``lambda`` node."""
    ps = fn.params
    return [p.name.value for p in (*ps.posonly_params, *ps.params)]


def all_params(fn: Any) -> list[Any]:
    """The ``Param`` nodes of a ``def`` / ``lambda``: positional, then keyword-only."""
    ps = fn.params
    return [*ps.posonly_params, *ps.params, *ps.kwonly_params]


class Frame:
    """One function body being run over a domain.

    ``env``: name → abstract value; ``depth``: how many inlined calls deep this body runs (0 for
    the analysed function).  Subclasses give the domain: the class attribute :attr:`UNKNOWN`,
    :meth:`join`, :meth:`join_absent`, :meth:`eval`, :meth:`assign` and the statement hooks."""

    #: the value nothing is known about
    UNKNOWN: Any = None
    #: whether a name whose joined value is :attr:`UNKNOWN` stays bound (else it is unbound, and
    #: the domain reads the name as it reads any name no local binds)
    STORES_UNKNOWN = True

    def __init__(self, env: dict, depth: int = 0) -> None:
        self.env = env
        self.depth = depth
        self._ret: Any = _NO_RETURN
        #: every path to here ran a ``return`` or ``raise``: what follows is not run
        self.done = False

    # ---- the domain (overridden)
    def join(self, a: Any, b: Any) -> Any:
        """The value of a name that is ``a`` on one path and ``b`` on another."""
        return a if a == b else self.UNKNOWN

    def join_absent(self, v: Any) -> Any:
        """The value of a name that is ``v`` on one path and unbound on the other; ``MISSING``
        (:data:`_MISSING`) leaves it unbound."""
        return self.join(v, self.UNKNOWN)

    def eval(self, node: cst.BaseExpression) -> Any:
        return self.UNKNOWN

    def eval_callee(self, func: cst.BaseExpression) -> Any:
        """The value of a call's ``func`` expression, for :meth:`Interpreter.resolve_callee`."""
        return self.eval(func)

    def assign(self, target: cst.BaseExpression, value: Any, value_node: Any = None) -> None:
        """Bind ``target`` (a name, tuple/list/starred pattern, attribute, subscript) to ``value``
        (the value of ``value_node`` when there is one)."""

    def assigned(self, value: cst.BaseExpression, targets: list) -> Any:
        """The value of an assignment's right-hand side (the domain may also read the statement's
        expression here, e.g. to record the consumers it holds)."""
        return self.eval(value)

    def aug_assign(self, s: cst.AugAssign) -> None:
        """``x op= y``."""

    def expr_stmt(self, s: cst.Expr) -> None:
        """An expression statement (a call for its effect: ``m.masked_fill_(...)``)."""
        self.eval(s.value)

    def read(self, expr: cst.BaseExpression) -> None:
        """An expression a compound statement reads without binding its value (a loop's iterable
        or test, a ``with`` item)."""

    def decide(self, test: cst.BaseExpression) -> bool | None:
        """The truth of an ``if`` test when the domain knows it (then only that branch runs);
        ``None`` to run both and join.  Reads the test either way."""
        self.read(test)
        return None

    def fallback_name(self, s: cst.If) -> str | None:
        """A name whose value after this ``if`` is the one its body gives (``if scale is None:
        scale = d ** -0.5`` on a parameter defaulting to ``None``: the fallback is the value)."""
        return None

    def define(self, s: cst.FunctionDef) -> None:
        """A local ``def``: bound by value, called wherever its name's value goes."""

    # ---- sequences and function values
    def is_unknown(self, v: Any) -> bool:
        """Whether ``v`` says nothing (an element of a sequence that is not worth keeping)."""
        return v is self.UNKNOWN

    def as_sequence(self, v: Any) -> Any:
        """``v`` as a :class:`Tup` / :class:`Many` where the domain iterates it as one (a hook:
        the parts of a split tensor are :class:`Many`)."""
        return v

    def call_value(self, f: Any, node: cst.Call, pos: list, kw: dict) -> Any:
        """The value of calling the function value ``f`` (a :class:`FuncRef`, a module) with
        ``pos`` / ``kw`` at ``node`` (a domain hook: it inlines a :class:`FuncRef`)."""
        return self.UNKNOWN

    def map_values(self, f: Any, it: Any, node: cst.Call) -> Any:
        """``map(f, it)`` over a tuple (item by item) or like values (:class:`Many`)."""
        it = self.as_sequence(it)
        if isinstance(it, Tup) and not it.star_unknown:
            return Tup(tuple(self.call_value(f, node, [x], {}) for x in it.items))
        if isinstance(it, Many):
            r = self.call_value(f, node, [it.t], {})
            return Many(r) if not self.is_unknown(r) else self.UNKNOWN
        return self.UNKNOWN

    def eval_comp(self, node: Any) -> Any:
        """A list comprehension or generator expression with one ``for``: over a tuple, item by
        item (a :class:`Tup`); over like values (:class:`Many`), one element for all.  The target
        (a name or a tuple pattern) is bound in the comprehension's own scope."""
        comp = node.for_in
        if comp.inner_for_in is not None:
            return self.UNKNOWN
        it = self.as_sequence(self.eval(comp.iter))
        saved = self.env

        def element(item: Any) -> Any:
            self.env = dict(saved)
            if type(comp.target) is cst.Name:
                self.env[comp.target.value] = item
            else:
                self.assign(comp.target, item)
            return self.eval(node.elt)

        try:
            if isinstance(it, Tup) and not it.star_unknown:
                return Tup(tuple(element(item) for item in it.items))
            elt = element(it.t if isinstance(it, Many) else self.UNKNOWN)
        finally:
            self.env = saved
        return Many(elt) if not self.is_unknown(elt) else self.UNKNOWN

    def loop_target(self, s: cst.For) -> None:
        """Bind a ``for`` loop's target at the start of an iteration."""
        self.assign(s.target, self.UNKNOWN)

    def returned(self, value: cst.BaseExpression | None) -> Any:
        """The value of a ``return``'s expression (``None``: a bare ``return``); :data:`MISSING`
        when it adds nothing to the join of the returned values."""
        return self.eval(value) if value is not None else self.UNKNOWN

    # ---- state: copied for a branch, joined after it
    def snapshot(self) -> Any:
        """A copy of the state a branch starts from (restored with :meth:`restore`)."""
        return dict(self.env)

    def restore(self, state: Any) -> None:
        """Make ``state`` the current state.  The environment stays the same dict, so a local
        ``def`` sees the names bound after it (Python closures bind late)."""
        self.env.clear()
        self.env.update(state)

    def join_states(self, a: Any, b: Any) -> Any:
        """The one join: every name bound on either path, joined (:meth:`join`; bound on one
        path only: :meth:`join_absent`)."""
        return self.join_envs(a, b)

    def join_envs(self, a: dict, b: dict) -> dict:
        out: dict = {}
        # a's names in order, then b's others: the joined frame's order (and so the order of
        # anything read from it) does not depend on string hashing (PYTHONHASHSEED)
        for k in (*a, *(k for k in b if k not in a)):
            va, vb = a.get(k, _MISSING), b.get(k, _MISSING)
            if va is _MISSING:
                v = self.join_absent(vb)
            elif vb is _MISSING:
                v = self.join_absent(va)
            else:
                v = self.join(va, vb)
            if v is not _MISSING and (self.STORES_UNKNOWN or v is not self.UNKNOWN):
                out[k] = v
        return out

    # ---- statements
    def exec_block(self, block: Any) -> None:
        """Run a suite: an indented block, a one-line suite (``if x: y = 1``) or a list."""
        t = type(block)
        if t is cst.IndentedBlock:
            body = block.body
        elif t is cst.SimpleStatementSuite:
            for small in block.body:
                if self.done:
                    return
                self.exec_small(small)
            return
        else:
            body = block.body if hasattr(block, "body") else block
        if isinstance(body, (list, tuple)):
            for s in body:
                if self.done:
                    return
                self.exec_stmt(s)
        else:
            self.exec_stmt(body)

    def exec_stmt(self, s: cst.CSTNode) -> None:
        t = type(s)
        if t is cst.SimpleStatementLine:
            for small in s.body:
                if self.done:
                    return
                self.exec_small(small)
        elif t is cst.If:
            self.exec_if(s)
        elif t is cst.For or t is cst.While:
            self.exec_loop(s)
        elif t is cst.With:
            for item in s.items:
                self.read(item.item)
            self.exec_block(s.body)
        elif t is cst.Try or t is cst.TryStar:
            self.exec_block(s.body)
            for h in s.handlers:
                self.done = False
                self.exec_block(h.body)
            self.done = False
            if s.orelse is not None:
                self.exec_block(s.orelse.body)
            self.done = False
            if s.finalbody is not None:
                self.exec_block(s.finalbody.body)
            self.done = False
        elif t is cst.FunctionDef:
            self.define(s)
        elif t is cst.IndentedBlock or t is cst.SimpleStatementSuite:
            self.exec_block(s)

    def exec_if(self, s: cst.If) -> None:
        decided = self.decide(s.test)
        if decided is True:
            self.exec_block(s.body)
            return
        if decided is False:
            self._exec_orelse(s)
            return
        fallback = self.fallback_name(s)
        before = self.snapshot()
        self.exec_block(s.body)
        after_then, then_done = self.snapshot(), self.done
        self.restore(before)
        self.done = False
        self._exec_orelse(s)
        self.done = then_done and self.done
        merged = self.join_states(after_then, self.snapshot())
        self.restore(merged)
        if fallback is not None and fallback in after_then:
            self.env[fallback] = after_then[fallback]

    def _exec_orelse(self, s: cst.If) -> None:
        if s.orelse is None:
            return
        if type(s.orelse) is cst.If:
            self.exec_if(s.orelse)
        else:
            self.exec_block(s.orelse.body)

    def exec_loop(self, s: cst.For | cst.While) -> None:
        """The loop policy: the body (and ``else``) run once on a copy of the state, joined with
        the state before the loop (zero iterations)."""
        self.read(s.iter if type(s) is cst.For else s.test)
        before = self.snapshot()
        if type(s) is cst.For:
            self.loop_target(s)
        self.exec_block(s.body)
        self.done = False  # a ``return`` in the body ends the loop's iteration, not the function
        if s.orelse is not None:
            self.exec_block(s.orelse.body)
        self.done = False
        self.restore(self.join_states(before, self.snapshot()))

    def exec_small(self, s: cst.CSTNode) -> None:
        t = type(s)
        if t is cst.Assign:
            targets = [x.target for x in s.targets]
            v = self.assigned(s.value, targets)
            for target in targets:
                self.assign(target, v, s.value)
        elif t is cst.AnnAssign:
            if s.value is not None:
                self.assign(s.target, self.assigned(s.value, [s.target]), s.value)
        elif t is cst.AugAssign:
            self.aug_assign(s)
        elif t is cst.Return:
            v = self.returned(s.value)
            if v is not _MISSING:
                self._ret = v if self._ret is _NO_RETURN else self.join(self._ret, v)
            self.done = True
        elif t is cst.Raise:
            self.done = True
        elif t is cst.Expr:
            self.expr_stmt(s)

    def returned_value(self) -> Any:
        """The join of the values this body's ``return`` statements gave."""
        return self.UNKNOWN if self._ret is _NO_RETURN else self._ret

    @property
    def has_returned(self) -> bool:
        return self._ret is not _NO_RETURN


MISSING = _MISSING
