"""Info rules (off by default; ``--select ATT6`` or ``ALL``): ATT601 unfused-attention, ATT602
mask-repeat-broadcast, ATT603 fully-masked-row-nan.

ATT601: ``softmax(q·kᵀ) @ v`` written by hand materialises the (B, H, L_q, L_k) weights;
``F.scaled_dot_product_attention`` computes the same with a fused (flash / memory-efficient) kernel
in O(L) memory (PyTorch SDPA docs).  Reported only where the weights are used for nothing but the
product with v: a function that returns, stores, appends or passes the weights on (HF's
``output_attentions``, a visualisation hook) needs them and is not reported, nor is a manual path
in a function that also calls a fused kernel (the fallback branch of ``if self.fused_attn:``).

ATT602: ``mask.repeat(1, H, 1, 1)`` copies a (B, 1, L_q, L_k) mask once per head; ``masked_fill``,
``+`` and SDPA broadcast a size-1 head axis for free (PyTorch broadcasting semantics).  Only a
repeat by a head count (``num_heads``, ``config.num_attention_heads``) on a tensor named as a mask;
not reported when the copy is then reshaped / flattened (``(B·H, L, S)`` masks for
``nn.MultiheadAttention`` need the copy).

ATT603: ``masked_fill(m, -inf)`` (or an additive ``-inf`` mask) on attention scores before a softmax returns NaN for a
row whose every key is masked (``exp(-inf) / 0``), e.g. a fully padded sample under a key padding
mask.  Not reported when the mask algebra proves every row keeps its diagonal (a causal mask), or
when the function guards NaN (``nan_to_num``, ``isnan``, or re-masks the weights after the softmax).
"""
from __future__ import annotations

import re
from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from attncheck.lint.analysis import ops
from attncheck.lint.analysis.layout import code, counts, head_count, int_of, is_scores, root_name
from attncheck.lint.analysis.masks import DIAG
from attncheck.lint.context import dotted_name
from attncheck.lint.finding import Edit, Fix
from attncheck.lint.rule import Rule, register
from attncheck.lint.suppression import physical_lines
from attncheck.lint import triggers as T
from attncheck.lint import walk

_MATMUL = ops.BATCHED_MATMUL
#: methods the attention weights go through on their way to ``@ v`` (same values: casts, copies,
#: fills, views, ``nan_to_num``)
_PASS_METHODS = (ops.FLOAT_CASTS | ops.methods("cast", "") | ops.methods("copy") | ops.methods("fill")
                 | ops.methods("shape", "reshape", "insert") | ops.methods("pointwise", "nan_to_num"))
_PASS_FUNCS = ops.F_DROPOUT | ops.functions("pointwise", "nan_to_num")


def _function_text(rule: Rule, fn: cst.FunctionDef) -> str:
    """The lines of ``fn`` as ``code_for_node`` renders them (the comment lines before it, its
    decorators, body and closing comment lines), read from the file's source: the parsed text
    has annotations blanked where only some functions are parsed (:mod:`attncheck.lint.regions`),
    and a kernel named in an annotation counts as it does when the whole file is parsed."""
    code = rule.ctx.module.code_for_node
    text = code(fn)
    before = len(fn.leading_lines) + len(fn.lines_after_decorators) \
        + sum(code(d).count("\n") for d in fn.decorators)
    first = rule.get_metadata(PositionProvider, fn).start.line + rule.ctx.line_offset - before - 1
    lines = rule.__dict__.get("_source_lines")
    if lines is None:
        lines = rule._source_lines = physical_lines(rule.ctx.source)
    return "".join(lines[first:first + text.count("\n") + (not text.endswith("\n"))])


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    return list(node.children)


def _parents(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    out: dict[int, cst.CSTNode] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        for c in _children(n):
            out[id(c)] = n
            stack.append(c)
    return out


@register
class UnfusedAttention(Rule):
    """ATT601: manual softmax(q·kᵀ)·v whose weights are needed for nothing else."""

    code = "ATT601"
    name = "unfused-attention"
    severity = "info"
    default_enabled = False
    summary = "manual softmax(q·kᵀ)·v where SDPA would avoid the O(L²) buffer"
    tokens = ("softmax", "Softmax")
    pattern = T.SOFTMAX

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._fns: list[list] = []
        self._ids: set[int] | None = None

    def _softmax_ids(self) -> set[int]:
        if self._ids is None:
            self._ids = {id(e.node) for e in self.ctx.provenance.scale_events if e.kind == "softmax"}
        return self._ids

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._fns.append([])

    def visit_Call(self, node: cst.Call) -> None:
        if self._fns and id(node) in self._softmax_ids():
            self._fns[-1].append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        calls = self._fns.pop()
        if not calls:
            return
        text = _function_text(self, node)
        if any(t in text for t in ("scaled_dot_product_attention", "flash_attn", "memory_efficient_attention")):
            return  # the manual path is the fallback of a fused branch (timm's `if self.fused_attn:`)
        parents = _parents(node.body)
        for call in calls:
            if self._fused_candidate(call, node, parents):
                self.report(call, "softmax(q·kᵀ) materialises the (B, H, L_q, L_k) attention weights only to "
                                  "multiply them with v: F.scaled_dot_product_attention(q, k, v, attn_mask=..., "
                                  "dropout_p=..., scale=...) computes the same without the O(L²) buffer")

    def _climb(self, node: cst.CSTNode, parents: dict) -> cst.CSTNode:
        """Walk up through pass-through wrappers (dropout, casts, masked_fill) of ``node``."""
        while True:
            p = parents.get(id(node))
            if isinstance(p, cst.Arg):
                call = parents.get(id(p))
                if isinstance(call, cst.Call) and call.args and call.args[0] is p:
                    q = self.ctx.qualname(call.func) or ""
                    leaf = q.rsplit(".", 1)[-1].lower()
                    if q in _PASS_FUNCS or "dropout" in leaf or leaf in ("drop", "attn_drop"):
                        node = call
                        continue
                return node
            if isinstance(p, cst.Attribute) and p.value is node:
                call = parents.get(id(p))
                if isinstance(call, cst.Call) and call.func is p and p.attr.value in _PASS_METHODS:
                    node = call
                    continue
                return node
            if isinstance(p, cst.Subscript) and p.value is node:
                node = p
                continue
            return node

    def _use(self, node: cst.CSTNode, parents: dict) -> tuple[str, str | None]:
        """("matmul"|"assign"|"escape", target name) for one occurrence of the weights."""
        node = self._climb(node, parents)
        p = parents.get(id(node))
        if isinstance(p, cst.BinaryOperation) and isinstance(p.operator, cst.MatrixMultiply):
            return "matmul", None
        if isinstance(p, cst.Arg):
            call = parents.get(id(p))
            if isinstance(call, cst.Call):
                q = self.ctx.qualname(call.func) or ""
                if q in _MATMUL or q.endswith(".einsum"):
                    return "matmul", None
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("matmul", "bmm"):
                    return "matmul", None
            return "escape", None
        if isinstance(p, cst.Attribute) and p.value is node:
            call = parents.get(id(p))
            if isinstance(call, cst.Call) and p.attr.value in ("matmul", "bmm"):
                return "matmul", None
            return "escape", None
        if isinstance(p, cst.Assign) and p.value is node and len(p.targets) == 1 and \
                isinstance(p.targets[0].target, cst.Name):
            return "assign", p.targets[0].target.value
        if isinstance(p, cst.AnnAssign) and p.value is node and isinstance(p.target, cst.Name):
            return "assign", p.target.value  # ``w: Tensor = softmax(...)``
        return "escape", None

    def _fused_candidate(self, call: cst.Call, fn: cst.FunctionDef, parents: dict) -> bool:
        kind, name = self._use(call, parents)
        if kind == "escape":
            return False
        if kind == "matmul":
            return True
        names = {name}
        consumed = False
        done: set[int] = set()
        changed = True
        while changed:
            changed = False
            stack: list[cst.CSTNode] = [fn.body]
            while stack:
                n = stack.pop()
                if isinstance(n, cst.Name) and n.value in names and id(n) not in done:
                    p = parents.get(id(n))
                    if isinstance(p, (cst.AssignTarget, cst.Param)) or \
                            isinstance(p, cst.AnnAssign) and p.target is n:
                        continue
                    done.add(id(n))
                    k, tgt = self._use(n, parents)
                    if k == "escape":
                        return False
                    if k == "matmul":
                        consumed = True
                    elif tgt is not None and tgt not in names:
                        names.add(tgt)
                        changed = True
                    continue
                if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and n is not fn.body:
                    continue
                stack.extend(_children(n))
        return consumed


_HEADS_RE = re.compile(r"(^|_)(n_?)?heads?$|^(num|n)_(\w+_)?(attention_)?heads$|^nh(ead)?$", re.I)


def _heads(node: cst.BaseExpression) -> bool:
    """A head count: ``num_heads``, ``self.n_head``, ``config.num_attention_heads``, ``x.size(1)``."""
    if head_count(node):
        return True
    d = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    return bool(d) and bool(_HEADS_RE.search(d.rsplit(".", 1)[-1]))


class _MaskRepeatFrame:
    def __init__(self) -> None:
        self.repeats: list[tuple[cst.Call, str | None]] = []
        self.reshaped_ids: set[int] = set()
        self.reshaped_names: set[str] = set()


@register
class MaskRepeatBroadcast(Rule):
    """ATT602: a mask copied per head with ``.repeat(1, H, 1, 1)`` where broadcasting suffices."""

    code = "ATT602"
    name = "mask-repeat-broadcast"
    severity = "info"
    default_enabled = False
    summary = "mask copied per head with .repeat; broadcasting does it for free"
    tokens = ("repeat",)

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._frames = [_MaskRepeatFrame()]
        self._assign_of: dict[int, str] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append(_MaskRepeatFrame())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._check(self._frames.pop())

    def leave_Module(self, node: cst.Module) -> None:
        self._check(self._frames.pop())

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._assign_of[id(node.value)] = node.targets[0].target.value

    def visit_Call(self, node: cst.Call) -> None:
        fr = self._frames[-1]
        f = node.func
        if not isinstance(f, cst.Attribute):
            return
        if f.attr.value in ("flatten", "view", "reshape", "unflatten", "contiguous") or \
                f.attr.value in ("masked_fill_", "copy_", "mul_", "add_"):
            fr.reshaped_ids.add(id(f.value))
            if isinstance(f.value, cst.Name):
                fr.reshaped_names.add(f.value.value)
        if f.attr.value != "repeat":
            return
        cs = counts(node)
        if not cs or len(cs) != 4 or [int_of(c) == 1 for c in cs] != [True, False, True, True]:
            return
        root = root_name(f.value) or ""
        if "mask" not in root.lower() or not _heads(cs[1]):
            return
        fr.repeats.append((node, self._assign_of.get(id(node))))

    def _check(self, fr: _MaskRepeatFrame) -> None:
        for call, name in fr.repeats:
            if id(call) in fr.reshaped_ids or (name is not None and name in fr.reshaped_names):
                continue
            cs = counts(call)
            n = code(cs[1])
            pos = self.get_metadata(PositionProvider, call.func.attr)
            end = self.get_metadata(PositionProvider, call)
            off = self.ctx.line_offset
            content = f"expand(-1, {n}, -1, -1)"
            fix = Fix(f"replace with .{content}",
                      (Edit(pos.start.line + off, pos.start.column, end.end.line + off, end.end.column, content),),
                      "unsafe")
            self.report(call, f".repeat(1, {n}, 1, 1) copies the mask once per head; masked_fill, + and SDPA "
                              f"broadcast a size-1 head axis: keep it (B, 1, L_q, L_k) or use "
                              f".expand(-1, {n}, -1, -1) (a view, no copy)", fix)


class _FunctionDefs(cst.CSTVisitor):
    """Every ``def`` of a tree, nested ones too, in source order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.found.append(node)


@register
class FullyMaskedRowNan(Rule):
    """ATT603: ``-inf`` fill before softmax where a whole row can be masked (padding)."""

    code = "ATT603"
    name = "fully-masked-row-nan"
    severity = "info"
    default_enabled = False
    summary = "-inf fill then softmax where whole rows can be masked (padding)"
    tokens = ("inf",)

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._fns: list[tuple[int, int, str]] | None = None

    def _functions(self) -> list[tuple[int, int, str]]:
        """(first line, last line, source) of every function in the module, nested ones too.
        Read from the tree here, not gathered by ``visit_FunctionDef``: the engine's walk skips
        definitions where no visiting rule's trigger matched, and the enclosing function of a
        mask use must not depend on that."""
        if self._fns is None:
            defs = _FunctionDefs()
            walk.visit(self.ctx.module, defs)
            self._fns = []
            for fn in defs.found:
                pos = self.get_metadata(PositionProvider, fn)
                self._fns.append((pos.start.line, pos.end.line, _function_text(self, fn)))
        return self._fns

    def leave_Module(self, node: cst.Module) -> None:
        for use in self.ctx.masks.uses:
            fill = use.fill if use.fill is not None else (use.mask.fill if use.mask is not None else None)
            if fill is None or fill.kind != "neg_inf":
                continue
            if use.consumer not in ("masked_fill", "where", "index_assign", "additive"):
                continue
            if not use.reaches_softmax or use.target_tag == "probs":
                continue
            if use.target_tag != "scores" and not (use.target is not None and is_scores(self.ctx, use.target)):
                continue  # router / vocabulary logits, not attention scores
            if any(u.target_tag == "probs" and u.function == use.function for u in self.ctx.masks.uses):
                continue  # the weights are re-masked after the softmax (zeroes NaN rows, e.g. CPM-Ant)
            b = use.blocked
            if b is not None and b[DIAG] is False:
                continue  # every row keeps its diagonal (causal): never fully masked
            line = self.get_metadata(PositionProvider, use.node).start.line
            inner = [f for f in self._functions() if f[0] <= line <= f[1]]
            text = min(inner, key=lambda f: f[1] - f[0])[2] if inner else self.ctx.source
            if any(g in text for g in ("nan_to_num", "isnan", "isinf", "nan_mask")):
                continue
            where = code(use.node)[:40]
            self.report(use.node, f"scores are filled with -inf where {where} blocks them: a row whose every key is "
                                  f"blocked (a fully padded sample) becomes NaN after softmax (0/0); fill with "
                                  f"torch.finfo(scores.dtype).min, or zero those rows after the softmax")
