"""Head layout of attention tensors, read from the score-provenance interpreter.

Attention kernels disagree on where the heads axis goes:

* ``F.scaled_dot_product_attention`` takes ``(B, H, L, d)`` ("(N, ..., L, E)", PyTorch docs);
* ``flash_attn_func`` / ``flash_attn_with_kvcache`` (flash-attention README) and xformers
  ``memory_efficient_attention`` (``(B, M, H, K)``, xformers docs) take ``(B, L, H, d)``.

Both layouts are 4-D, so a tensor in the wrong one runs silently and attends across heads instead
of positions.  :func:`layout` answers, for one expression node, ``"BHLD"`` (heads before tokens),
``"BLHD"`` (tokens before heads) or ``None`` (unknown), from the abstract values that
:mod:`attncheck.lint.analysis.provenance` recorded for that node (``Provenance.values``: axes in
atoms ``B``, ``L``, ``H``, ``d``).  A node evaluated in several contexts (a helper inlined at two
call sites) has a layout only when every context with a known layout agrees.

Also here: small syntactic helpers shared by the issue-6 rules (literal ints, call arguments,
``.repeat`` counts, GQA group factors).
"""
from __future__ import annotations

import re
from typing import Any

import libcst as cst

from attncheck.lint.analysis.provenance import Tensor, role_by_name
from attncheck.lint.analysis.syntax import arg_of as arg  # noqa: F401 - re-exported to the rules
from attncheck.lint.analysis.syntax import int_of  # noqa: F401 - re-exported to the rules
from attncheck.lint.analysis.syntax import source as code  # noqa: F401 - re-exported to the rules
from attncheck.lint.context import dotted_name


def _single(ax: tuple) -> str | None:
    return ax[0] if len(ax) == 1 else None


def layout_of_axes(axes: tuple | None) -> str | None:
    """``"BHLD"`` when a lone heads axis precedes a lone token axis, ``"BLHD"`` when the token
    axis precedes the heads axis and the heads axis is followed directly by the head dim; else
    ``None``.  ``axes`` is a provenance axes tuple (each axis a tuple of atoms)."""
    if axes is None:
        return None
    flat = [_single(a) for a in axes]
    if flat.count("H") != 1 or flat.count("L") != 1:
        return None
    h, l_ = flat.index("H"), flat.index("L")
    if flat[-1] != "d" and not (isinstance(axes[-1], tuple) and axes[-1][:1] == ("d",)):
        # the last axis must be the head dim (an unnamed per-head width is fine)
        last = axes[-1]
        if not (len(last) == 1 and str(last[0]).startswith("?")):
            return None
    if h < l_:
        return "BHLD"
    if h == len(flat) - 2:
        return "BLHD"
    return None


def values(ctx: Any, node: cst.CSTNode) -> list:
    """Abstract values provenance recorded for ``node`` (empty when never evaluated)."""
    return list(ctx.provenance.values.get(id(node), ()))


def tensors(ctx: Any, node: cst.CSTNode) -> list[Tensor]:
    return [v for v in values(ctx, node) if isinstance(v, Tensor)]


def layout(ctx: Any, node: cst.CSTNode) -> str | None:
    """Head layout of the tensor expression ``node``: ``"BHLD"``, ``"BLHD"`` or ``None``."""
    found = {layout_of_axes(t.axes) for t in tensors(ctx, node)}
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def is_scores(ctx: Any, node: cst.CSTNode) -> bool:
    """Whether ``node`` holds q·kᵀ-derived attention scores in some recorded context."""
    return any(t.scores for t in tensors(ctx, node))


# --------------------------------------------------------------------------- syntax helpers

def counts(call: cst.Call, skip: int = 0) -> list[cst.BaseExpression] | None:
    """The per-axis counts of ``t.repeat(a, b, ...)`` / ``t.repeat((a, b, ...))`` /
    ``torch.tile(t, (a, b, ...))`` (``skip`` leading positional args); ``None`` if starred."""
    pos = [a for a in call.args if a.keyword is None]
    if any(a.star for a in pos):
        return None
    pos = pos[skip:]
    if len(pos) == 1 and isinstance(pos[0].value, (cst.Tuple, cst.List)):
        els = pos[0].value.elements
        if any(isinstance(e, cst.StarredElement) for e in els):
            return None
        return [e.value for e in els]
    kw = [a for a in call.args if a.keyword is not None and a.keyword.value in ("repeats", "dims", "sizes")]
    if not pos and kw and isinstance(kw[0].value, (cst.Tuple, cst.List)):
        return [e.value for e in kw[0].value.elements]
    return [a.value for a in pos]


def root_name(node: cst.BaseExpression) -> str | None:
    """Leaf name of the object a method chain starts from: ``self.k_cache[...].float()`` → ``k_cache``."""
    while True:
        if isinstance(node, cst.Call):
            node = node.func
            if isinstance(node, cst.Attribute):
                node = node.value
            continue
        if isinstance(node, cst.Subscript):
            node = node.value
            continue
        break
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


_MASKISH = re.compile(r"mask|bias|pad|keep|valid|attn_weights|prob|weight", re.I)


def maskish(name: str | None) -> bool:
    return bool(name) and bool(_MASKISH.search(name or ""))


# a GQA group factor: query heads per kv head (HF ``num_key_value_groups``, Llama ``n_rep``)
_GROUP_NAME = re.compile(
    r"^(n_?rep|num_rep|rep_?kv|kv_?rep(eat)?|n_kv_rep|num_key_value_groups|key_value_groups|"
    r"n?(um)?_?kv_?groups?|num_queries_per_kv|queries_per_kv|n_queries_per_kv|q_per_kv|"
    r"num_heads_per_kv|heads_per_kv|gqa_ratio|gqa_groups?|gqa_factor|kv_group_num|group_?size|"
    r"n_?groups?|num_groups|groups?|num_q_per_kv|q_heads_per_kv|num_kv_groups)$", re.I)


def head_count(node: cst.BaseExpression) -> bool:
    """``num_heads``-like names, ``x.size(1)`` / ``x.shape[1]`` (the heads axis of (B, H, L, d))."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        d = dotted_name(node)
        return d is not None and role_by_name(d) == "H"
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
        a = arg(node, 0, "dim")
        return a is not None and int_of(a.value) == 1
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) \
            and node.value.attr.value == "shape" and len(node.slice) == 1 \
            and isinstance(node.slice[0].slice, cst.Index):
        return int_of(node.slice[0].slice.value) == 1
    return False


def group_factor(node: cst.BaseExpression, assigns: dict[str, list] | None = None, depth: int = 0) -> bool:
    """Whether ``node`` is a GQA group factor: a group-like name (``n_rep``,
    ``self.num_key_value_groups``, ``group``), a ratio of head counts (``num_heads //
    num_kv_heads``, ``q.size(1) // k.size(1)``), or a local name assigned one of those."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        d = dotted_name(node)
        leaf = d.rsplit(".", 1)[-1] if d else ""
        if _GROUP_NAME.match(leaf):
            return True
        if isinstance(node, cst.Name) and assigns and depth < 3:
            return any(group_factor(v, assigns, depth + 1) for v in assigns.get(node.value, ()))
        return False
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.FloorDivide, cst.Divide)):
        return head_count(node.left) and head_count(node.right)
    if isinstance(node, cst.Call) and dotted_name(node.func) in ("int",) and node.args:
        return group_factor(node.args[0].value, assigns, depth)
    return False
