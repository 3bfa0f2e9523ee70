"""ATT301 softmax-wrong-dim: softmax over an axis other than the key axis of attention scores.

Attention weights are ``softmax(scores, dim=-1)`` over the key axis ``L_k`` of ``(…, L_q, L_k)``
scores (Vaswani et al. 2017).  Implicit ``dim`` follows PyTorch's legacy rule
(``torch.nn.functional._get_softmax_dim``): dim 0 for 0-, 1- and 3-D inputs, else dim 1.
Fires only on scores established by the score-provenance analysis with a known rank/key axis.
A softmax over another axis whose weights are then renormalised over the keys (``p / p.sum(-1,
keepdim=True)``, ``F.normalize(p, p=1, dim=-1)``) is a deliberate design and is not reported:
slot attention (Locatello et al. 2020) and GroupViT (Xu et al. 2022) let queries compete for each
key, then average over the keys.
"""
from __future__ import annotations

from typing import Any

import libcst as cst

from attncheck.lint import walk
from attncheck.lint.analysis import ops
from attncheck.lint.finding import Fix
from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T
from attncheck.lint.rules import _edits

_SOFTMAX_MODULES = ops.modules("softmax", "softmax")


def implicit_dim(rank: int) -> int:
    """PyTorch's implicit softmax dim for an input of ``rank`` dims."""
    return 0 if rank in (0, 1, 3) else 1


def wrong_axis(dim: int | None, implicit: bool, rank: int | None, key_axis: int | None) -> int | None:
    """The (non-negative when possible) wrong dim, or ``None`` when the softmax is over the key axis or unknown."""
    if key_axis is None:
        return None
    if implicit:
        if rank is None:
            return None
        dim = implicit_dim(rank)
    if dim is None:
        return None
    if dim >= 0:
        if rank is None:
            return None
        nd = dim - rank
    else:
        nd = dim
    if rank is not None and not (-rank <= nd < 0):
        return None
    return None if nd == key_axis else dim


class _SelfAttrValues(cst.CSTVisitor):
    """The values assigned to ``self.<attr>`` (``self.<attr> = value``), in source order."""

    def __init__(self, attr: str) -> None:
        super().__init__()
        self.attr = attr
        self.found: list[cst.BaseExpression] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            tt = t.target
            if isinstance(tt, cst.Attribute) and isinstance(tt.value, cst.Name) \
                    and tt.value.value == "self" and tt.attr.value == self.attr:
                self.found.append(node.value)


@register
class SoftmaxWrongDim(Rule):
    code = "ATT301"
    name = "softmax-wrong-dim"
    severity = "error"
    summary = "softmax over an axis other than the key axis of the scores (incl. implicit dim)"
    tokens = ("softmax", "Softmax", "exp")
    pattern = T.SOFTMAX + T.EXP  # exp(s) / exp(s).sum(dim): a softmax written out

    def visit_Module(self, node: Any) -> None:
        events = self.ctx.provenance.softmax_events
        # a softmax whose weights are renormalised over the keys in some context (slot / GroupViT
        # assignment, inverted attention) is a deliberate choice of axis
        seen = {id(ev.node) for ev in events if ev.renormalised}
        # weights that meet the values in no analysed context are not used as attention over
        # keys here (GroupViT's soft assignment map over the group tokens, returned as is)
        used = {id(ev.node) for ev in events if ev.scale_event is not None and ev.scale_event.to_v}
        seen |= {id(ev.node) for ev in events if id(ev.node) not in used}
        for ev in events:
            bad = wrong_axis(ev.dim, ev.implicit, ev.rank, ev.key_axis)
            if bad is None or id(ev.node) in seen:
                continue
            seen.add(id(ev.node))
            shape = f"{ev.rank}-D " if ev.rank else ""
            key = ev.key_axis + ev.rank if ev.rank else ev.key_axis
            how = f"implicit dim (= {bad})" if ev.implicit else f"dim={bad}"
            fix = self._fix(ev) if ev.key_axis == -1 else None
            self.report(ev.node, f"softmax over {how} of {shape}attention scores whose key axis is dim {key}: "
                                 f"weights must sum to 1 over the keys: use dim=-1", fix)

    def _fix(self, ev: Any) -> Fix | None:
        """``dim=-1`` at the softmax call, or at the ``nn.Softmax(...)`` built once in the class."""
        call = ev.node
        if not isinstance(call, cst.Call):
            return None
        if ev.func == "nn.Softmax":
            call = self._module_ctor(call)
            if call is None:
                return None
            pos = 0
        else:
            pos = 0 if ev.func == "Tensor.softmax" else 1
        arg = _edits.call_arg(call, pos, "dim")
        if arg is None:
            if any(a.keyword is None and not a.star for a in call.args[pos:]) or any(a.star for a in call.args):
                return None
            return _edits.unsafe("add dim=-1", _edits.add_arg(self, call, "dim=-1"))
        return _edits.unsafe("use dim=-1", _edits.replace(self, arg.value, "-1"))

    def _module_ctor(self, call: cst.Call) -> cst.Call | None:
        """The single ``self.<name> = nn.Softmax(...)`` of the class that calls ``self.<name>(...)``."""
        f = call.func
        if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self"):
            return None
        cls = _edits.enclosing(self, call, cst.ClassDef)
        if cls is None:
            return None
        v = _SelfAttrValues(f.attr.value)
        walk.visit(cls, v)
        found = v.found
        if len(found) != 1 or not isinstance(found[0], cst.Call):
            return None
        q = self.ctx.qualname(found[0].func) or ""
        return found[0] if q in _SOFTMAX_MODULES else None
