"""Numerical-stability rules of the softmax: ATT302 unstable-softmax, ATT604 low-precision-softmax.

ATT302: a hand-written ``exp(s) / exp(s).sum(dim, keepdim=True)`` over attention scores overflows:
``exp`` of a float32 logit above ~88.7 is ``inf`` and ``inf / inf`` is NaN (float16: above ~11.1).
``torch.softmax`` subtracts the row maximum first (softmax is shift-invariant), as does any
hand-written form ``exp(s - s.amax(dim, keepdim=True))`` or ``exp(s - logsumexp(s))``.

ATT604 (info): a softmax over float16/bfloat16 scores without ``dtype=torch.float32`` sums the
exponentials in low precision (HF Llama/T5 upcast: ``softmax(scores, dim=-1, dtype=torch.float32)``).
The dtype must be *known* low-precision in the function: the scores or q/k come from ``.half()``,
``.bfloat16()``, ``.to(torch.float16)``/``.to(torch.bfloat16)``/``.type(torch.half)``.  Softmax
under ``torch.autocast`` is not reported: CUDA autocast runs ``softmax`` in float32 (PyTorch AMP
op reference, "CUDA Ops that can autocast to float32").

Both rules work on attention scores established by the score-provenance analysis
(``ctx.provenance``; :func:`attncheck.lint.analysis.layout.is_scores`).
"""
from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from attncheck.lint import walk
from attncheck.lint.analysis import ops
from attncheck.lint.analysis.layout import arg, code, is_scores
from attncheck.lint.finding import Edit, Fix
from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T

_EXP = ops.EXP
_SUM = ops.functions("reduce", "sum")
_MAXLIKE = {"max", "amax", "logsumexp", "maximum", "cummax", "nanmax", "max_values"}


class _Frame:
    def __init__(self) -> None:
        self.assigns: dict[str, list[cst.BaseExpression]] = {}
        self.divs: list[cst.CSTNode] = []
        self.softmaxes: list[cst.Call] = []
        self.lowp_stmts: list[tuple[str, cst.BaseExpression]] = []


class _FunctionRule(Rule):
    """Collects per-function assignments and candidate nodes during the batched visit."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._frames: list[_Frame] = []

    def visit_Module(self, node: cst.Module) -> None:
        self._frames.append(_Frame())

    def leave_Module(self, node: cst.Module) -> None:
        self.check(self._frames.pop())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append(_Frame())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.check(self._frames.pop())

    def visit_Assign(self, node: cst.Assign) -> None:
        fr = self._frames[-1]
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                fr.assigns.setdefault(t.target.value, []).append(node.value)
                fr.lowp_stmts.append((t.target.value, node.value))
            elif isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)) \
                    and len(t.target.elements) == len(node.value.elements):
                for te, ve in zip(t.target.elements, node.value.elements):
                    if isinstance(te.value, cst.Name):
                        fr.lowp_stmts.append((te.value.value, ve.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            fr = self._frames[-1]
            op = cst.Subtract() if isinstance(node.operator, cst.SubtractAssign) else cst.Add()
            fr.assigns.setdefault(node.target.value, []).append(
                cst.BinaryOperation(node.target, op, node.value))

    def check(self, fr: _Frame) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _exp_arg(rule: Rule, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``X`` of ``torch.exp(X)`` / ``X.exp()``."""
    if not isinstance(node, cst.Call):
        return None
    q = rule.ctx.qualname(node.func) or ""
    if q in _EXP and node.args and node.args[0].keyword is None:
        return node.args[0].value
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("exp", "exp_") and not node.args \
            and not (q.startswith(("torch.", "math.", "numpy."))):
        return node.func.value
    return None


def _resolve_exp(rule: Rule, node: cst.BaseExpression, fr: _Frame) -> cst.BaseExpression | None:
    x = _exp_arg(rule, node)
    if x is None and isinstance(node, cst.Name):
        vals = fr.assigns.get(node.value, ())
        xs = [_exp_arg(rule, v) for v in vals]
        if xs and all(x is not None for x in xs):
            texts = {code(x) for x in xs}
            if len(texts) == 1:
                x = xs[-1]
    return x


def _sum_of_exp(rule: Rule, node: cst.BaseExpression, fr: _Frame, depth: int = 0) -> list[cst.BaseExpression]:
    """Arguments X of every ``exp(X).sum(...)`` / ``torch.sum(exp(X), ...)`` inside ``node``."""
    out: list[cst.BaseExpression] = []
    if isinstance(node, cst.Call):
        q = rule.ctx.qualname(node.func) or ""
        recv = None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("sum", "nansum") \
                and not q.startswith("torch."):
            recv = node.func.value
        elif q in _SUM and node.args:
            recv = node.args[0].value
        if recv is not None:
            x = _resolve_exp(rule, recv, fr)
            if x is not None:
                out.append(x)
                return out
    if isinstance(node, cst.Name) and depth < 2:
        for v in fr.assigns.get(node.value, ()):
            out += _sum_of_exp(rule, v, fr, depth + 1)
        return out
    if isinstance(node, cst.BinaryOperation):
        return _sum_of_exp(rule, node.left, fr, depth) + _sum_of_exp(rule, node.right, fr, depth)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value in ("clamp", "clamp_min", "unsqueeze", "add", "to", "float", "expand_as"):
        return _sum_of_exp(rule, node.func.value, fr, depth)
    return out


def _mentions_max(node: cst.CSTNode) -> bool:
    v = _MaxMention()
    walk.visit(node, v)
    return v.found


class _MaxMention(cst.CSTVisitor):
    """Whether a name or attribute reads a maximum (``max``, ``amax``, ``lse``, ``logsumexp``)."""

    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Name(self, n: cst.Name) -> None:
        low = n.value.lower()
        if "max" in low or "lse" in low or "logsumexp" in low:
            self.found = True

    def visit_Attribute(self, n: cst.Attribute) -> None:
        low = n.attr.value.lower()
        if n.attr.value in _MAXLIKE or "max" in low or "lse" in low:
            self.found = True


def _stabilized(x: cst.BaseExpression, fr: _Frame, depth: int = 0) -> bool:
    """``x - <max-like>`` (directly or through an assignment / ``x -= x.amax(...)``)."""
    if isinstance(x, cst.BinaryOperation) and isinstance(x.operator, cst.Subtract):
        return _mentions_max(x.right) or _stabilized(x.left, fr, depth)
    if isinstance(x, cst.Call) and isinstance(x.func, cst.Attribute) and x.func.attr.value in (
            "float", "to", "double", "type_as", "contiguous", "masked_fill", "sub"):
        if x.func.attr.value == "sub" and x.args and _mentions_max(x.args[0].value):
            return True
        return _stabilized(x.func.value, fr, depth)
    if isinstance(x, cst.Name) and depth < 4:
        return any(_stabilized(v, fr, depth + 1) for v in fr.assigns.get(x.value, ()))
    return False


def _keepdim_dim(call: cst.Call, skip: int) -> int | None:
    """Literal ``dim`` of a ``.sum(dim, keepdim=True)`` call; ``None`` if not exactly that form."""
    kd = arg(call, 1 + skip, "keepdim")
    if kd is None or not (isinstance(kd.value, cst.Name) and kd.value.value == "True"):
        return None
    d = arg(call, skip, "dim")
    if d is None:
        return None
    from attncheck.lint.analysis.layout import int_of

    return int_of(d.value)


@register
class UnstableSoftmax(_FunctionRule):
    """ATT302: ``exp(s) / exp(s).sum(...)`` on attention scores without subtracting the maximum."""

    code = "ATT302"
    name = "unstable-softmax"
    severity = "warning"
    summary = "exp(x) / exp(x).sum() without subtracting the max"
    tokens = ("exp",)
    pattern = T.EXP

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            self._frames[-1].divs.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "div" and node.args \
                or (self.ctx.qualname(node.func) == "torch.div" and len(node.args) >= 2):
            self._frames[-1].divs.append(node)

    def check(self, fr: _Frame) -> None:
        for d in fr.divs:
            if isinstance(d, cst.BinaryOperation):
                num, den = d.left, d.right
            elif self.ctx.qualname(d.func) == "torch.div":
                num, den = d.args[0].value, d.args[1].value
            else:
                num, den = d.func.value, d.args[0].value
            x = _resolve_exp(self, num, fr)
            if x is None:
                continue
            xs = _sum_of_exp(self, den, fr)
            if not any(code(x2) == code(x) for x2 in xs):
                continue
            if _stabilized(x, fr) or not is_scores(self.ctx, x):
                continue
            self.report(d, f"softmax written as exp({code(x)}) / sum(exp(...)) without subtracting the row "
                           f"maximum: exp overflows to inf for logits above ~88.7 (float32; ~11.1 in float16) "
                           f"and inf / inf is NaN: use torch.softmax({code(x)}, dim=-1) or subtract "
                           f"{code(x)}.amax(dim=-1, keepdim=True) first", self._fix(d, num, den, x))

    def _fix(self, d: cst.CSTNode, num: cst.BaseExpression, den: cst.BaseExpression,
             x: cst.BaseExpression) -> Fix | None:
        """Only the fully inline ``torch.exp(x) / torch.exp(x).sum(dim=D, keepdim=True)`` form."""
        if not isinstance(d, cst.BinaryOperation) or _exp_arg(self, num) is None:
            return None
        if not (isinstance(den, cst.Call) and isinstance(den.func, cst.Attribute)
                and den.func.attr.value == "sum" and _exp_arg(self, den.func.value) is not None):
            return None
        dim = _keepdim_dim(den, 0)
        torch_name = next((k for k, v in self.ctx.imports.aliases.items() if v == "torch"), None)
        if dim is None or torch_name is None:
            return None
        content = f"{torch_name}.softmax({code(x)}, dim={dim})"
        pos = self.get_metadata(PositionProvider, d)
        off = self.ctx.line_offset
        return Fix(f"replace with {content}",
                   (Edit(pos.start.line + off, pos.start.column, pos.end.line + off, pos.end.column, content),),
                   "unsafe")


# --------------------------------------------------------------------------- ATT604

_LOWP_DTYPES = ops.LOW_PRECISION_DTYPES
_HIGHP_DTYPES = ops.HIGH_PRECISION_DTYPES
_TO_LOW_METHODS = ops.LOW_PRECISION_CASTS
_TO_HIGH_METHODS = ops.HIGH_PRECISION_CASTS
_SOFTMAX = ops.SOFTMAX


def _cast(rule: Rule, call: cst.Call) -> str | None:
    """``"low"`` / ``"high"`` when ``call`` is a dtype cast of its receiver, else ``None``."""
    if not isinstance(call.func, cst.Attribute):
        return None
    m = call.func.attr.value
    if m in _TO_LOW_METHODS and not call.args:
        return "low"
    if m in _TO_HIGH_METHODS and not call.args:
        return "high"
    if m in ("to", "type"):
        for a in call.args:
            if a.keyword is not None and a.keyword.value != "dtype":
                continue
            q = rule.ctx.qualname(a.value) or ""
            if q in _LOWP_DTYPES:
                return "low"
            if q in _HIGHP_DTYPES:
                return "high"
            if a.keyword is None and not isinstance(a.value, (cst.Name, cst.Attribute)):
                continue
            return "unknown" if a.keyword is not None or m == "type" else None
    if m in ("type_as",):
        return "unknown"
    return None


class _LowP:
    """Whether an expression is known to be float16/bfloat16 given the low-precision local names."""

    def __init__(self, rule: Rule, low: set[str]) -> None:
        self.rule = rule
        self.low = low

    def __call__(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self.low
        if isinstance(node, cst.Call):
            c = _cast(self.rule, node)
            if c == "low":
                return True
            if c in ("high", "unknown"):
                return False
            q = self.rule.ctx.qualname(node.func) or ""
            if q in ops.BATCHED_MATMUL:
                return any(self(a.value) for a in node.args if a.keyword is None)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                    "transpose", "permute", "view", "reshape", "contiguous", "masked_fill", "mul", "div",
                    "matmul", "bmm", "unsqueeze", "squeeze", "clone", "__getitem__"):
                return self(node.func.value) or (
                    node.func.attr.value in ("matmul", "bmm") and bool(node.args) and self(node.args[0].value))
            return False
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.MatrixMultiply):
                return self(node.left) or self(node.right)
            return self(node.left) or self(node.right) if isinstance(
                node.left, (cst.Name, cst.Call, cst.BinaryOperation)) else self(node.right)
        if isinstance(node, cst.Subscript):
            return self(node.value)
        return False


@register
class LowPrecisionSoftmax(_FunctionRule):
    """ATT604 (info): softmax of float16/bfloat16 scores without ``dtype=torch.float32``."""

    code = "ATT604"
    name = "low-precision-softmax"
    severity = "info"
    default_enabled = False
    summary = "softmax of fp16/bf16 scores without dtype=torch.float32"
    tokens = ("half", "bfloat16", "float16")

    def visit_Call(self, node: cst.Call) -> None:
        q = self.ctx.qualname(node.func) or ""
        if q in _SOFTMAX or (isinstance(node.func, cst.Attribute) and node.func.attr.value == "softmax"
                             and not q.startswith("torch.")):
            self._frames[-1].softmaxes.append(node)

    def check(self, fr: _Frame) -> None:
        if not fr.softmaxes:
            return
        low: set[str] = set()
        pred = _LowP(self, low)
        for name, value in fr.lowp_stmts:  # source order; a re-assignment may clear the flag
            if pred(value):
                low.add(name)
            else:
                low.discard(name)
        for call in fr.softmaxes:
            if arg(call, None, "dtype") is not None:
                continue
            q = self.ctx.qualname(call.func) or ""
            if q in _SOFTMAX:
                if not call.args or call.args[0].keyword is not None:
                    continue
                x = call.args[0].value
                if arg(call, 2, "_stacklevel") is not None and len([a for a in call.args if a.keyword is None]) > 3:
                    continue
            else:
                x = call.func.value
            if not pred(x) or not is_scores(self.ctx, x):
                continue
            self.report(call, f"softmax of {code(x)[:60]}, which is float16/bfloat16 here: the exponentials are "
                              f"summed in low precision; pass dtype=torch.float32 (and cast the weights back "
                              f"with .to(v.dtype))")
