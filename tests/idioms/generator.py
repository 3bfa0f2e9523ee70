"""Seeded generator of small attention modules across idiom axes.

``generate(seed)`` returns a :class:`Variant`: the module's source text, the fault injected (a
lint rule code, or ``None`` for a correct module) and what the execution oracle needs to build
a reference (head counts, projection attribute names, whether the module is causal).

Every module defines ``class Attention(nn.Module)`` built as
``Attention(d_model=C, n_heads=H, n_kv_heads=H_kv, dropout=p, max_len=N)`` whose ``forward``
maps ``x`` of shape ``(B, L, C)`` (``(L, B, C)`` for the fairseq shape) to the same shape:
projections, a head split to ``(B, H, L, D)`` (or ``(B·H, L, D)``, or heads-last
``(B, L, H, D)`` for einsum), attention, a head merge and an output projection.  The reference
is ``F.scaled_dot_product_attention`` on the module's own projection weights with scale
``D ** -0.5`` and, for causal modules, a causal mask (``is_causal=True``).

Axes (one spelling drawn per axis; ``Variant.axes`` records the draw):
code shape (nanoGPT, Hugging Face ``eager_attention_forward``, lucidrains/einops, timm, fairseq),
path (manual softmax or SDPA), scores op (``@``, ``matmul``, ``einsum`` incl. heads-last,
``bmm``, ``baddbmm``), head split/merge (view+transpose, reshape+permute, unflatten/flatten,
einops incl. a ``three`` axis, ``map`` over a lambda / local ``def`` / helper method, a
comprehension, ``qkv[0], qkv[1], qkv[2]``, ``unbind``), head-dim source, scale form and
placement, the name of the unpacked width local (``C``, ``D``, ``hd``, ...), causal-mask
construction (inline, a buffer, a helper called directly, through a lambda, a
``functools.partial``, ``map``, a comprehension over ``zip`` or passed to another function, a
``(q_len, kv_len)`` mask whose diagonal is a local such as ``off = kv_len - q_len``) / polarity
change / consumer (incl. a fill applied in a helper function or method whose result the caller
softmaxes) / fill,
key padding mask (a ``forward(x, attention_mask=None)`` argument of shape ``(B, L)``, 1 = token,
0 = padding, laid out as ``(B, 1, 1, L)`` by indexing, ``unsqueeze``, ``view`` or
``einops.rearrange``, cast before or after the layout, and used as a fill, ``torch.where``, an additive
``(1 - m) * c`` or SDPA's ``attn_mask``), dropout form (in the Hugging Face shape also a
probability the caller gates, leaves at its default or passes ungated, or a ``training``
argument), GQA key/value expansion.
"""
from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass, field

FAULTS = ("ATT101", "ATT102", "ATT103", "ATT104", "ATT105", "ATT201", "ATT202", "ATT204",
          "ATT205", "ATT206", "ATT207", "ATT208", "ATT301", "ATT401", "ATT402", "ATT403", "ATT501")
SHAPES = ("nanogpt", "hf", "lucid", "timm", "fairseq")

#: faults that need a manual (non-SDPA) attention path
_MANUAL_ONLY = {"ATT101", "ATT204", "ATT205", "ATT206", "ATT207", "ATT301"}
_MASK_FAULTS = {"ATT201", "ATT202", "ATT204", "ATT205", "ATT206", "ATT207"}
#: shapes whose forward may take a key padding mask ``attention_mask`` (B, L): 1 = token, 0 = pad
_PADDING_SHAPES = ("nanogpt", "timm", "lucid")


@dataclass
class Variant:
    seed: int
    source: str
    fault: str | None
    shape: str
    axes: dict[str, str]
    n_heads: int
    n_kv_heads: int
    head_dim: int
    causal: bool
    seq_first: bool
    padding: bool  # forward takes attention_mask (B, L) of 1 = token, 0 = padding (Hugging Face)
    projections: tuple[str, ...]  # ("qkv",) fused q|k|v Linear, or (q, k, v) Linear names
    out_proj: str
    dropout: float
    fp16: bool  # a literal fill is involved: also run in float16

    @property
    def d_model(self) -> int:
        return self.n_heads * self.head_dim

    def describe(self) -> str:
        axes = ", ".join(f"{k}={v}" for k, v in self.axes.items())
        return f"seed={self.seed} fault={self.fault} {axes}"


@dataclass
class _Names:
    """Spellings that differ between code shapes."""

    mod: str  # "self" or "module"
    width: str  # attribute holding the model width
    heads: str  # attribute holding the head count
    hd: str  # attribute holding the head dim
    B: str
    L: str
    C: str | None  # a local holding the width, if the shape unpacks one
    x: str  # the input name


@dataclass
class _Out:
    imports: set[str] = field(default_factory=lambda: {"import torch", "import torch.nn as nn",
                                                       "import torch.nn.functional as F"})
    init: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    funcs: list[str] = field(default_factory=list)
    fwd_params: list[str] = field(default_factory=list)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.axes: dict[str, str] = {}
        self.o = _Out()
        self.padding = False

    def pick(self, axis: str, options):
        """Draw one option; options are labels or (label, value) pairs; returns the value."""
        choice = self.rng.choice(list(options))
        label, value = choice if isinstance(choice, tuple) else (choice, choice)
        self.axes[axis] = label
        return value

    def chance(self, p: float) -> bool:
        return self.rng.random() < p


# ---------------------------------------------------------------------------------------------
# scale


def _d_source(g: _Gen, n: _Names, fault: str | None, q: str, k: str, pre: list[str],
              stored: bool) -> str:
    """An expression for the head dim (the model width for ATT102) usable where q/k are split."""
    if fault == "ATT102":
        opts = [("width_attr", f"{n.mod}.{n.width}")]
        if not stored:
            if n.C:
                opts.append(("width_local", n.C))
            if n.x:
                opts.append(("x_last", f"{n.x}.shape[-1]"))
        return g.pick("d_source", opts)
    opts = [("hd_attr", f"{n.mod}.{n.hd}"), ("width_div_heads", f"({n.mod}.{n.width} // {n.mod}.{n.heads})")]
    if not stored:
        opts += [("q_shape", f"{q}.shape[-1]"), ("k_size", f"{k}.size(-1)"), ("unpack", "d"),
                 ("assign", "d")]
    label = g.pick("d_source", opts)
    if g.axes["d_source"] == "unpack":
        pre.append(f"*_, d = {q}.shape")
    elif g.axes["d_source"] == "assign":
        pre.append(f"d = {q}.size(-1)")
    return label


def _scale_factor(g: _Gen, fault: str | None, d: str, mul_only: bool) -> tuple[str, str]:
    """(kind, expr): multiply by expr ("mul") or divide by it ("div")."""
    if fault == "ATT103":
        mul = [f"1 / {d}", f"{d} ** -1", f"1.0 / {d}"]
        div = [d, f"float({d})"]
    elif fault == "ATT105":
        mul = [f"math.sqrt({d})", f"{d} ** 0.5"]
        div = [f"{d} ** -0.5", f"1 / math.sqrt({d})"]
    else:
        mul = [f"{d} ** -0.5", f"1 / math.sqrt({d})", f"1.0 / {d} ** 0.5", f"math.pow({d}, -0.5)",
               f"torch.rsqrt(torch.tensor({d}))"]
        div = [f"math.sqrt({d})", f"{d} ** 0.5"]
    opts = [("mul", m) for m in mul] + ([] if mul_only else [("div", m) for m in div])
    kind, expr = g.rng.choice(opts)
    g.axes["scale_form"] = f"{kind}:{expr}"
    return kind, expr


class _Scale:
    """Where and how the scale is applied: ``placements`` ⊆ {scores, scores_inplace, q,
    q_inplace, k, inline, baddbmm, sdpa_arg, sdpa_default, proj}."""

    def __init__(self, placements: list[str], kind: str, expr: str, pre: list[str]):
        self.placements, self.kind, self.expr, self.pre = placements, kind, expr, pre

    def op(self, target: str) -> str:
        return f"{target} * {self.expr}" if self.kind == "mul" else f"{target} / {self.expr}"

    def op_inplace(self, target: str) -> str:
        return f"{target} *= {self.expr}" if self.kind == "mul" else f"{target} /= {self.expr}"


def _plan_scale(g: _Gen, n: _Names, fault: str | None, q: str, k: str, sdpa: bool,
                three_d: bool, allow_fallback: bool) -> _Scale:
    scale_fault = fault if fault in ("ATT101", "ATT102", "ATT103", "ATT104", "ATT105") else None
    if sdpa:
        if scale_fault == "ATT104":
            placements = g.pick("scale_at", [("q+sdpa_default", ["q", "sdpa_default"]),
                                             ("q+sdpa_arg", ["q", "sdpa_arg"]),
                                             ("q_inplace+sdpa_default", ["q_inplace", "sdpa_default"])])
        elif scale_fault:
            placements = g.pick("scale_at", [("sdpa_arg", ["sdpa_arg"]), ("q+scale1", ["q", "sdpa_one"])])
        else:
            placements = g.pick("scale_at", [("sdpa_default", ["sdpa_default"]), ("sdpa_arg", ["sdpa_arg"]),
                                             ("q+scale1", ["q", "sdpa_one"])])
    else:
        single = [("scores", ["scores"]), ("scores_inplace", ["scores_inplace"]), ("q", ["q"]),
                  ("q_inplace", ["q_inplace"]), ("k", ["k"]), ("inline", ["inline"])]
        if three_d:
            single.append(("baddbmm", ["baddbmm"]))
        if scale_fault == "ATT101":
            g.axes["scale_at"] = "none"
            return _Scale([], "mul", "", [])
        if scale_fault == "ATT104":
            placements = g.pick("scale_at", [("q+scores", ["q", "scores"]), ("q+k", ["q", "k"]),
                                             ("q_inplace+scores", ["q_inplace", "scores"]),
                                             ("inline+scores", ["inline", "scores"]),
                                             ("k+scores_inplace", ["k", "scores_inplace"])])
        else:
            placements = g.pick("scale_at", single)
    pre: list[str] = []
    stored = g.chance(0.4)
    d = _d_source(g, n, scale_fault if scale_fault != "ATT104" else None, q, k, pre, stored)
    mul_only = any(p in ("baddbmm", "sdpa_arg", "inline") for p in placements) or stored
    kind, expr = _scale_factor(g, scale_fault if scale_fault != "ATT104" else None, d, mul_only)
    if stored:
        name = g.pick("scale_attr", ["scale", "scaling", "softmax_scale"])
        g.o.init.append(f"self.{name} = {expr.replace(n.mod + '.', 'self.')}")
        expr = f"{n.mod}.{name}"
        g.axes["scale_src"] = "stored"
    elif allow_fallback and g.chance(0.3) and kind == "mul":
        g.o.fwd_params.append("scale=None")
        if g.chance(0.5):
            pre.append(f"scale = scale or {expr}")
        else:
            pre.append("if scale is None:")
            pre.append(f"    scale = {expr}")
        expr = "scale"
        g.axes["scale_src"] = "fallback"
    else:
        g.axes["scale_src"] = "inline"
    if " " in expr:
        expr = f"({expr})"
    return _Scale(placements, kind, expr, pre)


# ---------------------------------------------------------------------------------------------
# causal mask

_KEEP_OK = [  # (label, expr over size n, dtype) — True / 1 where attending is allowed
    ("tril_bool", "torch.tril(torch.ones({n}, {n}, dtype=torch.bool))", "bool"),
    ("ones_tril_bool", "torch.ones({n}, {n}).tril().bool()", "bool"),
    ("arange_ge", "torch.arange({n})[:, None] >= torch.arange({n})[None, :]", "bool"),
    ("not_triu1", "~torch.triu(torch.ones({n}, {n}, dtype=torch.bool), diagonal=1)", "bool"),
    ("tril_diag0", "torch.ones({n}, {n}, dtype=torch.bool).tril(diagonal=0)", "bool"),
    ("tril_float", "torch.tril(torch.ones({n}, {n}))", "float"),
]
_KEEP_DIAG = [  # keep masks that also block the diagonal
    ("tril_m1", "torch.tril(torch.ones({n}, {n}, dtype=torch.bool), diagonal=-1)", "bool"),
    ("arange_gt", "torch.arange({n})[:, None] > torch.arange({n})[None, :]", "bool"),
    ("not_triu0", "~torch.triu(torch.ones({n}, {n}, dtype=torch.bool))", "bool"),
    ("tril_float_m1", "torch.tril(torch.ones({n}, {n}), diagonal=-1)", "float"),
]
_BLOCK_OK = [  # True where attending is blocked
    ("triu1_bool", "torch.triu(torch.ones({n}, {n}, dtype=torch.bool), diagonal=1)", "bool"),
    ("ones_triu1_bool", "torch.ones({n}, {n}).triu(1).bool()", "bool"),
    ("arange_gt_T", "torch.arange({n})[None, :] > torch.arange({n})[:, None]", "bool"),
    ("not_tril", "~torch.tril(torch.ones({n}, {n}, dtype=torch.bool))", "bool"),
    ("logical_not_tril", "torch.logical_not(torch.ones({n}, {n}, dtype=torch.bool).tril())", "bool"),
    ("tril_eq0", "torch.tril(torch.ones({n}, {n})) == 0", "bool"),
    ("one_minus_tril", "(1 - torch.tril(torch.ones({n}, {n}))).bool()", "bool"),
]
_BLOCK_DIAG = [
    ("triu0_bool", "torch.triu(torch.ones({n}, {n}, dtype=torch.bool))", "bool"),
    ("ones_triu_bool", "torch.ones({n}, {n}).triu().bool()", "bool"),
    ("arange_ge_T", "torch.arange({n})[None, :] >= torch.arange({n})[:, None]", "bool"),
    ("not_tril_m1", "~torch.tril(torch.ones({n}, {n}, dtype=torch.bool), diagonal=-1)", "bool"),
]


def _negate(g: _Gen, m: str, dtype: str) -> str:
    if dtype == "float":
        return g.pick("negate", [f"({m} == 0)", f"{m}.eq(0)", f"(1 - {m}).bool()"])
    return g.pick("negate", [f"~{m}", f"({m} == 0)", f"{m}.logical_not()", f"torch.logical_not({m})"])


def _fill(g: _Gen, fault: str | None, ref: str) -> str:
    if fault == "ATT204":
        return g.pick("fill", ["-1e9", "-1e10", "-1e30", "-10000000000.0", "float('-1e20')"])
    if fault == "ATT205":
        return g.pick("fill", ["0", "0.0", "-1e-9", "1e-9", "-1e-12", "float('inf')", "1e9"])
    return g.pick("fill", ["float('-inf')", "-float('inf')", "-torch.inf", "-math.inf",
                           f"torch.finfo({ref}.dtype).min", "-1e4", "-10000.0"])


class _Mask:
    """A causal mask source: ``keep``/``blocked`` return expressions in that polarity."""

    def __init__(self, g: _Gen, n: _Names, fault: str | None, size_expr: str):
        self.g = g
        want_keep = g.chance(0.5)
        diag = fault == "ATT202"
        table = (_KEEP_DIAG if diag else _KEEP_OK) if want_keep else (_BLOCK_DIAG if diag else _BLOCK_OK)
        label, expr, dtype = g.rng.choice(table)
        g.axes["mask_build"] = label
        self.polarity = "keep" if want_keep else "blocked"
        self.dtype = dtype
        # a helper reached by value: called, through a lambda, a partial, map, a comprehension
        # over zip, or passed to another function
        where = g.pick("mask_where", ["forward", "buffer", "helper", "helper_lambda",
                                      "helper_partial", "helper_map", "helper_zip_comp",
                                      "helper_passed", "forward_offset"])
        self.expr = "mask"
        self.var_lines: list[str] = []
        if where == "forward_offset":
            self._offset(g, size_expr, want_keep, diag)
        elif where == "buffer":
            name = g.pick("mask_attr", ["causal_mask", "mask", "tril"])
            g.o.init.append(f"self.register_buffer({name!r}, {expr.format(n='max_len')}, persistent=False)")
            self.expr = f"{n.mod}.{name}[:{size_expr}, :{size_expr}]"
        elif where == "helper_lambda":
            self.var_lines = [f"make_mask = lambda size: {expr.format(n='size')}",
                              f"mask = make_mask({size_expr})"]
        elif where.startswith("helper"):
            g.o.funcs.append(f"def causal_mask(size):\n    return {expr.format(n='size')}\n")
            if where == "helper_passed":
                g.o.funcs.append("def build_mask(fn, size):\n    return fn(size)\n")
            if where == "helper_partial":
                g.o.imports.add("import functools")
            self.var_lines = [{
                "helper": f"mask = causal_mask({size_expr})",
                "helper_partial": f"mask = functools.partial(causal_mask, {size_expr})()",
                "helper_map": f"(mask,) = map(causal_mask, ({size_expr},))",
                "helper_zip_comp": f"mask = [causal_mask(a) for a, _ in zip(({size_expr},), (None,))][0]",
                "helper_passed": f"mask = build_mask(causal_mask, {size_expr})",
            }[where]]
        else:
            self.var_lines = [f"mask = {expr.format(n=size_expr)}"]

    def _offset(self, g: _Gen, size: str, keep: bool, diag: bool) -> None:
        """A KV-cache style mask over ``(q_len, kv_len)``: its diagonal held in a local
        (``off = kv_len - q_len``; the queries are the last ``q_len`` of ``kv_len`` keys)."""
        c = (-1 if diag else 0) if keep else (0 if diag else 1)
        plus = f" + {c}" if c > 0 else (f" - {-c}" if c < 0 else "")
        spelling = g.pick("mask_offset", ["kv_minus_q", "past", "past_inline", "const"])
        lines = [g.pick("mask_lens", [f"q_len = kv_len = {size}", f"q_len, kv_len = {size}, {size}"])]
        if spelling == "kv_minus_q":
            lines.append(f"off = kv_len - q_len{plus}")
            diagonal = "off"
        elif spelling == "past":
            lines += ["past = kv_len - q_len", f"off = past{plus}"]
            diagonal = "off"
        elif spelling == "past_inline":
            lines.append("past = kv_len - q_len")
            diagonal = f"past{plus}"
        else:
            lines.append(f"off = {c}")
            diagonal = "off"
        fn = "tril" if keep else "triu"
        lines.append(g.pick("mask_offset_call", [
            f"mask = torch.{fn}(torch.ones(q_len, kv_len, dtype=torch.bool), diagonal={diagonal})",
            f"mask = torch.ones(q_len, kv_len, dtype=torch.bool).{fn}({diagonal})"]))
        g.axes["mask_build"] = f"offset_{fn}_{c}"
        self.dtype = "bool"
        self.var_lines = lines

    def setup(self) -> list[str]:
        return list(self.var_lines)

    def keep(self) -> tuple[str, str]:
        if self.polarity == "keep":
            return self.expr, self.dtype
        return _negate(self.g, self.expr, "bool"), "bool"

    def blocked(self) -> tuple[str, str]:
        if self.polarity == "blocked":
            return self.expr, "bool"
        return _negate(self.g, self.expr, self.dtype), "bool"

    def bool_of(self, polarity: str) -> str:
        e, dt = self.keep() if polarity == "keep" else self.blocked()
        return f"{e}.bool()" if dt == "float" else e


# ---------------------------------------------------------------------------------------------
# softmax and dropout


def _softmax(g: _Gen, fault: str | None, att: str, ndim: int, out: list[str], hf: bool) -> None:
    if fault == "ATT301":
        dims = ["-2", "2", "1", None] if ndim == 4 else ["1", "-2", "0", None]
    else:
        dims = ["-1", str(ndim - 1)]
    dim = g.rng.choice(dims)
    forms = ["F.softmax", "torch.softmax", "method", "method_pos", "module", "exp_sum"]
    if dim is None:
        forms = ["F.softmax", "module"]
    if hf and dim is not None:
        forms.append("hf_fp32")
    form = g.rng.choice(forms)
    g.axes["softmax"] = f"{form}:{dim}"
    if form == "F.softmax":
        out.append(f"{att} = F.softmax({att}, dim={dim})" if dim else f"{att} = F.softmax({att})")
    elif form == "torch.softmax":
        out.append(f"{att} = torch.softmax({att}, {dim})")
    elif form == "method":
        out.append(f"{att} = {att}.softmax(dim={dim})")
    elif form == "method_pos":
        out.append(f"{att} = {att}.softmax({dim})")
    elif form == "hf_fp32":
        out.append(f"{att} = nn.functional.softmax({att}, dim={dim}, dtype=torch.float32).to({att}.dtype)")
    elif form == "module":
        g.o.init.append(f"self.softmax = nn.Softmax(dim={dim})" if dim else "self.softmax = nn.Softmax()")
        out.append(f"{att} = {'module' if hf else 'self'}.softmax({att})")
    else:
        out.append(f"{att} = torch.exp({att} - {att}.amax(dim={dim}, keepdim=True))")
        out.append(f"{att} = {att} / {att}.sum(dim={dim}, keepdim=True)")


def _dropout(g: _Gen, fault: str | None, att: str, mod: str, out: list[str]) -> None:
    if fault == "ATT501":
        form = g.pick("dropout", ["F.dropout_kw", "F.dropout_pos", "nn.functional"])
        out.append({"F.dropout_kw": f"{att} = F.dropout({att}, p={mod}.dropout)",
                    "F.dropout_pos": f"{att} = F.dropout({att}, {mod}.dropout)",
                    "nn.functional": f"{att} = nn.functional.dropout({att}, {mod}.dropout)"}[form])
        return
    form = g.pick("dropout", ["none", "module", "F.dropout_kw", "F.dropout_pos"])
    if form == "module" and mod == "self":
        g.o.init.append("self.attn_drop = nn.Dropout(dropout)")
        out.append(f"{att} = self.attn_drop({att})")
    elif form == "F.dropout_pos":
        out.append(f"{att} = F.dropout({att}, {mod}.dropout, {mod}.training)")
    elif form != "none":
        out.append(f"{att} = F.dropout({att}, p={mod}.dropout, training={mod}.training)")


# ---------------------------------------------------------------------------------------------
# the attention core (manual or SDPA), shared by every code shape


def _core(g: _Gen, n: _Names, fault: str | None, q: str, k: str, v: str, layout: str,
          causal: bool, sdpa: bool, body: list[str], y: str, allow_fallback: bool,
          external_mask: str | None = None, scale: bool = True) -> None:
    """Append lines computing ``y`` (same layout as ``v``) from q, k, v.

    ``layout``: "4d" (B, H, L, D), "3d" (B·H, L, D) or "hl" (B, L, H, D).
    ``external_mask``: name of an additive mask argument (Hugging Face shape) used instead of
    building one here.
    """
    ndim = 3 if layout == "3d" else 4
    size = f"{q}.size(-2)" if layout != "hl" else f"{q}.size(1)"
    size = g.pick("mask_size", [size, n.L]) if n.L else size
    sc = (_plan_scale(g, n, fault, q, k, sdpa, layout == "3d", allow_fallback) if scale
          else _Scale([], "mul", "", []))
    body += sc.pre
    if "q" in sc.placements:
        body.append(f"{q} = {sc.op(q)}")
    if "q_inplace" in sc.placements:
        body.append(sc.op_inplace(q))
    if "k" in sc.placements:
        body.append(f"{k} = {sc.op(k)}")
    mask = _Mask(g, n, fault, size) if causal and external_mask is None else None
    if mask:
        body += mask.setup()
    if sdpa:
        args = [q, k, v]
        if causal:
            consumer = g.pick("mask_use", ["is_causal", "attn_mask_bool", "attn_mask_additive"]
                              if fault not in ("ATT201", "ATT202") else ["attn_mask_bool", "attn_mask_additive"])
            if consumer == "is_causal":
                args.append("is_causal=True")
            elif consumer == "attn_mask_bool":
                args.append(f"attn_mask={mask.bool_of('blocked' if fault == 'ATT201' else 'keep')}")
            else:
                blocked = mask.bool_of("keep" if fault == "ATT201" else "blocked")
                body.append(f"bias = torch.zeros({size}, {size}, dtype={q}.dtype).masked_fill({blocked}, "
                            f"{_fill(g, None, q)})")
                args.append("attn_mask=bias")
        if g.padding:
            args.append(f"attn_mask={_padding_sdpa(g, fault, q)}")
        if fault == "ATT501":
            args.append(f"dropout_p={n.mod}.dropout")
        elif g.chance(0.5):
            args.append(g.pick("sdpa_dropout", [f"dropout_p={n.mod}.dropout if {n.mod}.training else 0.0",
                                                f"dropout_p=({n.mod}.dropout if {n.mod}.training else 0)"]))
        if "sdpa_arg" in sc.placements:
            args.append(f"scale={sc.expr}")
        if "sdpa_one" in sc.placements:
            args.append("scale=1.0")
        body.append(f"{y} = F.scaled_dot_product_attention({', '.join(args)})")
        return

    att = g.pick("att_name", ["att", "attn", "scores", "attn_weights", "dots", "sim"])
    qq = f"({sc.op(q)})" if "inline" in sc.placements else q
    if layout == "4d":
        op = g.pick("scores_op", [f"{qq} @ {k}.transpose(-2, -1)", f"{qq} @ {k}.mT",
                                  f"torch.matmul({qq}, {k}.transpose(-1, -2))",
                                  f"torch.einsum('bhid,bhjd->bhij', {qq}, {k})",
                                  f"{qq} @ {k}.permute(0, 1, 3, 2)",
                                  f"torch.einsum('b h i d, b h j d -> b h i j', {qq}, {k})"])
    elif layout == "hl":
        op = g.pick("scores_op", [f"torch.einsum('bihd,bjhd->bhij', {qq}, {k})",
                                  f"torch.einsum('b i h d, b j h d -> b h i j', {qq}, {k})"])
    elif "baddbmm" in sc.placements:
        op = (f"torch.baddbmm(torch.empty({q}.size(0), {q}.size(1), {k}.size(1), dtype={q}.dtype), "
              f"{q}, {k}.transpose(1, 2), beta=0.0, alpha={sc.expr})")
        g.axes["scores_op"] = "baddbmm"
    else:
        op = g.pick("scores_op", [f"torch.bmm({qq}, {k}.transpose(1, 2))", f"{qq} @ {k}.transpose(1, 2)",
                                  f"torch.matmul({qq}, {k}.transpose(-1, -2))"])
    if "scores" in sc.placements and g.chance(0.5):
        body.append(f"{att} = {sc.op('(' + op + ')')}" if sc.kind == "mul" else f"{att} = {op} / {sc.expr}")
    else:
        body.append(f"{att} = {op}")
        if "scores" in sc.placements:
            body.append(f"{att} = {sc.op(att)}")
    if "scores_inplace" in sc.placements:
        body.append(sc.op_inplace(att))

    after: list[str] = []  # mask lines placed after the softmax (ATT206)
    if external_mask is not None:
        if g.chance(0.5):
            body.append(f"if {external_mask} is not None:")
            body.append(f"    {att} = {att} + {external_mask}")
        else:
            body.append(f"if {external_mask} is not None:")
            body.append(f"    causal_mask = {external_mask}[:, :, :, : {k}.shape[-2]]")
            body.append(f"    {att} = {att} + causal_mask")
    elif mask is not None:
        fill = _fill(g, fault, att)
        if fault == "ATT206":
            form = g.pick("mask_use", ["masked_fill_after", "multiply_keep_after", "where_after"])
            if form == "masked_fill_after":
                after.append(f"{att} = {att}.masked_fill({mask.blocked()[0]}, 0.0)")
            elif form == "multiply_keep_after":
                after.append(f"{att} = {att} * {mask.keep()[0]}")
            else:
                after.append(f"{att} = torch.where({mask.bool_of('keep')}, {att}, 0.0)")
        elif fault == "ATT207":
            form = g.pick("mask_use", ["add_keep", "add_blocked", "add_float", "iadd_keep"])
            if form == "add_keep":
                body.append(f"{att} = {att} + {mask.keep()[0]}")
            elif form == "add_blocked":
                body.append(f"{att} = {att} + {mask.blocked()[0]}")
            elif form == "add_float":
                body.append(f"{att} = {att} + ({mask.bool_of('keep')}).float()")
            else:
                body.append(f"{att} += ({mask.bool_of('keep')}).to({att}.dtype)")
        else:
            inv = fault == "ATT201"
            # torch.where with a Python-scalar fill keeps the scores' dtype and rounds an
            # overflowing fill to -inf, which masks correctly: ATT204 only where the fill is stored
            forms = ["masked_fill", "masked_fill_", "additive", "additive_iadd", "helper_fill"]
            if n.mod == "self":
                forms.append("helper_method_fill")
            form = g.pick("mask_use", forms if fault == "ATT204" else forms + ["where_keep", "where_blocked"])
            blocked = mask.bool_of("keep" if inv else "blocked")
            if form == "helper_fill":
                g.o.funcs.append("def apply_mask(scores, blocked, value):\n"
                                 "    return scores.masked_fill(blocked, value)\n")
                body.append(f"{att} = apply_mask({att}, {blocked}, {fill})")
            elif form == "helper_method_fill":
                g.o.methods.append("def apply_mask(self, scores, blocked, value):\n"
                                   "    out = scores.masked_fill(blocked, value)\n"
                                   "    return out\n")
                body.append(f"{att} = {n.mod}.apply_mask({att}, {blocked}, {fill})")
            elif form == "masked_fill":
                body.append(f"{att} = {att}.masked_fill({blocked}, {fill})")
            elif form == "masked_fill_":
                body.append(f"{att}.masked_fill_({blocked}, {fill})")
            elif form == "where_keep":
                body.append(f"{att} = torch.where({mask.bool_of('blocked' if inv else 'keep')}, {att}, {fill})")
            elif form == "where_blocked":
                body.append(f"{att} = torch.where({blocked}, {fill}, {att})")
            else:
                body.append(f"bias = torch.zeros({size}, {size}, dtype={q}.dtype).masked_fill({blocked}, {fill})")
                body.append(f"{att} = {att} + bias" if form == "additive" else f"{att} += bias")
    if g.padding:
        _padding_scores(g, fault, att, body, after)
    _softmax(g, fault, att, ndim, body, n.mod == "module")
    if after and g.chance(0.5):
        _dropout(g, None if fault != "ATT501" else fault, att, n.mod, body)
        body += after
    else:
        body += after
        _dropout(g, fault if fault == "ATT501" else None, att, n.mod, body)
    if layout == "hl":
        body.append(g.pick("pv_op", [f"{y} = torch.einsum('bhij,bjhd->bihd', {att}, {v})",
                                     f"{y} = torch.einsum('b h i j, b j h d -> b i h d', {att}, {v})"]))
    elif layout == "3d":
        body.append(g.pick("pv_op", [f"{y} = torch.bmm({att}, {v})", f"{y} = {att} @ {v}"]))
    else:
        body.append(g.pick("pv_op", [f"{y} = {att} @ {v}", f"{y} = torch.matmul({att}, {v})",
                                     f"{y} = torch.einsum('bhij,bhjd->bhid', {att}, {v})"]))


# ---------------------------------------------------------------------------------------------
# key padding mask: ``attention_mask`` (B, L), 1 = token, 0 = padding (the Hugging Face tokenizer
# convention), laid out as (B, 1, 1, L) over (B, H, L_q, L_k) scores

_PAD_LAYOUTS = [("index", "{m}[:, None, None, :]"),
                ("unsqueeze", "{m}.unsqueeze(1).unsqueeze(2)"),
                ("view", "{m}.view(attention_mask.size(0), 1, 1, -1)"),
                ("rearrange", "rearrange({m}, 'b j -> b 1 1 j')")]


class _PadLayout:
    """The (B, 1, 1, L) layout of ``attention_mask`` (:attr:`m`) and where a cast goes:
    ``cast(c)`` is the laid-out mask cast with ``c`` (``.bool()``, ``.to(x.dtype)``), the cast
    written before the layout or after it (the ``pad_cast`` axis)."""

    def __init__(self, g: _Gen) -> None:
        self.layout = g.pick("pad_layout", _PAD_LAYOUTS)
        if "rearrange" in self.layout:
            g.o.imports.add("from einops import rearrange")
        self.before = g.pick("pad_cast", ["after_layout", "before_layout"]) == "before_layout"
        self.m = self.layout.format(m="attention_mask")

    def __str__(self) -> str:
        return self.m

    def cast(self, c: str) -> str:
        return self.layout.format(m="attention_mask" + c) if self.before else self.m + c


def _padding_scores(g: _Gen, fault: str | None, att: str, body: list[str], after: list[str]) -> None:
    """Mask padded keys in the scores (ATT208: with the polarity inverted), or, for ATT206, zero
    them in the probabilities after the softmax."""
    m = _PadLayout(g)
    if fault == "ATT206":
        form = g.pick("pad_use", ["masked_fill_eq0_after", "multiply_after", "keep_local_after",
                                  "multiply_cast_after"])
        lines = {"masked_fill_eq0_after": [f"{att} = {att}.masked_fill({m} == 0, 0.0)"],
                 "multiply_after": [f"{att} = {att} * {m}"],
                 "keep_local_after": [f"keep = {m.cast('.bool()')}", f"{att} = {att}.masked_fill(~keep, 0)"],
                 "multiply_cast_after": [f"{att} = {att} * {m.cast(f'.to({att}.dtype)')}"]}[form]
        after += ["if attention_mask is not None:"] + ["    " + line for line in lines]
        return
    fill = _fill(g, None, att)
    neg = g.pick("pad_neg", ["-1e4", "-10000.0", f"torch.finfo({att}.dtype).min"])
    b, to = m.cast(".bool()"), m.cast(f".to({att}.dtype)")
    if fault == "ATT208":
        forms = {"masked_fill_eq1": f"{att} = {att}.masked_fill({m} == 1, {fill})",
                 "masked_fill_bool": f"{att} = {att}.masked_fill({b}, {fill})",
                 "masked_fill_ne0": f"{att} = {att}.masked_fill({m} != 0, {fill})",
                 "where_eq0_keep": f"{att} = torch.where({m} == 0, {att}, {fill})",
                 "where_bool_fill": f"{att} = torch.where({b}, {fill}, {att})",
                 "additive_no_one_minus": f"{att} = {att} + {to} * {neg}"}
    else:
        forms = {"masked_fill_eq0": f"{att} = {att}.masked_fill({m} == 0, {fill})",
                 "masked_fill_not_bool": f"{att} = {att}.masked_fill(~{b}, {fill})",
                 "masked_fill_eq0_method": f"{att} = {att}.masked_fill({m}.eq(0), {fill})",
                 "where_bool_keep": f"{att} = torch.where({b}, {att}, {fill})",
                 "where_eq0_fill": f"{att} = torch.where({m} == 0, {fill}, {att})",
                 "additive_one_minus": f"{att} = {att} + (1.0 - {to}) * {neg}"}
    line = forms[g.pick("pad_use", list(forms))]
    body += ["if attention_mask is not None:", "    " + line]


def _padding_sdpa(g: _Gen, fault: str | None, q: str) -> str:
    """SDPA's ``attn_mask`` from the padding mask: boolean True = attend, or additive."""
    m = _PadLayout(g)
    b, to = m.cast(".bool()"), m.cast(f".to({q}.dtype)")
    if fault == "ATT208":
        forms = {"bool_eq0": f"({m} == 0)", "bool_not": f"~{b}",
                 "additive_no_one_minus": f"{to} * torch.finfo({q}.dtype).min"}
    else:
        forms = {"bool": b, "bool_eq1": f"({m} == 1)",
                 "additive_one_minus": f"(1.0 - {to}) * torch.finfo({q}.dtype).min"}
    e = forms[g.pick("pad_use", list(forms))]
    return f"{e} if attention_mask is not None else None"


# ---------------------------------------------------------------------------------------------
# head split / merge for (B, L, C) inputs


def _split_expr(g: _Gen, fault: str | None, t: str, n: _Names, einops_ok: bool) -> str:
    B, L, H, D = n.B, n.L, f"{n.mod}.{n.heads}", f"{n.mod}.{n.hd}"
    if fault == "ATT401":
        return g.pick("split", [f"{t}.reshape({B}, {H}, {L}, {D})", f"{t}.reshape({B}, {H}, {L}, -1)",
                                f"{t}.contiguous().view({B}, {H}, -1, {D})"])
    opts = [f"{t}.view({B}, {L}, {H}, {D}).transpose(1, 2)", f"{t}.reshape({B}, {L}, {H}, -1).permute(0, 2, 1, 3)",
            f"{t}.unflatten(-1, ({H}, {D})).transpose(1, 2)", f"{t}.view({B}, -1, {H}, {D}).transpose(1, 2)"]
    if einops_ok:
        opts.append(f"rearrange({t}, 'b n (h d) -> b h n d', h={H})")
    e = g.pick("split", opts)
    if "rearrange" in e:
        g.o.imports.add("from einops import rearrange")
    return e


def _merge_expr(g: _Gen, fault: str | None, y: str, n: _Names, einops_ok: bool) -> str:
    B, L = n.B, n.L
    C = n.C or f"{n.mod}.{n.width}"
    if fault == "ATT402":
        return g.pick("merge", [f"{y}.reshape({B}, {L}, {C})", f"{y}.contiguous().view({B}, {L}, -1)",
                                f"{y}.reshape({B}, {L}, -1)"])
    opts = [f"{y}.transpose(1, 2).contiguous().view({B}, {L}, {C})", f"{y}.transpose(1, 2).reshape({B}, {L}, -1)",
            f"{y}.permute(0, 2, 1, 3).flatten(2)", f"{y}.transpose(1, 2).flatten(-2)"]
    if einops_ok:
        opts.append(f"rearrange({y}, 'b h n d -> b n (h d)')")
    e = g.pick("merge", opts)
    if "rearrange" in e:
        g.o.imports.add("from einops import rearrange")
    return e


def _apply_split(g: _Gen, fault: str | None, n: _Names, body: list[str], names=("q", "k", "v"),
                 einops_ok: bool = True) -> None:
    style = g.pick("split_style", ["each", "map_lambda", "map_method", "local_def", "method",
                                   "comprehension"])
    q, k, v = names
    if style == "each":
        for t in names:
            body.append(f"{t} = {_split_expr(g, fault, t, n, einops_ok)}")
    elif style == "map_lambda":
        body.append(f"{q}, {k}, {v} = map(lambda t: {_split_expr(g, fault, 't', n, einops_ok)}, ({q}, {k}, {v}))")
    elif style == "comprehension":
        body.append(f"{q}, {k}, {v} = [{_split_expr(g, fault, 't', n, einops_ok)} for t in ({q}, {k}, {v})]")
    elif style == "local_def":
        body.append("def split_heads(t):")
        body.append(f"    return {_split_expr(g, fault, 't', n, einops_ok)}")
        body.append(f"{q}, {k}, {v} = split_heads({q}), split_heads({k}), split_heads({v})")
    else:
        nn_ = _Names(n.mod, n.width, n.heads, n.hd, "b", "n", None, "")
        e = _split_expr(g, fault, "t", nn_, einops_ok)
        g.o.methods.append(f"def split_heads(self, t):\n    b, n, _ = t.shape\n    return {e}\n")
        if style == "map_method":
            body.append(f"{q}, {k}, {v} = map(self.split_heads, ({q}, {k}, {v}))")
        else:
            for t in names:
                body.append(f"{t} = self.split_heads({t})")


def _apply_merge(g: _Gen, fault: str | None, n: _Names, body: list[str], y: str, out: str,
                 einops_ok: bool = True) -> None:
    if g.chance(0.25):
        nn_ = _Names(n.mod, n.width, n.heads, n.hd, "b", "n", None, "")
        e = _merge_expr(g, fault, "t", nn_, einops_ok)
        g.o.methods.append(f"def merge_heads(self, t):\n    b, _, n, _ = t.shape\n    return {e}\n")
        body.append(f"{out} = self.merge_heads({y})")
        g.axes["merge_style"] = "method"
    else:
        body.append(f"{out} = {_merge_expr(g, fault, y, n, einops_ok)}")
        g.axes["merge_style"] = "inline"


# ---------------------------------------------------------------------------------------------
# code shapes


#: the local the model width is unpacked into (``B, T, C = x.shape``): the shape says it is the
#: width, whatever the name (``D`` and ``hd`` read as a head dim by name)
_WIDTH_NAMES = ("C", "C", "D", "E", "hd", "width")


def _shape_nanogpt(g: _Gen, fault, causal, sdpa) -> tuple[list[str], dict]:
    w = g.pick("width_name", _WIDTH_NAMES)
    n = _Names("self", "n_embd", "n_head", "head_dim", "B", "T", w, "x")
    g.o.init += ["self.c_attn = nn.Linear(d_model, 3 * d_model)", "self.c_proj = nn.Linear(d_model, d_model)",
                 "self.n_head = n_heads", "self.n_embd = d_model", "self.head_dim = d_model // n_heads",
                 "self.dropout = dropout"]
    body = [g.pick("unpack", [f"B, T, {w} = x.size()", f"B, T, {w} = x.shape"])]
    body.append(g.pick("qkv", ["q, k, v = self.c_attn(x).split(self.n_embd, dim=2)",
                               "q, k, v = self.c_attn(x).chunk(3, dim=-1)"]))
    _apply_split(g, fault, n, body)
    if causal and not sdpa and fault not in _MASK_FAULTS and g.chance(0.5):
        # the nanoGPT buffer: tril of ones viewed (1, 1, N, N), blocked where == 0
        g.axes["mask_build"] = "nanogpt_bias"
        g.o.init.append('self.register_buffer("bias", torch.tril(torch.ones(max_len, max_len))'
                        '.view(1, 1, max_len, max_len))')
        _core(g, n, fault, "q", "k", "v", "4d", False, sdpa, body, "y", True)
        # insert the masked_fill right before the softmax line
        idx = next(i for i, line in enumerate(body) if "softmax(" in line or "torch.exp(" in line)
        att = body[idx].split(" = ")[0]
        fill = _fill(g, None, att)
        body.insert(idx, g.pick("mask_use", [f"{att} = {att}.masked_fill(self.bias[:, :, :T, :T] == 0, {fill})",
                                             f"{att}.masked_fill_(self.bias[:, :, :T, :T] == 0, {fill})"]))
    else:
        _core(g, n, fault, "q", "k", "v", "4d", causal, sdpa, body, "y", True)
    _apply_merge(g, fault, n, body, "y", "y")
    body.append("return self.c_proj(y)")
    return body, dict(projections=("c_attn",), out_proj="c_proj")


def _shape_timm(g: _Gen, fault, causal, sdpa) -> tuple[list[str], dict]:
    w = g.pick("width_name", _WIDTH_NAMES)
    n = _Names("self", "dim", "num_heads", "head_dim", "B", "N", w, "x")
    g.o.init += ["self.qkv = nn.Linear(d_model, d_model * 3)", "self.proj = nn.Linear(d_model, d_model)",
                 "self.num_heads = n_heads", "self.dim = d_model", "self.head_dim = d_model // n_heads",
                 "self.dropout = dropout"]
    body = [f"B, N, {w} = x.shape"]
    if fault == "ATT401":
        body.append("q, k, v = self.qkv(x).chunk(3, dim=-1)")
        _apply_split(g, fault, n, body)
    else:
        style = g.pick("split_style", ["timm_unbind", "timm_index", "einops_three", "chunk_each"])
        if style == "timm_unbind":
            body.append("qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)")
            body.append("q, k, v = qkv.unbind(0)")
        elif style == "timm_index":
            body.append("qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)")
            body.append("q, k, v = qkv[0], qkv[1], qkv[2]")
        elif style == "einops_three":
            g.o.imports.add("from einops import rearrange")
            body.append("qkv = rearrange(self.qkv(x), 'b n (three h d) -> three b h n d', three=3, "
                        "h=self.num_heads)")
            body.append(g.pick("three_unpack", ["q, k, v = qkv.unbind(0)", "q, k, v = qkv",
                                                "q, k, v = qkv[0], qkv[1], qkv[2]"]))
        else:
            body.append("q, k, v = self.qkv(x).chunk(3, dim=-1)")
            _apply_split(g, fault, n, body)
    _core(g, n, fault, "q", "k", "v", "4d", causal, sdpa, body, "x", True)
    _apply_merge(g, fault, n, body, "x", "x")
    body.append("return self.proj(x)")
    return body, dict(projections=("qkv",), out_proj="proj")


def _shape_lucid(g: _Gen, fault, causal, sdpa) -> tuple[list[str], dict]:
    n = _Names("self", "dim", "heads", "dim_head", "b", "n", None, "x")
    g.o.imports.add("from einops import rearrange")
    g.o.init += ["self.heads = n_heads", "self.dim = d_model", "self.dim_head = d_model // n_heads",
                 "self.to_qkv = nn.Linear(d_model, d_model * 3, bias=False)",
                 "self.to_out = nn.Linear(d_model, d_model)", "self.dropout = dropout"]
    heads_last = fault not in ("ATT401", "ATT402") and not sdpa and g.chance(0.3)
    body = ["b, n, _ = x.shape", "qkv = self.to_qkv(x).chunk(3, dim=-1)"]
    if heads_last:
        g.axes["layout"] = "heads_last"
        e = g.pick("split", ["rearrange(t, 'b n (h d) -> b n h d', h=self.heads)",
                             "t.view(b, n, self.heads, -1)", "t.unflatten(-1, (self.heads, self.dim_head))"])
        body.append(f"q, k, v = map(lambda t: {e}, qkv)")
        _core(g, n, fault, "q", "k", "v", "hl", causal, sdpa, body, "out", False)
        body.append("out = " + g.pick("merge", ["rearrange(out, 'b n h d -> b n (h d)')", "out.reshape(b, n, -1)",
                                                "out.flatten(2)"]))
    else:
        if fault == "ATT401":
            e = _split_expr(g, fault, "t", n, True)
            body.append(f"q, k, v = map(lambda t: {e}, qkv)")
        else:
            body.append(g.pick("split_style", [
                "q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), qkv)",
                "q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=self.heads) for t in qkv)"]))
        _core(g, n, fault, "q", "k", "v", "4d", causal, sdpa, body, "out", False)
        if fault == "ATT402":
            body.append(f"out = {_merge_expr(g, fault, 'out', n, True)}")
        else:
            body.append("out = rearrange(out, 'b h n d -> b n (h d)')")
    body.append("return self.to_out(out)")
    return body, dict(projections=("to_qkv",), out_proj="to_out")


def _shape_fairseq(g: _Gen, fault, causal, sdpa) -> tuple[list[str], dict]:
    n = _Names("self", "embed_dim", "num_heads", "head_dim", "bsz", "tgt_len", "embed_dim", "query")
    g.o.init += ["self.embed_dim = d_model", "self.num_heads = n_heads", "self.head_dim = d_model // n_heads",
                 "self.q_proj = nn.Linear(d_model, d_model)", "self.k_proj = nn.Linear(d_model, d_model)",
                 "self.v_proj = nn.Linear(d_model, d_model)", "self.out_proj = nn.Linear(d_model, d_model)",
                 "self.dropout = dropout"]
    body = ["tgt_len, bsz, embed_dim = query.size()", "q = self.q_proj(query)", "k = self.k_proj(query)",
            "v = self.v_proj(query)"]
    proj_scale = fault not in ("ATT101", "ATT104") and g.chance(0.5)
    if proj_scale:
        # fairseq scales q right after the projection, with a stored factor
        if fault in ("ATT102", "ATT103", "ATT105"):
            expr = {"ATT102": "self.embed_dim ** -0.5", "ATT103": "1.0 / self.head_dim",
                    "ATT105": "self.head_dim ** 0.5"}[fault]
        else:
            expr = g.pick("scale_form", ["self.head_dim ** -0.5", "1 / math.sqrt(self.head_dim)"])
        g.o.init.append(f"self.scaling = {expr}")
        body.append(g.pick("scale_at", ["q *= self.scaling", "q = q * self.scaling"]))
    for t in ("q", "k", "v"):
        if fault == "ATT401":
            body.append(f"{t} = {t}.contiguous().view(bsz * self.num_heads, tgt_len, self.head_dim)")
        else:
            body.append(f"{t} = {t}.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)")
    _core(g, n, fault, "q", "k", "v", "3d", causal, False, body, "attn", True, scale=not proj_scale)
    if fault == "ATT402":
        body.append("attn = attn.contiguous().view(tgt_len, bsz, embed_dim)")
    else:
        body.append("attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)")
    body.append("return self.out_proj(attn)")
    g.o.fwd_params.insert(0, "query")
    return body, dict(projections=("q_proj", "k_proj", "v_proj"), out_proj="out_proj", seq_first=True)


def _shape_hf(g: _Gen, fault, causal, sdpa) -> tuple[list[str], dict]:
    n_cls = _Names("self", "hidden_size", "num_heads", "head_dim", "bsz", "q_len", None, "hidden_states")
    n_fn = _Names("module", "hidden_size", "num_heads", "head_dim", "", "", None, "")
    gqa = fault == "ATT403" or g.chance(0.35)
    g.o.init += ["self.hidden_size = d_model", "self.num_heads = n_heads", "self.head_dim = d_model // n_heads",
                 "self.num_key_value_heads = n_kv_heads or n_heads",
                 "self.num_key_value_groups = self.num_heads // self.num_key_value_heads",
                 "self.q_proj = nn.Linear(d_model, self.num_heads * self.head_dim)",
                 "self.k_proj = nn.Linear(d_model, self.num_key_value_heads * self.head_dim)",
                 "self.v_proj = nn.Linear(d_model, self.num_key_value_heads * self.head_dim)",
                 "self.o_proj = nn.Linear(self.num_heads * self.head_dim, d_model)",
                 "self.dropout = dropout", "self.attention_dropout = dropout"]
    # repeat_kv: expand key/value heads for GQA
    rep_body = []
    if gqa:
        g.axes["gqa"] = "yes"
        if fault == "ATT403":
            form = g.pick("gqa_expand", ["repeat", "tile", "cat", "cat_comprehension"])
            rep_body = {"repeat": ["return hidden_states.repeat(1, n_rep, 1, 1)"],
                        "tile": ["return hidden_states.tile((1, n_rep, 1, 1))"],
                        "cat": ["return torch.cat([hidden_states] * n_rep, dim=1)"],
                        "cat_comprehension": ["return torch.cat([hidden_states for _ in range(n_rep)], dim=1)"]}[form]
        else:
            form = g.pick("gqa_expand", ["expand_reshape", "repeat_interleave", "torch_repeat_interleave"])
            rep_body = {"expand_reshape": [
                "batch, num_key_value_heads, slen, head_dim = hidden_states.shape",
                "if n_rep == 1:", "    return hidden_states",
                "hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)",
                "return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)"],
                "repeat_interleave": ["return hidden_states.repeat_interleave(n_rep, dim=1)"],
                "torch_repeat_interleave": ["return torch.repeat_interleave(hidden_states, n_rep, dim=1)"]}[form]
        g.o.funcs.append("def repeat_kv(hidden_states, n_rep):\n" + textwrap.indent("\n".join(rep_body), "    ") + "\n")
    use_eager = not sdpa
    fn_body: list[str] = []
    if gqa:
        fn_body += ["key_states = repeat_kv(key, module.num_key_value_groups)",
                    "value_states = repeat_kv(value, module.num_key_value_groups)"]
    else:
        fn_body += ["key_states = key", "value_states = value"]
    fn_params = ["module", "query", "key", "value", "attention_mask", "scaling", "dropout=0.0"]
    # the scale comes in as ``scaling``; its faults live in the class's __init__
    scale_fault = fault if fault in ("ATT101", "ATT102", "ATT103", "ATT104", "ATT105") else None
    c_body = [g.pick("input_shape", ["input_shape = hidden_states.shape[:-1]",
                                     "input_shape = hidden_states.size()[:-1]"]),
              "hidden_shape = (*input_shape, -1, self.head_dim)"]
    for t, p in (("query_states", "q_proj"), ("key_states", "k_proj"), ("value_states", "v_proj")):
        if fault == "ATT401":
            c_body.append(f"{t} = self.{p}(hidden_states).view(input_shape[0], -1, input_shape[1], self.head_dim)")
        else:
            c_body.append(f"{t} = self.{p}(hidden_states).view(hidden_shape).transpose(1, 2)")
    if use_eager:
        ext = "attention_mask" if causal and fault not in _MASK_FAULTS else None
        n_fn.L = ""
        # scaling arrives as an argument: apply it (or fail to) inside the function
        _hf_scale(g, fault, scale_fault)
        _core_hf(g, n_fn, fault, fn_body, causal, ext)
        if fault == "ATT402":
            fn_body.append("attn_output = attn_output.contiguous()")
        else:
            fn_body.append("attn_output = attn_output.transpose(1, 2).contiguous()")
        fn_body.append("return attn_output, attn_weights")
        drop = g.axes["dropout"]
        if drop == "default_p":
            fn_params[-1] = "dropout=0.1"
        elif drop == "training_param":
            fn_params.append("training=False")
        g.o.funcs.append(f"def eager_attention_forward({', '.join(fn_params)}):\n"
                         + textwrap.indent("\n".join(fn_body), "    ") + "\n")
        if ext:
            fill = _fill(g, None, "query_states")
            c_body.append(g.pick("hf_mask", [
                f"attention_mask = torch.full((q_len, q_len), {fill}, dtype=query_states.dtype).triu(1)[None, None]",
                f"attention_mask = torch.zeros(q_len, q_len, dtype=query_states.dtype).masked_fill("
                f"torch.ones(q_len, q_len, dtype=torch.bool).triu(1), {fill})[None, None]"]))
            c_body.insert(0, "bsz, q_len, _ = hidden_states.shape")
        else:
            c_body.append("attention_mask = None")
        if drop == "default_p":
            passed = ""
        elif drop == "caller_ungated":
            passed = ", dropout=self.attention_dropout"
        elif drop == "training_param":
            passed = ", dropout=self.attention_dropout, training=self.training"
        else:
            passed = ", " + g.pick("hf_dropout", ["dropout=0.0 if not self.training else self.attention_dropout",
                                                  "dropout=self.attention_dropout if self.training else 0.0"])
        c_body.append("attn_output, attn_weights = eager_attention_forward(self, query_states, key_states, "
                      "value_states, attention_mask, scaling=self.scaling" + passed + ")")
    else:
        n_cls.L = "q_len"
        c_body.insert(0, "bsz, q_len, _ = hidden_states.shape")
        if gqa:
            c_body += ["key_states = repeat_kv(key_states, self.num_key_value_groups)",
                       "value_states = repeat_kv(value_states, self.num_key_value_groups)"]
        _core(g, n_cls, fault, "query_states", "key_states", "value_states", "4d", causal, True, c_body,
              "attn_output", False)
        if fault == "ATT402":
            c_body.append("attn_output = attn_output.contiguous()")
        else:
            c_body.append("attn_output = attn_output.transpose(1, 2).contiguous()")
    c_body.append("attn_output = attn_output.reshape(*input_shape, -1).contiguous()")
    c_body.append("return self.o_proj(attn_output)")
    g.o.fwd_params.insert(0, "hidden_states")
    return c_body, dict(projections=("q_proj", "k_proj", "v_proj"), out_proj="o_proj")


def _hf_scale(g: _Gen, fault, scale_fault) -> None:
    d = g.pick("d_source", ["self.head_dim", "(self.hidden_size // self.num_heads)"])
    if scale_fault == "ATT102":
        d = "self.hidden_size"
        g.axes["d_source"] = "hidden_size"
    # ATT101: the function never applies ``scaling``; the stored factor itself is right
    _, expr = _scale_factor(g, scale_fault if scale_fault not in ("ATT104", "ATT101") else None, d, True)
    g.o.init.append(f"self.scaling = {expr}")


def _core_hf(g: _Gen, n: _Names, fault, fn_body: list[str], causal: bool, ext: str | None) -> None:
    scale_fault = fault if fault in ("ATT101", "ATT102", "ATT103", "ATT104", "ATT105") else None
    att = "attn_weights"
    op = g.pick("scores_op", ["torch.matmul(query, key_states.transpose(2, 3))",
                              "query @ key_states.transpose(-2, -1)",
                              "torch.einsum('bhqd,bhkd->bhqk', query, key_states)"])
    if scale_fault == "ATT101":
        fn_body.append(f"{att} = {op}")
        g.axes["scale_at"] = "none"
    elif scale_fault == "ATT104":
        fn_body.append("query = query * scaling")
        fn_body.append(f"{att} = {op} * scaling")
        g.axes["scale_at"] = "q+scores"
    else:
        where = g.pick("scale_at", ["scores", "q"])
        if where == "q":
            fn_body.append("query = query * scaling")
            fn_body.append(f"{att} = {op}")
        else:
            fn_body.append(f"{att} = {op} * scaling")
    mask = _Mask(g, n, fault, "query.size(-2)") if causal and ext is None else None
    body: list[str] = []
    if ext:
        fn_body.append(f"if {ext} is not None:")
        fn_body.append(f"    causal_mask = {ext}[:, :, :, : key_states.shape[-2]]")
        fn_body.append(f"    {att} = {att} + causal_mask")
    elif mask is not None:
        # mask faults in the Hugging Face shape: the function builds and applies its own mask
        fn_body += mask.setup()
        fill = _fill(g, fault, att)
        after = []
        if fault == "ATT206":
            after.append(f"{att} = {att}.masked_fill({mask.blocked()[0]}, 0.0)")
        elif fault == "ATT207":
            fn_body.append(f"{att} = {att} + {mask.keep()[0]}")
        else:
            blocked = mask.bool_of("keep" if fault == "ATT201" else "blocked")
            uses = [f"{att} = {att}.masked_fill({blocked}, {fill})"]
            if fault != "ATT204":
                uses.append(f"{att} = torch.where({blocked}, {fill}, {att})")
            fn_body.append(g.pick("mask_use", uses))
        _softmax(g, fault, att, 4, fn_body, True)
        fn_body += after
        _hf_dropout(g, fault, fn_body)
        fn_body.append("attn_output = torch.matmul(attn_weights, value_states)")
        return
    _softmax(g, fault, att, 4, fn_body, True)
    _hf_dropout(g, fault, fn_body)
    fn_body.append(g.pick("pv_op", ["attn_output = torch.matmul(attn_weights, value_states)",
                                    "attn_output = attn_weights @ value_states"]))


def _hf_dropout(g: _Gen, fault, fn_body: list[str]) -> None:
    """Dropout inside the attention function; ``g.axes["dropout"]`` tells :func:`_shape_hf` what
    its signature and its caller pass (``default_p``: ``dropout=0.1`` left to its default;
    ``caller_ungated``: ``dropout=self.attention_dropout``; ``training_param``: a ``training``
    argument the caller sets to ``self.training``)."""
    if fault == "ATT501":
        # F.dropout's training defaults to True: whatever p reaches it in eval() is dropped
        fn_body.append(g.pick("dropout", [
            ("ungated_module_attr", "attn_weights = nn.functional.dropout(attn_weights, p=module.attention_dropout)"),
            ("caller_ungated", "attn_weights = F.dropout(attn_weights, p=dropout)"),
            ("default_p", "attn_weights = F.dropout(attn_weights, dropout)")]))
    else:
        fn_body.append(g.pick("dropout", [
            ("module_training", "attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)"),
            ("F_module_training", "attn_weights = F.dropout(attn_weights, p=dropout, training=module.training)"),
            ("caller_gated", "attn_weights = F.dropout(attn_weights, p=dropout)"),
            ("training_param", "attn_weights = F.dropout(attn_weights, p=dropout, training=training)")]))


_SHAPES = {"nanogpt": _shape_nanogpt, "timm": _shape_timm, "lucid": _shape_lucid,
           "fairseq": _shape_fairseq, "hf": _shape_hf}


def _faults_for(shape: str) -> tuple[str, ...]:
    out = list(FAULTS)
    if shape != "hf":
        out.remove("ATT403")
    if shape not in _PADDING_SHAPES:
        out.remove("ATT208")
    return tuple(out)


def generate(seed: int, fault: str | None | bool = True) -> Variant:
    """One variant for ``seed``.  ``fault=True`` draws a fault (or none, 40 %); a code forces it;
    ``None``/``False`` generates a correct module."""
    g = _Gen(seed)
    shape = g.pick("shape", SHAPES)
    if fault is True:
        fault = None if g.chance(0.4) else g.rng.choice(_faults_for(shape))
    elif fault is False:
        fault = None
    elif fault == "ATT403":
        shape = g.axes["shape"] = "hf"
    elif fault == "ATT208" and shape not in _PADDING_SHAPES:
        shape = g.axes["shape"] = g.rng.choice(_PADDING_SHAPES)
    # a key padding mask (not with a causal mask): ATT208 always, ATT206 on it half the time
    g.padding = shape in _PADDING_SHAPES and (
        fault == "ATT208" or fault == "ATT206" and g.chance(0.5)
        or fault not in _MASK_FAULTS and g.chance(0.25))
    if g.padding:
        g.axes["padding"] = "attention_mask"
        g.o.fwd_params.append("attention_mask=None")
    causal = not g.padding and (fault in _MASK_FAULTS or g.chance(0.6))
    sdpa_ok = shape in ("nanogpt", "timm", "hf", "lucid") and fault not in _MANUAL_ONLY
    sdpa = sdpa_ok and g.chance(0.3)
    g.axes["path"] = "sdpa" if sdpa else "manual"
    body, meta = _SHAPES[shape](g, fault, causal, sdpa)
    if any("math." in line for line in body + g.o.init + g.o.methods + g.o.funcs):
        g.o.imports.add("import math")
    src = "\n".join(sorted(g.o.imports, key=lambda s: (s.startswith("from"), s))) + "\n\n\n"
    for f in g.o.funcs:
        src += f + "\n\n"
    params = g.o.fwd_params or ["x"]
    if params and params[0] not in ("x", "query", "hidden_states"):
        params.insert(0, "x")
    init = ["super().__init__()"] + _dedupe(g.o.init)
    src += ("class Attention(nn.Module):\n"
            "    def __init__(self, d_model, n_heads, n_kv_heads=None, dropout=0.0, max_len=16):\n"
            + textwrap.indent("\n".join(init), " " * 8) + "\n\n")
    for m in _dedupe(g.o.methods):
        src += textwrap.indent(m, "    ") + "\n"
    src += f"    def forward(self, {', '.join(params)}):\n" + textwrap.indent("\n".join(body), " " * 8) + "\n"
    fp16 = any("fill" == a for a in g.axes) or fault in ("ATT204", "ATT205")
    return Variant(seed=seed, source=src, fault=fault, shape=shape, axes=dict(g.axes),
                   n_heads=4 if g.axes.get("gqa") == "yes" else 3,
                   n_kv_heads=2 if g.axes.get("gqa") == "yes" else 3,
                   head_dim=4, causal=causal, seq_first=meta.get("seq_first", False), padding=g.padding,
                   projections=meta["projections"], out_proj=meta["out_proj"],
                   dropout=0.25 if (fault == "ATT501" or g.axes.get("dropout", "none") != "none"
                                    or "sdpa_dropout" in g.axes or shape == "hf") else 0.0,
                   fp16=fp16)


def _dedupe(lines: list[str]) -> list[str]:
    seen, out = set(), []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out
