"""Attention idioms outside the idiom oracle's generator, each as a correct and a buggy module.

Each module defines ``attend(q, k, v)`` on (B, H, L, d) float64 tensors.  It is RUN against a
reference (``F.scaled_dot_product_attention``, or the same ``nn.MultiheadAttention`` /
projection with a correct causal mask) to learn whether it is correct, then linted with
``attncheck.lint_source`` (which never runs it).  A module whose run contradicts its label is
dropped.  flash-attn and xformers are replaced by stand-ins with their documented semantics
(flash-attn README: ``flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None,
causal=False)`` on (B, L, H, d); xformers docs: ``memory_efficient_attention(query, key, value,
attn_bias=None, p=0.0, scale=None)`` on (B, M, H, K), ``attn_bias`` added to the scores).

    PYTHONPATH=$PWD python bench/idiom_families.py
"""
from __future__ import annotations

import sys
import types

import torch
import torch.nn.functional as F


def _install_kernel_stand_ins() -> None:
    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, **kw):
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           dropout_p=dropout_p, is_causal=causal, scale=softmax_scale)
        return y.transpose(1, 2)

    class LowerTriangularMask:
        pass

    def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None):
        q, k, v = (t.transpose(1, 2) for t in (query, key, value))
        if isinstance(attn_bias, LowerTriangularMask):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p, scale=scale)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias, dropout_p=p, scale=scale)
        return y.transpose(1, 2)

    flash = types.ModuleType("flash_attn")
    flash.flash_attn_func = flash_attn_func
    xf, xops = types.ModuleType("xformers"), types.ModuleType("xformers.ops")
    xops.memory_efficient_attention = memory_efficient_attention
    xops.LowerTriangularMask = LowerTriangularMask
    xf.ops = xops
    sys.modules.setdefault("flash_attn", flash)
    sys.modules.setdefault("xformers", xf)
    sys.modules.setdefault("xformers.ops", xops)

HDR = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
# each: name, causal, template with @@ slot, correct fill, buggy fill, rule the bug belongs to
CASES = [
 ("baddbmm_alpha", False, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    q, k, v = (t.reshape(B * H, L, D) for t in (q, k, v))
    scores = torch.baddbmm(torch.zeros(B * H, L, L, dtype=q.dtype), q, k.transpose(1, 2), beta=0.0, alpha=@@)
    w = scores.softmax(dim=-1)
    return torch.bmm(w, v).view(B, H, L, D)
''', "1.0 / math.sqrt(D)", "1.0 / D", "ATT102"),
 ("baddbmm_no_alpha", False, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    q, k, v = (t.reshape(B * H, L, D) for t in (q, k, v))
    scores = torch.baddbmm(torch.zeros(B * H, L, L, dtype=q.dtype), q@@, k.transpose(1, 2), beta=0.0)
    w = scores.softmax(dim=-1)
    return torch.bmm(w, v).view(B, H, L, D)
''', " * D ** -0.5", "", "ATT101"),
 ("masked_fill_not_triu_ones", True, '''
def attend(q, k, v):
    L, D = q.size(-2), q.size(-1)
    mask = torch.ones(L, L).triu(1).bool()
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    scores = scores.masked_fill(@@, float('-inf'))
    return scores.softmax(dim=-1) @ v
''', "mask", "~mask", "ATT201"),
 ("masked_fill_eq1_tril", True, '''
def attend(q, k, v):
    L, D = q.size(-2), q.size(-1)
    mask = torch.tril(torch.ones(L, L))
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    scores = scores.masked_fill(mask == @@, float('-inf'))
    return scores.softmax(dim=-1) @ v
''', "0", "1", "ATT201"),
 ("sdpa_docs_reference_bias", True, '''
def attend(q, k, v):
    L, S = q.size(-2), k.size(-2)
    attn_bias = torch.zeros(L, S, dtype=q.dtype)
    temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=@@)
    attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)))
    scores += attn_bias
    return torch.softmax(scores, dim=-1) @ v
''', "0", "-1", "ATT202"),
 ("sdpa_bool_blocked_mask", True, '''
def attend(q, k, v):
    L = q.size(-2)
    blocked = torch.ones(L, L, dtype=torch.bool).triu(1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=@@)
''', "~blocked", "blocked", "ATT201"),
 ("sdpa_float_log_tril", True, '''
def attend(q, k, v):
    L = q.size(-2)
    bias = torch.zeros(L, L, dtype=q.dtype).masked_fill(@@, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
''', "torch.ones(L, L, dtype=torch.bool).triu(1)", "torch.ones(L, L, dtype=torch.bool).triu()", "ATT202"),
 ("alibi_bias_then_causal", True, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    slopes = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)], dtype=q.dtype)
    rel = torch.arange(L)[None, :] - torch.arange(L)[:, None]
    alibi = slopes[:, None, None] * rel[None].to(q.dtype)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D) + alibi
    causal = torch.triu(torch.full((L, L), float("-inf"), dtype=q.dtype), diagonal=@@)
    scores = scores + causal
    return scores.softmax(-1) @ v
''', "1", "0", "ATT202"),
 ("where_arange_kv_offset", True, '''
def attend(q, k, v):
    q_len, kv_len = q.size(-2), k.size(-2)
    i = torch.arange(q_len)[:, None] + (kv_len - q_len)
    j = torch.arange(kv_len)[None, :]
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.size(-1) ** -0.5
    scores = torch.where(j @@ i, scores, torch.finfo(scores.dtype).min)
    return F.softmax(scores, dim=-1) @ v
''', "<=", "<", "ATT202"),
 ("xformers_bias_tensor", True, '''
import xformers.ops as xops

def attend(q, k, v):
    L = q.size(-2)
    bias = torch.triu(torch.full((L, L), float("-inf"), dtype=q.dtype), diagonal=@@)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    return xops.memory_efficient_attention(q, k, v, attn_bias=bias).transpose(1, 2)
''', "1", "0", "ATT202"),
 ("mha_bool_mask", True, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    x = q.transpose(1, 2).reshape(B, L, H * D)
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(H * D, H, batch_first=True).to(q.dtype)
    mask = @@
    y, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    return y
''', "torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)", "torch.tril(torch.ones(L, L, dtype=torch.bool))", "ATT201"),
 ("mha_float_mask", True, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    x = q.transpose(1, 2).reshape(B, L, H * D)
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(H * D, H, batch_first=True).to(q.dtype)
    mask = @@
    y, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    return y
''', "torch.triu(torch.full((L, L), float('-inf'), dtype=q.dtype), diagonal=1)", "torch.triu(torch.full((L, L), float('-inf'), dtype=q.dtype))", "ATT202"),
 ("mha_generate_square", True, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    x = q.transpose(1, 2).reshape(B, L, H * D)
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(H * D, H, batch_first=True).to(q.dtype)
    mask = nn.Transformer.generate_square_subsequent_mask(L, dtype=q.dtype)
    y, _ = mha(x, x, x, attn_mask=@@, need_weights=False)
    return y
''', "mask", "mask == 0", "ATT201"),
 ("mha_forward_fn", True, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    E = H * D
    x = q.transpose(1, 2).reshape(B, L, E).transpose(0, 1)
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(E, H).to(q.dtype)
    mask = torch.ones(L, L, dtype=torch.bool).@@
    y, _ = F.multi_head_attention_forward(x, x, x, E, H, mha.in_proj_weight, mha.in_proj_bias, None, None,
                                          False, 0.0, mha.out_proj.weight, mha.out_proj.bias,
                                          training=False, need_weights=False, attn_mask=mask)
    return y.transpose(0, 1)
''', "triu(1)", "tril()", "ATT201"),
 ("gqa_expand_group_axis", False, '''
def attend(q, k, v):
    B, H, L, D = q.shape
    n_rep = 2
    k, v = k[:, ::n_rep], v[:, ::n_rep]
    Hkv = k.shape[1]
    k = @@
    v = v[:, :, None].expand(B, Hkv, n_rep, L, D).reshape(B, H, L, D)
    return F.scaled_dot_product_attention(q, k, v)
''', "k[:, :, None].expand(B, Hkv, n_rep, L, D).reshape(B, H, L, D)", "k.repeat(1, n_rep, 1, 1)", "ATT403"),
 ("softmax_dim_keyword_class", False, '''
class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=@@)

    def forward(self, q, k, v):
        return self.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))) @ v

def attend(q, k, v):
    return Attn()(q, k, v)
''', "-1", "-2", "ATT301"),
 ("masked_fill_full_true_triu", True, '''
def attend(q, k, v):
    L = q.size(-2)
    mask = torch.full((L, L), True).triu(@@)
    w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(mask, float("-inf"))
    return w.softmax(-1) @ v
''', "1", "0", "ATT202"),
 ("kv_cache_tril_local", True, '''
def attend(q, k, v):
    q_len, kv_len = q.size(-2), k.size(-2)
    past = kv_len - q_len
    keep = torch.tril(torch.ones(q_len, kv_len, dtype=torch.bool), diagonal=@@)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return s.masked_fill(~keep, float("-inf")).softmax(-1) @ v
''', "past", "past - 1", "ATT202"),
 ("where_keep_float_min", True, '''
def attend(q, k, v):
    L = q.size(-2)
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.size(-1) ** -0.5
    s = torch.where(@@, s, torch.finfo(s.dtype).min)
    return torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), v)
''', "keep", "~keep", "ATT201"),
 ("additive_mask_helper_two_calls", True, '''
def add_bias(scores, bias):
    return scores + bias

def attend(q, k, v):
    L = q.size(-2)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    zero = add_bias(s, torch.zeros(L, L, dtype=s.dtype))
    causal = add_bias(zero, torch.triu(torch.full((L, L), float("-inf"), dtype=s.dtype), diagonal=@@))
    return causal.softmax(-1) @ v
''', "1", "0", "ATT202"),
 ("split_heads_width_D", False, '''
class Attn(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        torch.manual_seed(0)
        self.qkv = nn.Linear(d_model, 3 * d_model).double()

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)
        return @@

def attend(q, k, v):
    B, H, L, D = q.shape
    x = q.transpose(1, 2).reshape(B, L, H * D)
    return Attn(H * D, H)(x)
''', "y.transpose(1, 2).reshape(B, T, D)", "y.reshape(B, T, D)", "ATT402"),
]


PROJ = '''
class Attn(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        torch.manual_seed(0)
        self.qkv = nn.Linear(d_model, 3 * d_model)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
BODY

def attend(q, k, v):
    B, H, L, D = q.shape
    x = q.transpose(1, 2).reshape(B, L, H * D)
    return Attn(H * D, H).double()(x)
'''
_BLHD = "        q, k, v = (t.view(B, L, self.n_heads, self.head_dim) for t in (q, k, v))\n"
_BHLD = "        q, k, v = (t.view(B, L, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))\n"
CASES += [
 ("proj_flash_layout", False, "from flash_attn import flash_attn_func\n" + PROJ.replace("BODY", _BLHD +
  "        y = flash_attn_func(@@)\n        return y.reshape(B, L, C)"),
  "q, k, v", "q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)", "ATT404"),
 ("proj_xformers_layout", False, "import xformers.ops as xops\n" + PROJ.replace("BODY", _BLHD +
  "        y = xops.memory_efficient_attention(@@)\n        return y.reshape(B, L, C)"),
  "q, k, v", "q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)", "ATT404"),
 ("proj_flash_softmax_scale", False, "from flash_attn import flash_attn_func\n" + PROJ.replace("BODY", _BLHD +
  "        y = flash_attn_func(q, k, v, softmax_scale=@@)\n        return y.reshape(B, L, C)"),
  "self.head_dim ** -0.5", "C ** -0.5", "ATT102"),
 ("proj_merge_permute_flatten", False, PROJ.replace("BODY", _BHLD +
  "        y = F.scaled_dot_product_attention(q, k, v)\n        return @@"),
  "y.permute(0, 2, 1, 3).flatten(2)", "y.reshape(B, L, -1)", "ATT402"),
 ("proj_sdpa_scale_width_D", False, PROJ.replace("B, L, C = x.shape", "B, L, D = x.shape").replace("split(C", "split(D").replace("BODY", _BHLD +
  "        y = F.scaled_dot_product_attention(q, k, v, scale=@@)\n        return y.transpose(1, 2).reshape(B, L, D)"),
  "(D // self.n_heads) ** -0.5", "D ** -0.5", "ATT102"),
]


def _ref_mha(q, causal, fn_form=False):
    B, H, L, D = q.shape
    E = H * D
    torch.manual_seed(0)
    if fn_form:
        mha = torch.nn.MultiheadAttention(E, H).to(q.dtype)
        x = q.transpose(1, 2).reshape(B, L, E)
        torch.manual_seed(0)
        mha2 = torch.nn.MultiheadAttention(E, H, batch_first=True).to(q.dtype)
        mha2.load_state_dict(mha.state_dict())
        mha = mha2
    else:
        mha = torch.nn.MultiheadAttention(E, H, batch_first=True).to(q.dtype)
        x = q.transpose(1, 2).reshape(B, L, E)
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    y, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    return y


def _ref_linear(q):
    B, H, L, D = q.shape
    x = q.transpose(1, 2).reshape(B, L, H * D)
    torch.manual_seed(0)
    lin = torch.nn.Linear(H * D, 3 * H * D).double()
    a, b, c = lin(x).split(H * D, dim=2)
    a, b, c = (t.view(B, L, H, D).transpose(1, 2) for t in (a, b, c))
    return F.scaled_dot_product_attention(a, b, c).transpose(1, 2).reshape(B, L, H * D)


def reference(name, causal, q, k, v):
    if name == "alibi_bias_then_causal":
        B, H, L, D = q.shape
        slopes = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)], dtype=q.dtype)
        rel = torch.arange(L)[None, :] - torch.arange(L)[:, None]
        bias = slopes[:, None, None] * rel[None].to(q.dtype)
        bias = bias + torch.triu(torch.full((L, L), float("-inf"), dtype=q.dtype), diagonal=1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    if name == "softmax_scores_merge_permute_flatten":
        B, H, L, D = q.shape
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, H * D)
    if name.startswith("mha"):
        return _ref_mha(q, causal, name == "mha_forward_fn")
    if name == "split_heads_width_D" or name.startswith("proj_"):
        return _ref_linear(q)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def truth(name, causal, src):
    ns = {}
    exec(compile(src, name, "exec"), ns)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, dtype=torch.float64, generator=g) for _ in range(3))
    try:
        y = ns["attend"](q, k, v)
    except Exception as e:  # noqa: BLE001 - a defect of the case, reported as such
        return "error:" + type(e).__name__ + str(e)[:80]
    if name == "gqa_expand_group_axis":
        kk, vv = k[:, ::2].repeat_interleave(2, dim=1), v[:, ::2].repeat_interleave(2, dim=1)
        ref = F.scaled_dot_product_attention(q, kk, vv)
    else:
        ref = reference(name, causal, q, k, v)
    if y.shape != ref.shape or not torch.isfinite(y).all():
        return "buggy"
    return "correct" if torch.allclose(y, ref, atol=1e-6) else "buggy"


def main():
    from attncheck import lint_source

    _install_kernel_stand_ins()
    rows = []
    for name, causal, tpl, good, bad, rule in CASES:
        for label, fill in (("correct", good), ("buggy", bad)):
            src = HDR + tpl.strip("\n").replace("@@", fill) + "\n"
            t = truth(name, causal, src)
            codes = sorted({f.code for f in lint_source(src, path=f"{name}.py") if f.severity != "info"})
            rows.append((name, label, t, codes, rule))
    caught = missed = false = ok_correct = dropped = 0
    for name, label, t, codes, rule in rows:
        status = ""
        if t != label:
            status = f"DROPPED (execution says {t})"; dropped += 1
        elif label == "buggy":
            if codes: caught += 1; status = "caught"
            else: missed += 1; status = "MISSED"
        else:
            if codes: false += 1; status = "FALSE"
            else: ok_correct += 1; status = "ok"
        print(f"{name:40s} {label:8s} {status:32s} {codes} (family {rule})")
    print(f"buggy caught {caught}/{caught + missed}; false findings {false}/{false + ok_correct}; dropped {dropped}")


if __name__ == "__main__":
    main()
