"""ATT502 state-mutated-in-forward: ``forward()`` assigns a hyper-parameter on ``self``.

A module's hyper-parameters (dropout probability, softmax scale, causal flag, head count) are fixed
in ``__init__``; ``forward`` reassigning one (``self.dropout = 0.0``, ``self.causal = True``,
``self.scale = q.shape[-1] ** -0.5``) changes the module for every later call, breaks
``torch.compile`` guards and makes a module's behaviour depend on call history.  Assigning
``self.training`` bypasses ``train()``/``eval()`` (which also recurse into the children).

What counts as a hyper-parameter (decided, documented in rules/ATT502.md):

* ``self.training``, always;
* an attribute that ``__init__`` of the same class sets from a number / bool literal, from one
  of ``__init__``'s parameters, or from a field of one (``config.attention_dropout``).

Not reported (legitimate state): attributes whose name says they are state or caches (``cache``,
``cached``, ``past``, ``seen``, ``step``, ``count``, ``index``/``idx``, ``offset``, ``len``,
``state``, ``buffer``, ``memory``, ``history``, ``running``, ``stats``, ``prev``, ``last``,
``num_batches``, ``seq``), augmented counters (``self._seen_tokens += 1``), attributes whose
``__init__`` value is ``None`` or a tensor/module (lazy caches, buffers), and an idempotent lazy
default or one-shot latch under an ``if`` that tests the same attribute (``if self.x is None:
self.x = ...``; ``if self.expand: ...; self.expand = False``).
"""
from __future__ import annotations

import re
from typing import Any

import libcst as cst

from attncheck.lint import walk
from attncheck.lint.context import dotted_name
from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T

_STATE = re.compile(r"cache|cached|past|seen|step|count|index|idx|offset|len|state|buffer|memory|history|"
                    r"running|stats|prev|last|num_batches|seq|pos|iter|tick|calls|ready|initialized|"
                    r"warned|logged|shape|hook|output|outputs|_saved|store|record", re.I)
_HYPER_WORDS = re.compile(r"drop|scale|scaling|causal|heads|head_dim|window|temperature|softcap|"
                          r"is_decoder|use_|enable|fused|flash|sdpa", re.I)


def _self_attr(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None


def _init_kind(value: cst.BaseExpression, params: set[str]) -> str | None:
    """``literal`` / ``param`` / ``config`` for a hyper-parameter-like ``__init__`` value, else ``None``."""
    v = value
    if isinstance(v, cst.UnaryOperation):
        v = v.expression
    if isinstance(v, (cst.Integer, cst.Float)):
        return "literal"
    if isinstance(v, cst.Name) and v.value in ("True", "False"):
        return "literal"
    if isinstance(v, cst.Name) and v.value in params:
        return "param"
    if isinstance(v, cst.Attribute):
        d = dotted_name(v)
        if d and d.split(".", 1)[0] in params:
            return "config"
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Power):
        return _init_kind(v.left, params)
    return None


class _SelfAttrsRead(cst.CSTVisitor):
    """Collects the attributes of ``self`` an expression reads (:func:`_self_attr`), in visit order."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[str] = []

    def visit_Attribute(self, n: cst.Attribute) -> None:
        a = _self_attr(n)
        if a:
            self.out.append(a)


class _StateReads(cst.CSTVisitor):
    """Collects what an expression reads: attributes of ``self`` (not entered) and other names
    (``True``, ``False`` and ``None`` left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.attrs: list[str] = []

    def visit_Attribute(self, n: cst.Attribute) -> bool:
        if _self_attr(n) is not None:
            self.attrs.append(n.attr.value)
            return False
        return True

    def visit_Name(self, n: cst.Name) -> None:
        if n.value not in ("True", "False", "None"):
            self.names.append(n.value)


class _Forward:
    def __init__(self, fn: cst.FunctionDef) -> None:
        self.fn = fn
        self.assigns: list[tuple[cst.CSTNode, str, cst.CSTNode, bool]] = []
        self.lazy: list[str] = []  # attrs tested "is None" by enclosing ifs
        self.state_only: list[bool] = []  # per enclosing if: its test reads only self's state


class _InitAttrKinds(cst.CSTVisitor):
    """What ``__init__`` (``init``, not its nested functions) assigns to each ``self.x``: the
    kind :func:`_init_kind` gives the value, ``None`` when two assignments differ."""

    def __init__(self, init: cst.FunctionDef, params: set[str]) -> None:
        super().__init__()
        self.init, self.params = init, params
        self.kinds: dict[str, str | None] = {}

    def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
        return n is self.init

    def visit_Assign(self, n: cst.Assign) -> None:
        kinds = self.kinds
        for t in n.targets:
            a = _self_attr(t.target)
            if a is not None:
                k = _init_kind(n.value, self.params)
                kinds[a] = k if kinds.get(a, k) == k else None


@register
class StateMutatedInForward(Rule):
    """ATT502: ``forward`` reassigns a hyper-parameter on ``self``."""

    code = "ATT502"
    name = "state-mutated-in-forward"
    severity = "warning"
    summary = "forward assigns a hyper-parameter on self (e.g. dropout)"
    tokens = ("def forward",)
    pattern = T.SELF_ASSIGN
    methods = frozenset({"forward"})

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._classes: list[cst.ClassDef] = []
        self._fwd: list[_Forward | None] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        direct = bool(self._classes) and any(s is node for s in self._classes[-1].body.body)
        self._fwd.append(_Forward(node) if direct and node.name.value == "forward" else None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        fw = self._fwd.pop()
        if fw is not None:
            self._check(fw, self._classes[-1])

    def _lazy_test(self, test: cst.BaseExpression) -> list[str]:
        """Attributes of ``self`` an ``if`` test reads: an assignment under it is a latch — a one-shot
        initialisation or state transition (``if self.x is None: self.x = ...``, ``if self.map: ...
        else: self.map = True``, ``if self.expand: ...; self.expand = False``)."""
        v = _SelfAttrsRead()
        walk.visit(test, v)
        return v.out

    @staticmethod
    def _reads_only_self(test: cst.BaseExpression) -> bool:
        """Whether an ``if`` test reads module state only (``self.training``, ``not self.x``): no
        input, local or global decides it."""
        v = _StateReads()
        walk.visit(test, v)
        return bool(v.attrs) and not v.names

    def visit_If(self, node: cst.If) -> None:
        if self._fwd and self._fwd[-1] is not None:
            self._fwd[-1].lazy.extend(self._lazy_test(node.test))
            self._fwd[-1].state_only.append(self._reads_only_self(node.test))

    def leave_If(self, node: cst.If) -> None:
        if self._fwd and self._fwd[-1] is not None:
            for a in self._lazy_test(node.test):
                self._fwd[-1].lazy.remove(a)
            self._fwd[-1].state_only.pop()

    def _record(self, target: cst.BaseExpression, stmt: cst.CSTNode, aug: bool) -> None:
        if not self._fwd or self._fwd[-1] is None:
            return
        a = _self_attr(target)
        if a is not None:
            fw = self._fwd[-1]
            fw.assigns.append((target, a, stmt, (aug and not _HYPER_WORDS.search(a)) or a in fw.lazy))

    def visit_Assign(self, node: cst.Assign) -> None:
        fw = self._fwd[-1] if self._fwd else None
        if fw is not None and fw.state_only and all(fw.state_only) and isinstance(node.value, cst.Name) \
                and node.value.value in ("True", "False") \
                and all(_self_attr(t.target) not in (None, "training") for t in node.targets):
            # a one-way flag recording the module's own history (``if self.training:
            # self.ever_training = True``): state that the module's mode decides, not a
            # hyper-parameter an input changes
            return
        for t in node.targets:
            targets = [e.value for e in t.target.elements] if isinstance(t.target, (cst.Tuple, cst.List)) \
                else [t.target]
            for tt in targets:
                self._record(tt, node, False)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record(node.target, node, False)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._record(node.target, node, True)

    def _init_attrs(self, cls: cst.ClassDef) -> dict[str, str]:
        init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"),
                    None)
        if init is None:
            return {}
        p = init.params
        params = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)} - {"self"}
        v = _InitAttrKinds(init, params)
        walk.visit(init, v)
        return {a: k for a, k in v.kinds.items() if k is not None}

    def _check(self, fw: _Forward, cls: cst.ClassDef) -> None:
        if not fw.assigns:
            return
        hyper = self._init_attrs(cls)
        for target, attr, stmt, exempt in fw.assigns:
            if attr == "training":
                self.report(stmt, "forward() assigns self.training: that switches this module alone (not its "
                                  "children) and persists after the call; use module.train() / module.eval() "
                                  "from outside")
                continue
            if exempt or attr not in hyper or _STATE.search(attr):
                continue
            kind = hyper[attr]
            src = "a constructor argument" if kind in ("param", "config") else "a constant"
            hint = " (e.g. dropout_p = self.dropout if self.training else 0.0)" if "drop" in attr.lower() else ""
            self.report(stmt, f"forward() reassigns self.{attr}, a hyper-parameter set from {src} in __init__: "
                              f"the change persists into every later call; compute a local instead"
                              f"{hint}")
