"""ATT501 dropout-in-eval: functional dropout that stays active after ``model.eval()``.

``nn.Dropout`` modules follow ``module.training``; functional calls do not: ``F.dropout``'s
``training`` argument defaults to ``True`` and ``F.scaled_dot_product_attention(dropout_p=p)`` /
``flash_attn_func(dropout_p=p)`` drop with probability ``p`` whatever the mode (PyTorch
``torch.nn.functional.dropout`` and ``scaled_dot_product_attention`` docs).  Inside a method of a
class (an ``nn.Module``), the probability must be gated: ``training=self.training`` or
``dropout_p=self.p if self.training else 0.0``.  Parameters of the method are the caller's
responsibility and are not flagged.

Functional dropout is reported only on attention probabilities: a tensor the score-provenance
analysis established as ``softmax(q·kᵀ)`` (after any masking, casting or reshaping).  Dropout on
anything else is a design choice of the model, not an attention bug: Tacotron 2's decoder prenet
keeps its dropout on at inference on purpose (Shen et al. 2018), Monte-Carlo dropout resamples in
eval(), and a tensor of unknown origin may be either.  Fused kernels (SDPA, flash-attn, xformers)
always drop attention weights, so their ``dropout_p`` is checked wherever they are called.
"""
from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from attncheck.lint.analysis import ops
from attncheck.lint.analysis.layout import arg, tensors
from attncheck.lint.analysis.provenance import mentions_training
from attncheck.lint.context import dotted_name
from attncheck.lint.analysis.syntax import child_nodes, num_of
from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T
from attncheck.lint.rules import _edits



_arg = arg  # the argument at position pos or keyword kw (shared with the layout analysis)


def attention_probs(ctx: Any, call: cst.Call) -> bool:
    """Whether the tensor ``F.dropout`` drops is attention probabilities in some analysed context:
    the softmax of established q·kᵀ scores (``Tensor.event`` links the weights to those scores)."""
    x = _arg(call, 0, "input")
    if x is None:
        return False
    return any(t.softmaxed and t.event is not None for t in tensors(ctx, x.value))


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _param_attr_base(expr: cst.BaseExpression, fn: cst.FunctionDef) -> str | None:
    """``module`` when ``expr`` is ``module.<attr>`` and ``module`` is a parameter of ``fn``."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
        return None
    ps = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
    name = expr.value.value
    return name if any(p.name.value == name for p in ps) else None


def _params(fn: cst.FunctionDef) -> list[cst.Param]:
    return [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]


def _calls_to(module: cst.Module, name: str) -> list[cst.Call]:
    """Every call ``name(...)`` in the module (a module-level function called by its name)."""
    out, stack = [], [module]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == name:
            out.append(n)
        stack.extend(child_nodes(n))
    return out


def _bound_arg(call: cst.Call, fn: cst.FunctionDef, param: str) -> cst.BaseExpression | None | bool:
    """What ``call`` passes for ``fn``'s parameter ``param``: the expression, ``None`` when it
    passes nothing (the default applies), ``False`` when unknown (``*args`` / ``**kwargs``)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == param:
            return a.value
    positional = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if param in positional:
        i = positional.index(param)
        pos = [a for a in call.args if a.keyword is None]
        if any(a.star for a in pos[: i + 1]):
            return False
        if i < len(pos):
            return pos[i].value
    if any(a.star for a in call.args):
        return False
    return None


def _drops_in_eval(expr: cst.BaseExpression | None) -> bool:
    """A dropout probability that stays non-zero in eval(): a non-zero literal, or a module
    attribute (``self.dropout``) read with no ``training`` condition."""
    if expr is None:
        return False
    n = num_of(expr)
    if n is not None:
        return n != 0
    if mentions_training(expr):
        return False
    return isinstance(expr, cst.Attribute) and dotted_name(expr) is not None


class _Method:
    """What one method body holds: assignments per local name (with guard state) and calls."""

    def __init__(self, fn: cst.FunctionDef, is_method: bool) -> None:
        self.fn = fn
        self.is_method = is_method
        self.assigns: dict[str, list[tuple[cst.BaseExpression, bool]]] = {}
        self.calls: list[tuple[cst.Call, bool]] = []
        self.guard = 0


@register
class DropoutInEval(Rule):
    code = "ATT501"
    name = "dropout-in-eval"
    severity = "error"
    summary = "F.dropout without training=self.training; SDPA/flash dropout_p not gated by self.training"
    tokens = ("dropout", "memory_efficient_attention")
    pattern = T.F_DROPOUT + T.FUSED

    # The rule rides the engine's batched visit (no traversal of its own).
    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._frames: list[_Method] = []
        self._class_depth: list[cst.CSTNode] = []
        self._local_classes: dict[str, cst.ClassDef] | None = None  # the module's classes by name

    _MODULE_SUFFIXES = ("Module", "Attention", "Layer", "Block", "Model", "Transformer", "Encoder", "Decoder",
                        "Net", "Network", "Head", "Mixer")

    def _is_module_class(self, node: cst.ClassDef, seen: set | None = None) -> bool:
        """Whether a class is an ``nn.Module``: a base resolves to ``torch.nn.*``, is a module class of
        this file, or (imported, unknown) is named like one (``…Module``, ``…Attention``, ``…Layer``)."""
        seen = seen or set()
        local = self._local_classes
        if local is None:  # once per file (``ClassDef`` has no subclasses: an exact type test)
            local = self._local_classes = {s.name.value: s for s in self.ctx.module.body
                                           if type(s) is cst.ClassDef}
        for b in node.bases:
            q = self.ctx.qualname(b.value) or ""
            leaf = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.") or q == "torch.nn.Module":
                return True
            if leaf in local and leaf not in seen:
                seen.add(leaf)
                if self._is_module_class(local[leaf], seen):
                    return True
                continue
            if leaf.endswith(self._MODULE_SUFFIXES):
                return True
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._class_depth.append(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._class_depth.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        ps = list(node.params.posonly_params) + list(node.params.params)
        directly_in_class = bool(self._class_depth) and any(
            s is node for s in self._class_depth[-1].body.body)
        is_method = directly_in_class and bool(ps) and ps[0].name.value == "self" \
            and self._is_module_class(self._class_depth[-1])
        self._frames.append(_Method(node, is_method))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        fr = self._frames.pop()
        if fr.is_method:
            self._check(fr)
        else:
            self._check_literal_true(fr)

    def _check_literal_true(self, scan: _Method) -> None:
        """Outside module methods (HF ``eager_attention_forward(module, ...)``, free helpers) only a
        literal ``training=True`` is flagged: it drops in eval() whatever the caller does."""
        for call, guarded in scan.calls:
            q = self.ctx.qualname(call.func) or ""
            if q in ops.F_DROPOUT and q != "torch.dropout" and not guarded and attention_probs(self.ctx, call):
                train = _arg(call, 2, "training")
                p = _arg(call, 1, "p")
                if p is not None and num_of(p.value) == 0:
                    continue
                owner = _param_attr_base(p.value, scan.fn) if p is not None and train is None else None
                if owner is not None:
                    # p read off a module passed in (``p=module.attention_dropout``) with no
                    # training flag: the module's own flag is at hand and nothing gates p
                    name = "F." + q.rsplit(".", 1)[-1]
                    fix = None
                    if not any(a.star for a in call.args) and sum(a.keyword is None for a in call.args) <= 2:
                        fix = _edits.unsafe(f"add training={owner}.training",
                                            _edits.add_arg(self, call, f"training={owner}.training"))
                    self.report(call, f"{name}(..., p={_code(p.value)}) without training=: it defaults to "
                                      f"training=True and keeps dropping in eval(): pass "
                                      f"training={owner}.training", fix)
                    continue
                if train is None and p is not None:
                    why = self._kernel_drops(scan.fn, p.value)
                    if why:
                        name = "F." + q.rsplit(".", 1)[-1]
                        self.report(call, f"{name}(..., p={_code(p.value)}) without training=: it "
                                          f"defaults to training=True, and {why}, so attention weights "
                                          f"are dropped in eval(): take a training argument and pass "
                                          f"training=training (callers pass self.training)")
                    continue
                if train is not None and isinstance(train.value, cst.Name) and train.value.value == "True" \
                        and any(x.name.value == "module" for x in _params(scan.fn)):
                    # the module is passed in (HF ``eager_attention_forward(module, ...)``): its
                    # flag is at hand; a kernel with no module to read it from drops on purpose
                    name = "F." + q.rsplit(".", 1)[-1]
                    fix = _edits.unsafe("use training=module.training",
                                        _edits.replace(self, train.value, "module.training"))
                    self.report(call, f"{name}(..., training=True) drops in eval() too: pass "
                                      f"training=module.training (the module's flag)", fix)

    def _kernel_drops(self, fn: cst.FunctionDef, p: cst.BaseExpression) -> str | None:
        """Why ``F.dropout(w, p)`` (no ``training=``) in the function ``fn`` drops in eval(), or
        ``None``: ``p`` is a non-zero literal; or ``p`` is a parameter whose non-zero default
        applies (a caller in this file leaves it out, or none calls ``fn`` here), or that a caller
        in this file passes an ungated module attribute (``self.dropout``).  A probability the
        callers gate (``self.p if self.training else 0.0``) or that no caller here sets is the
        callers' business."""
        n = num_of(p)
        if n is not None:
            return f"p={_code(p)} is a constant" if n != 0 else None
        if not isinstance(p, cst.Name):
            return None
        param = next((x for x in _params(fn) if x.name.value == p.value), None)
        if param is None or any(x.name.value in ("training", "is_training", "train") for x in _params(fn)):
            return None
        if any(isinstance(t.target, cst.Name) and t.target.value == p.value
               for a in fn.body.body if isinstance(a, cst.SimpleStatementLine)
               for st in a.body if isinstance(st, cst.Assign) for t in st.targets):
            return None  # reassigned in the body: not the caller's value
        default = param.default
        calls = _calls_to(self.ctx.module, fn.name.value)
        default_drops = default is not None and num_of(default) not in (None, 0.0)
        if not calls:
            return f"{p.value} defaults to {_code(default)}" if default_drops else None
        for c in calls:
            got = _bound_arg(c, fn, p.value)
            if got is False:
                continue
            if got is None and default_drops:
                return f"{p.value} keeps its default {_code(default)} in the call on line " \
                       f"{self._line(c)}"
            if got is not None and _drops_in_eval(got):
                return f"the call on line {self._line(c)} passes {p.value}={_code(got)} with no " \
                       f"training condition"
        return None

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line + self.ctx.line_offset

    def _guard_test(self, test: cst.BaseExpression, delta: int) -> None:
        if self._frames and mentions_training(test):
            self._frames[-1].guard += delta

    def visit_If(self, node: cst.If) -> None:
        self._guard_test(node.test, 1)

    def leave_If(self, node: cst.If) -> None:
        self._guard_test(node.test, -1)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._guard_test(node.test, 1)

    def leave_IfExp(self, node: cst.IfExp) -> None:
        self._guard_test(node.test, -1)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._frames:
            fr = self._frames[-1]
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    fr.assigns.setdefault(t.target.value, []).append((node.value, fr.guard > 0))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._frames and isinstance(node.target, cst.Name) and node.value is not None:
            fr = self._frames[-1]
            fr.assigns.setdefault(node.target.value, []).append((node.value, fr.guard > 0))

    def visit_Call(self, node: cst.Call) -> None:
        if self._frames:
            fr = self._frames[-1]
            fr.calls.append((node, fr.guard > 0))

    def _check(self, scan: _Method) -> None:
        for call, guarded in scan.calls:
            q = self.ctx.qualname(call.func) or ""
            if q in ops.F_DROPOUT:
                self._f_dropout(call, q, guarded, scan)
                continue
            op = ops.kernel(q)
            if op is None or op.dropout is None:
                continue
            name = "F.scaled_dot_product_attention" if op.kind == "sdpa" else q.rsplit(".", 1)[-1]
            self._prob(call, _arg(call, op.dropout.pos, op.dropout.kw), guarded, scan, name)

    def _f_dropout(self, call: cst.Call, q: str, guarded: bool, scan: _Method) -> None:
        p = _arg(call, 1, "p")
        train = _arg(call, 2, "training" if q != "torch.dropout" else "train")
        if guarded:
            return
        if p is not None and num_of(p.value) == 0:
            return
        if not attention_probs(self.ctx, call):
            return
        name = "torch.dropout" if q == "torch.dropout" else "F." + q.rsplit(".", 1)[-1]
        if train is None:
            if q == "torch.dropout":
                return
            fix = None
            if not any(a.star for a in call.args) and sum(a.keyword is None for a in call.args) <= 2:
                fix = _edits.unsafe("add training=self.training",
                                    _edits.add_arg(self, call, "training=self.training"))
            self.report(call, f"{name}(...) without training=: it defaults to training=True and keeps dropping "
                              f"in eval(): pass training=self.training (or use an nn.Dropout module)", fix)
            return
        v = train.value
        if isinstance(v, cst.Name) and v.value == "True":
            fix = _edits.unsafe("pass self.training", _edits.replace(self, v, "self.training"))
            self.report(call, f"{name}(..., training=True) drops in eval() too: pass training=self.training",
                        fix)

    def _gated(self, expr: cst.BaseExpression, scan: _Method, depth: int = 0) -> bool | None:
        """True: gated/zero; False: an ungated module attribute or non-zero literal; None: unknown."""
        n = num_of(expr)
        if n is not None:
            return n == 0
        if mentions_training(expr):
            return True
        if isinstance(expr, cst.Name):
            assigns = scan.assigns.get(expr.value)
            if not assigns:
                return None  # a parameter or a global: the caller's business
            if any(g for _, g in assigns):
                return True
            if depth > 3:
                return None
            res = [self._gated(v, scan, depth + 1) for v, _ in assigns]
            if any(r is True for r in res):
                return True
            if all(r is False for r in res):
                return False
            return None
        if isinstance(expr, cst.Attribute):
            base = expr
            while isinstance(base, cst.Attribute):
                base = base.value
            if isinstance(base, cst.Name) and base.value == "self":
                return False
        return None

    def _prob(self, call: cst.Call, arg: cst.Arg | None, guarded: bool, scan: _Method, fname: str) -> None:
        if arg is None or guarded:
            return
        if self._gated(arg.value, scan) is False:
            code = cst.Module([]).code_for_node(arg.value)
            kw = arg.keyword.value if arg.keyword is not None else "dropout_p"
            simple = isinstance(arg.value, (cst.Name, cst.Attribute)) or num_of(arg.value) is not None
            gated = f"{code if simple else '(' + code + ')'} if self.training else 0.0"
            fix = None
            if "\n" not in code:
                fix = _edits.unsafe(f"use {kw}={gated}", _edits.replace(self, arg.value, gated))
            self.report(arg, f"{fname}({kw}={code}) drops attention weights in eval() too: "
                             f"use {kw}={gated}", fix)
