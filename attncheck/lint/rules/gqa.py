"""Head-layout rules of fused kernels: ATT403 gqa-head-mapping, ATT404 layout-mismatch.

ATT403: in grouped-query attention (Ainslie et al. 2023, "GQA") query head ``h`` reads key/value
head ``h // n_rep``: HF's ``repeat_kv`` (``x[:, :, None].expand(B, H_kv, n_rep, L, d).reshape(B,
H_kv * n_rep, L, d)``), ``torch.repeat_interleave(x, n_rep, dim=1)`` and SDPA's ``enable_gqa=True``
all interleave.  ``x.repeat(1, n_rep, 1, 1)`` / ``torch.tile`` / ``x[:, None].expand(B, n_rep,
H_kv, L, d).reshape(...)`` *tile* instead (query head ``h`` reads kv head ``h % H_kv``): shapes
match, checkpoints trained with the standard mapping silently pair the wrong heads.  The rule
fires only where the repeat count is a GQA group factor (``n_rep``, ``num_key_value_groups``,
``num_heads // num_kv_heads``, ``q.size(1) // k.size(1)``, a local assigned one of those) and the
tensor is not a mask (masks: ATT209/ATT602).  einops ``repeat`` patterns are not checked (x-
transformers tiles with ``(r h)`` by its own, self-consistent convention).

ATT404: ``flash_attn_func`` & co. and xformers ``memory_efficient_attention`` take
``(B, L, H, d)``; ``F.scaled_dot_product_attention`` takes ``(B, H, L, d)``.  The layout of the
arguments comes from :mod:`attncheck.lint.analysis.layout` (score-provenance axes); unknown
layouts are never reported.
"""
from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from attncheck.lint.analysis import layout as lay
from attncheck.lint.analysis import ops
from attncheck.lint.analysis.layout import arg, code, counts, group_factor, int_of, maskish, root_name
from attncheck.lint.finding import Edit, Fix
from attncheck.lint.rule import Rule, register
from attncheck.lint import triggers as T

_TILE = ops.functions("shape", "tile")
_CAT = ops.functions("shape", "cat")


def _is_one(node: cst.BaseExpression) -> bool:
    return int_of(node) == 1


def _new_axis_pos(node: cst.BaseExpression) -> tuple[cst.BaseExpression, int] | None:
    """``x[:, None]`` / ``x[:, :, None, :, :]`` / ``x.unsqueeze(p)`` → (x, position of the new axis)."""
    if isinstance(node, cst.Subscript):
        idx = None
        for i, el in enumerate(node.slice):
            s = el.slice
            if isinstance(s, cst.Index) and isinstance(s.value, cst.Name) and s.value.value == "None":
                if idx is not None:
                    return None
                idx = i
            elif isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None:
                continue
            elif isinstance(s, cst.Index) and isinstance(s.value, cst.Ellipsis):
                if idx is None:
                    return None  # x[..., None]: counted from the end
                continue
            else:
                return None
        return (node.value, idx) if idx is not None else None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "unsqueeze":
        a = arg(node, 0, "dim")
        p = int_of(a.value) if a is not None else None
        if p is not None and p >= 0:
            return node.func.value, p
    return None



def _copies(seq: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``(x, n)`` when ``seq`` is ``n`` copies of one tensor: ``[x] * n``, ``n * [x]``,
    ``(x,) * n``, ``[x for _ in range(n)]`` (a comprehension whose element ignores the loop)."""
    if isinstance(seq, cst.BinaryOperation) and isinstance(seq.operator, cst.Multiply):
        lst, n = (seq.left, seq.right) if isinstance(seq.left, (cst.List, cst.Tuple)) else (seq.right, seq.left)
        if isinstance(lst, (cst.List, cst.Tuple)) and len(lst.elements) == 1 \
                and isinstance(lst.elements[0], cst.Element):
            return lst.elements[0].value, n
        return None
    if isinstance(seq, (cst.ListComp, cst.GeneratorExp)):
        f = seq.for_in
        if f.inner_for_in is not None or f.ifs or not isinstance(f.target, cst.Name):
            return None
        it = f.iter
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"
                and len(it.args) == 1):
            return None
        elt = seq.elt
        if not isinstance(elt, (cst.Name, cst.Attribute)) or root_name(elt) == f.target.value:
            return None
        return elt, it.args[0].value
    return None

class _Frame:
    def __init__(self) -> None:
        self.assigns: dict[str, list[cst.BaseExpression]] = {}
        self.calls: list[cst.Call] = []


@register
class GqaHeadMapping(Rule):
    """ATT403: KV heads tiled (``repeat``/``tile``/``expand`` in the wrong order) instead of interleaved."""

    code = "ATT403"
    name = "gqa-head-mapping"
    severity = "error"
    summary = "KV heads expanded with repeat/tile where repeat_interleave (or enable_gqa) is needed"
    tokens = ("repeat", "tile", "expand", "cat")
    pattern = T.REPEAT
    context = T.GROUP_CONTEXT
    context_scope = "unit"  # the group factor is an argument or a local of the same function

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._frames: list[_Frame] = [_Frame()]

    # one frame per function, per class body and for the module's own statements: a group
    # factor assigned in one scope does not explain a repeat in another (the region parse keeps
    # a scope's statements together, not the statements of other scopes)
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append(_Frame())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._check(self._frames.pop())

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._frames.append(_Frame())

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._check(self._frames.pop())

    def leave_Module(self, node: cst.Module) -> None:
        self._check(self._frames.pop())

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self._frames[-1].assigns.setdefault(t.target.value, []).append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        self._frames[-1].calls.append(node)

    def _head_axis(self, recv: cst.BaseExpression) -> int:
        return 2 if lay.layout(self.ctx, recv) == "BLHD" else 1

    def _check(self, fr: _Frame) -> None:
        for call in fr.calls:
            func = call.func
            q = self.ctx.qualname(func) or ""
            if q in _TILE and call.args:
                recv = call.args[0].value
                cs = counts(call, skip=1)
                self._tile(call, recv, cs, fr, "torch.tile")
            elif isinstance(func, cst.Attribute) and func.attr.value in ("repeat", "tile") \
                    and not q.startswith(("torch.", "einops.", "numpy.")):
                self._tile(call, func.value, counts(call), fr, f".{func.attr.value}")
            elif isinstance(func, cst.Attribute) and func.attr.value in ("reshape", "view", "flatten") \
                    and not q.startswith("torch."):
                self._expand_merge(call, func.value, fr)
            elif q in _CAT and call.args:
                self._cat_copies(call, fr)

    def _cat_copies(self, call: cst.Call, fr: _Frame) -> None:
        """``torch.cat([x] * n_rep, dim=1)``: n_rep copies of all kv heads, one after the other,
        is a tile (the same mapping as ``x.repeat(1, n_rep, 1, 1)``)."""
        copies = _copies(call.args[0].value)
        if copies is None:
            return
        recv, n = copies
        d = arg(call, 1, "dim")
        dim = int_of(d.value) if d is not None else 0
        if maskish(root_name(recv)) or not group_factor(n, fr.assigns) or dim != self._head_axis(recv):
            return
        self.report(call, f"torch.cat({code(call.args[0].value)[:50]}, dim={dim}) tiles the key/value "
                          f"heads: query head h then reads kv head h % H_kv, but grouped-query attention "
                          f"maps it to h // {code(n)}: use {code(recv)[:40]}.repeat_interleave({code(n)}, "
                          f"dim={dim}) (or SDPA enable_gqa=True)")

    def _tile(self, call: cst.Call, recv: cst.BaseExpression, cs: list | None, fr: _Frame, how: str) -> None:
        if not cs or maskish(root_name(recv)):
            return
        non_one = [i for i, c in enumerate(cs) if not _is_one(c)]
        if len(non_one) != 1:
            return
        i = non_one[0]
        n = cs[i]
        if not group_factor(n, fr.assigns):
            return
        if len(cs) == 4 and i == self._head_axis(recv):
            dim = i
        elif len(cs) == 3 and i == 0:
            dim = 0  # (B·H_kv, L, d): tiling the merged axis
        else:
            return
        fix = None
        if how == ".repeat" and isinstance(call.func, cst.Attribute):
            content = f"{code(recv)}.repeat_interleave({code(n)}, dim={dim})"
            pos = self.get_metadata(PositionProvider, call)
            off = self.ctx.line_offset
            fix = Fix(f"replace with {content}",
                      (Edit(pos.start.line + off, pos.start.column, pos.end.line + off, pos.end.column, content),),
                      "unsafe")
        factor = code(n)
        group = factor if isinstance(n, (cst.Name, cst.Attribute, cst.Integer)) else f"({factor})"
        what = f"{code(recv)[:40]}{how}(...)" if how.startswith(".") else f"{how}({code(recv)[:40]}, ...)"
        self.report(call, f"{what} tiles the key/value heads by {factor}: query head h then "
                          f"reads kv head h % H_kv, but grouped-query attention maps it to h // {group}: use "
                          f"{code(recv)[:40]}.repeat_interleave({code(n)}, dim={dim}) (or SDPA enable_gqa=True)",
                    fix)

    def _expand_merge(self, call: cst.Call, recv: cst.BaseExpression, fr: _Frame) -> None:
        """``x[:, None].expand(B, n_rep, H_kv, L, d).reshape(B, H, L, d)``: the new axis before the heads."""
        if isinstance(recv, cst.Name):
            vals = fr.assigns.get(recv.value, ())
            if len(vals) != 1:
                return
            recv = vals[0]
        if not (isinstance(recv, cst.Call) and isinstance(recv.func, cst.Attribute)
                and recv.func.attr.value == "expand"):
            return
        na = _new_axis_pos(recv.func.value)
        if na is None:
            return
        base, p = na
        if maskish(root_name(base)):
            return
        sizes = counts(recv)
        if not sizes or p >= len(sizes) or not group_factor(sizes[p], fr.assigns):
            return
        if call.func.attr.value == "flatten":
            a0 = arg(call, 0, "start_dim")
            a1 = arg(call, 1, "end_dim")
            if a0 is None or a1 is None or int_of(a0.value) != p or int_of(a1.value) != p + 1:
                return
        elif len(sizes) != 5:
            return
        h = self._head_axis(base)
        if p != h:
            return  # new axis right after the heads (p == h + 1) interleaves: HF's repeat_kv
        self.report(call, f"the group axis of size {code(sizes[p])} is inserted before the kv heads "
                          f"(new axis at dim {p}) and merged into them: this tiles the heads (query head h reads "
                          f"kv head h % H_kv); insert it after the heads, x[:, :, None].expand(B, H_kv, "
                          f"{code(sizes[p])}, L, d).reshape(B, -1, L, d), or use repeat_interleave(..., dim={h})")


# --------------------------------------------------------------------------- ATT404



@register
class LayoutMismatch(Rule):
    """ATT404: (B, H, L, d) tensors passed to a (B, L, H, d) API, or (B, L, H, d) tensors to SDPA."""

    code = "ATT404"
    name = "layout-mismatch"
    severity = "error"
    summary = "(B, H, L, D) tensors passed to a (B, L, H, D) API (flash_attn_func, xformers), or the reverse"
    tokens = ("flash_attn", "memory_efficient_attention", "scaled_dot_product_attention")
    pattern = T.FUSED

    def visit_Call(self, node: cst.Call) -> None:
        q = self.ctx.qualname(node.func) or ""
        leaf = q.rsplit(".", 1)[-1]
        op = ops.kernel(q)
        if op is None or op.layout is None:
            return
        if op.kind == "sdpa":
            want, bad, api = "BHLD", "BLHD", "F.scaled_dot_product_attention"
        elif q == leaf or "flash_attn" in q or "xformers" in q:
            want, bad, api = "BLHD", "BHLD", leaf
        else:
            return
        wrong = []
        for slot in (op.q, op.k, op.v):
            if slot is None:
                continue
            a = arg(node, slot.pos, slot.kw)
            if a is None:
                continue
            lo = lay.layout(self.ctx, a.value)
            if lo == bad:
                wrong.append(code(a.value)[:30])
            elif lo == want:
                return  # one argument in the right layout: the others follow it (or are unknown)
        if not wrong:
            return
        if want == "BLHD":
            msg = (f"{api} takes (B, L, H, d) but {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} "
                   f"(B, H, L, d): it attends across heads instead of positions; drop the transpose(1, 2) "
                   f"(view as (B, L, H, d)) or pass .transpose(1, 2) of each")
        else:
            msg = (f"F.scaled_dot_product_attention takes (B, H, L, d) but {', '.join(wrong)} "
                   f"{'is' if len(wrong) == 1 else 'are'} (B, L, H, d): it attends across heads instead of "
                   f"positions; pass .transpose(1, 2) of each (and transpose the output back)")
        self.report(node, msg)
