"""ATT401/ATT402: splitting or merging attention heads with view/reshape but no transpose.

A ``view``/``reshape`` never reorders memory: (B, L, H·d) → (B, H, L, d) or (B·H, L, d) must go
through (B, L, H, d) and ``transpose(1, 2)``; the merge (B, H, L, d) → (B, L, H·d) must
``transpose(1, 2)`` first (PyTorch ``torch.Tensor.view`` docs; ``nn.MultiheadAttention``'s
``F.multi_head_attention_forward``).  Fires on ``ctx.provenance.view_events``: layouts established
by the score-provenance analysis (atoms B, L, H, d).  ATT401 also fires at a split
(B, L, H·d) → (B, L, H, d) that reaches the q·kᵀ or weights·v matmul without ``transpose(1, 2)``
(the matmul then contracts over the heads axis); the same layout passed to SDPA is ATT404's
(layout-mismatch) and the (B, L, H, d) layout that flash-attn / xformers take is correct.

A view is reported only where the run that sees it forms attention in this file's code
(:attr:`~attncheck.lint.analysis.provenance.ViewEvent.in_attention`): a view of a tensor that
never meets q·kᵀ, weights·v, a softmax over scores or a fused kernel there is not known to split
or merge attention heads.
"""
from __future__ import annotations

from typing import Any

from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T


def _fmt(axes: tuple) -> str:
    def ax(a: tuple) -> str:
        names = [x if x in ("B", "L", "H", "d") else ("…" if x in ("*", "REST") else "?") for x in a]
        return "·".join(names)
    return "(" + ", ".join(ax(a) for a in axes) + ")"


class _HeadRule(Rule):
    severity = "error"
    tokens = ("view", "reshape")
    #: a view event counts only in a run that forms attention (:attr:`ViewEvent.in_attention`),
    #: which needs one of these in the function run or a same-file helper inlined into it
    pattern = T.SCORES + T.FUSED

    def visit_Module(self, node: Any) -> None:
        seen = set()
        for ev in self.ctx.provenance.view_events:
            if ev.code != self.code or not ev.in_attention or id(ev.node) in seen:
                continue
            seen.add(id(ev.node))
            self.report(ev.node, self.message(ev))


@register
class HeadSplitWithoutTranspose(_HeadRule):
    code = "ATT401"
    name = "head-split-without-transpose"
    summary = "(B, L, H·d) viewed as (B, H, L, d) or (B·H, L, d) without swapping L and H"

    def message(self, ev: Any) -> str:
        if getattr(ev, "reason", "view") == "scores":
            return (f"heads split as {_fmt(ev.out_axes)} but never transposed: q·kᵀ / weights·v then run over "
                    f"the heads axis instead of the tokens: add .transpose(1, 2) to get (B, H, L, d)")
        return (f"heads split by viewing {_fmt(ev.in_axes)} as {_fmt(ev.out_axes)}: the heads axis jumps over "
                f"the token axis, mixing tokens: view(B, L, H, d).transpose(1, 2) instead")


@register
class HeadMergeWithoutTranspose(_HeadRule):
    code = "ATT402"
    name = "head-merge-without-transpose"
    summary = "(B, H, L, d) viewed as (B, L, H·d) without transposing back"

    def message(self, ev: Any) -> str:
        return (f"heads merged by viewing {_fmt(ev.in_axes)} as {_fmt(ev.out_axes)} without moving the heads "
                f"axis back: transpose(1, 2).contiguous() (or (B·H) → (B, H) then transpose) before the view")
