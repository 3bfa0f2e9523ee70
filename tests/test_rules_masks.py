"""Mask rules ATT201/202/204/205 (and later ATT2xx): fixtures, messages, fixes, legit patterns."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from attncheck.lint.engine import lint_source

ROOT = Path(__file__).resolve().parents[1]
BUGGY = sorted((ROOT / "fixtures" / "lint" / "buggy").glob("mask_*.py"))
EXPECT_RE = re.compile(r"#\s*expect:\s*([A-Z0-9 ,]+)")
CODES = ("ATT201", "ATT202", "ATT203", "ATT204", "ATT205", "ATT206", "ATT207", "ATT208",
         "ATT209", "ATT210")


def mask_findings(src: str, select=("ATT2",)):
    return [f for f in lint_source(src, "<t>", select=select) if f.code in CODES]


def pairs(src: str) -> set[tuple[int, str]]:
    return {(f.line, f.code) for f in mask_findings(src)}


def expected(src: str) -> set[tuple[int, str]]:
    out = set()
    for i, line in enumerate(src.splitlines(), 1):
        m = EXPECT_RE.search(line)
        if m:
            out |= {(i, c.strip()) for c in m.group(1).split(",") if c.strip() in CODES}
    return out


def test_buggy_fixtures_exist_for_every_rule():
    text = "".join(p.read_text() for p in BUGGY)
    for code in ("ATT201", "ATT202", "ATT204", "ATT205"):
        assert text.count(f"expect: {code}") >= 3, code


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.name)
def test_buggy_fixture_raises_exactly_its_annotations(path):
    src = path.read_text()
    assert pairs(src) == expected(src)


# ---------------------------------------------------------------- messages ----------------
def test_att201_sdpa_message_names_convention_and_remedy():
    src = """
import torch
import torch.nn.functional as F
def f(q, k, v):
    L = q.shape[-2]
    m = torch.triu(torch.ones(L, L), diagonal=1).bool()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m)
"""
    (f,) = mask_findings(src)
    assert f.code == "ATT201" and f.line == 7
    assert "SDPA's boolean attn_mask is True = attend" in f.message
    assert "True above the diagonal" in f.message
    assert "is_causal=True" in f.message and "built on line 6" in f.message


def test_att202_message_mentions_nan_and_diagonal_fix():
    src = """
import torch
def f(s, L):
    s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(), float("-inf"))
    return s.softmax(-1)
"""
    (f,) = mask_findings(src)
    assert f.code == "ATT202"
    assert "diagonal=1" in f.message and "NaN" in f.message


def test_att204_fix_names_the_filled_tensor():
    src = "import torch\ndef f(scores, m):\n    return scores.masked_fill(m == 0, -1e9).softmax(-1)\n"
    (f,) = mask_findings(src)
    assert f.code == "ATT204" and f.col == src.splitlines()[2].index("-1e9")
    assert "torch.finfo(scores.dtype).min" in f.message
    assert f.fix is not None and f.fix.applicability == "unsafe"
    (edit,) = f.fix.edits
    lines = src.splitlines()
    line = lines[edit.line - 1]
    fixed = line[:edit.col] + edit.content + line[edit.end_col:]
    assert fixed.strip() == "return scores.masked_fill(m == 0, torch.finfo(scores.dtype).min).softmax(-1)"
    assert mask_findings(src.replace(line, fixed)) == []


def test_att204_fix_uses_the_torch_alias():
    src = "import torch as th\ndef f(w, m):\n    return th.where(m, w, -1e10).softmax(-1)\n"
    (f,) = mask_findings(src)
    assert f.fix.edits[0].content == "th.finfo(w.dtype).min"


def test_att205_message():
    src = "import torch\ndef f(scores, m):\n    return scores.masked_fill(m, 1e-9).softmax(-1)\n"
    (f,) = mask_findings(src)
    assert f.code == "ATT205" and "non-negative" in f.message and "-inf" in f.message


# ---------------------------------------------------------------- legitimate code ---------
CLEAN = {
    "nanogpt": """
import math
import torch
import torch.nn as nn
from torch.nn import functional as F
class A(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))
    def forward(self, q, k, v):
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v
""",
    "sdpa_keep_and_mha_block": """
import torch
import torch.nn as nn
import torch.nn.functional as F
class A(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2)
    def forward(self, x, q, k, v):
        L = q.shape[-2]
        keep = torch.ones(L, L, dtype=torch.bool).tril()
        future = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        b = F.scaled_dot_product_attention(q, k, v, attn_mask=~future)
        c, _ = self.attn(x, x, x, attn_mask=future)
        d, _ = self.attn(x, x, x, attn_mask=nn.Transformer.generate_square_subsequent_mask(L))
        return a, b, c, d
""",
    "fills_that_work": """
import torch
def f(s, m, keep):
    a = s.masked_fill(m, float("-inf")).softmax(-1)
    b = s.masked_fill(m, -1e4).softmax(-1)
    c = s.masked_fill(~keep, torch.finfo(s.dtype).min).softmax(-1)
    d = torch.where(keep, s, -torch.inf).softmax(-1)
    e = s.masked_fill(m, torch.finfo(torch.float16).min).softmax(-1)
    g = s.masked_fill(m, -65504).softmax(-1)
    return a, b, c, d, e, g
""",
    "zero_fill_not_before_softmax": """
import torch
class Enc:
    def forward(self, hidden_states, attention_mask):
        hidden_states = hidden_states.masked_fill(~attention_mask.unsqueeze(-1), 0.0)
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return hidden_states.softmax(-1)
""",
    "ssm_segsum_strict_lower": """
import torch
def segsum(x, T):
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    x = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=0)
    return x.masked_fill(~mask, -torch.inf)
""",
    "pointer_logits_not_softmaxed": """
import torch
def pointer(q, k, L):
    logits = q @ k.transpose(-2, -1)
    mask = torch.tril(torch.ones(L, L)).bool()
    return logits.masked_fill(mask, -1e4)
""",
    "swin_additive_minus_100": """
import torch
def f(attn, mask_windows):
    attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
    attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, 0.0)
    return (attn + attn_mask).softmax(-1)
""",
    "bert_minus_10000": """
import torch
def f(scores, attention_mask, dtype):
    ext = attention_mask[:, None, None, :].to(dtype)
    ext = (1.0 - ext) * -10000.0
    return (scores + ext).softmax(-1)
""",
    "explicit_fp32_mask": """
import torch
def f(attention_mask):
    return attention_mask.float().masked_fill(~attention_mask, -1e9)
""",
    "arange_causal": """
import torch
def f(s, L):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    s = s.masked_fill(j > i, float("-inf"))
    s = torch.where(i >= j, s, float("-inf"))
    return s.softmax(-1)
""",
    "x_transformers_max_neg": """
import torch
def max_neg_value(t):
    return -torch.finfo(t.dtype).max
def attend(sim, mask, i, j):
    causal = torch.ones((i, j), dtype=torch.bool).triu(j - i + 1)
    sim = sim.masked_fill(causal, max_neg_value(sim))
    sim = sim.masked_fill(~mask, max_neg_value(sim))
    return sim.softmax(dim=-1)
""",
}


@pytest.mark.parametrize("name", list(CLEAN))
def test_legitimate_patterns_raise_nothing(name):
    assert mask_findings(CLEAN[name]) == []


def test_cases_fixtures_when_present():
    """fixtures/cases versions of the handed mask cases raise exactly their annotations."""
    cases = ROOT / "fixtures" / "cases"
    wanted = {"b08": "ATT201", "b09": "ATT202", "b12": "ATT204", "b16": "ATT205"}
    found = 0
    for prefix, code in wanted.items():
        for p in cases.glob(f"{prefix}_*.py"):
            src = p.read_text()
            got = {c for _, c in pairs(src)}
            assert got == {code}, (p.name, got)
            found += 1
    if not found:
        pytest.skip("no fixtures/cases yet")


def test_buggy_fixtures_cover_the_later_rules():
    text = "".join(p.read_text() for p in BUGGY)
    for code in ("ATT203", "ATT206", "ATT207", "ATT208", "ATT209", "ATT210"):
        assert f"expect: {code}" in text, code


def test_later_case_fixtures_when_present():
    cases = ROOT / "fixtures" / "cases"
    wanted = {"b10": "ATT203", "b19": "ATT206", "b28": "ATT209", "b30": "ATT208",
              "b37": "ATT207"}
    found = 0
    for prefix, code in wanted.items():
        for p in cases.glob(f"{prefix}_*.py"):
            got = {c for _, c in pairs(p.read_text())}
            assert got == {code}, (p.name, got)
            found += 1
    if not found:
        pytest.skip("no fixtures/cases yet")


def test_att206_needs_a_blocking_fill_and_attention_weights():
    src = """
import torch
def f(s, rows, v):
    p = s.softmax(-1)
    p = p.masked_fill(rows, 0.0)
    q = s.softmax(-1).masked_fill(rows, float("-inf"))
    conf = s.softmax(-1).masked_fill(rows, float("-inf"))
    top = conf.topk(3, dim=-1)
    return p @ v, q @ v, top
"""
    assert pairs(src) == {(6, "ATT206")}


def test_att207_bool_vs_additive_masks():
    src = """
import torch
def f(scores, L):
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    bias = torch.zeros(L, L).masked_fill(~keep, float("-inf"))
    a = (scores + bias).softmax(-1)
    b = (scores + keep).softmax(-1)
    return a, b
"""
    assert pairs(src) == {(7, "ATT207")}


def test_att208_negated_keep_mask_is_fine_and_message():
    src = """
import torch
def f(scores, keep_mask, attention_mask):
    a = scores.masked_fill(~keep_mask.bool(), float("-inf")).softmax(-1)
    b = scores.masked_fill(keep_mask == 0, float("-inf")).softmax(-1)
    c = scores.masked_fill(keep_mask.bool(), float("-inf")).softmax(-1)
    d = scores.masked_fill(attention_mask, float("-inf")).softmax(-1)
    return a, b, c, d
"""
    (f,) = mask_findings(src)
    assert (f.line, f.code) == (6, "ATT208")
    assert "attention goes to the padding" in f.message


def test_att209_repeat_interleave_and_4d_repeat_are_fine():
    src = """
import torch
from torch import nn
class E(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)
    def forward(self, x, pad):
        m = pad[:, None, :].expand(-1, 3, 3)
        self.attn(x, x, x, attn_mask=m.repeat_interleave(2, dim=0))
        self.attn(x, x, x, attn_mask=m[:, None].repeat(1, 2, 1, 1).flatten(0, 1))
        return self.attn(x, x, x, attn_mask=m.repeat(2, 1, 1))
"""
    assert pairs(src) == {(12, "ATT209")}


def test_att210_min_plus_zero_one_is_fine():
    src = """
import torch
def f(attention_mask, L, dtype):
    causal = torch.full((L, L), torch.finfo(dtype).min).triu(1)
    a = causal + attention_mask[:, None, None, :]
    b = causal + torch.full((L, L), torch.finfo(dtype).min).tril(-4)
    return a, b
"""
    assert pairs(src) == {(6, "ATT210")}


def test_att203_only_with_a_cache():
    src = """
import torch.nn.functional as F
def prefill(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
def step(q, k, v, layer_past=None):
    a = F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[-2] > 1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
"""
    assert pairs(src) == {(7, "ATT203")}


def test_att208_polarity_from_the_assigned_name():
    src = """
import torch
def f(scores, attention_mask):
    valid = attention_mask[:, None, None, :].bool()
    scores = scores.masked_fill(valid, float("-inf"))
    return scores.softmax(-1)
"""
    assert pairs(src) == {(5, "ATT208")}


_BEAM = '''
import torch


def attend(q, k):
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    bias = torch.triu(torch.full((s.shape[-1], s.shape[-1]), -1e9{dtype}), 1)
    return torch.softmax(s + bias, dim=-1)
'''


@pytest.mark.parametrize("dtype, expected", [
    (", dtype=torch.float", []),       # torch.float is float32: -1e9 fits
    (", dtype=torch.bfloat16", []),    # bfloat16 has float32's exponent range
    (", dtype=torch.float16", [7]),
    ("", [7]),                         # the model's dtype may be float16
])
def test_fill_in_a_tensor_of_explicit_wide_dtype(dtype, expected):
    """A literal fill is safe in a tensor created as float32 / bfloat16 (as beam-search scores
    built with dtype=torch.float are); without an explicit wide dtype it may be float16."""
    fs = lint_source(_BEAM.format(dtype=dtype), "t.py", select=["ATT204"])
    assert [f.line for f in fs] == expected


_STEP = '''
import torch


def read_step(q, k, p_choose, step, finished, src_len):
    read = (p_choose < 0.5).type_as(step).masked_fill(finished, 0)
    step = step + read
    beyond = torch.arange(src_len).gt(step).unsqueeze(1)
    energy = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    {energy}
    return torch.softmax(energy.masked_fill(beyond, -float("inf")), dim=-1)
'''


@pytest.mark.parametrize("energy, expected", [
    ("", []),                                           # the 0-fill is a read/stay count
    ("energy = energy.masked_fill(finished, 0)", [10]),  # the scores themselves filled with 0
])
def test_a_count_that_reaches_softmax_only_as_a_mask_is_not_scores(energy, expected):
    """A monotonic-attention step count, compared into a mask of other scores, is no logit: its
    0 fill is not ATT205; filling the scores with 0 before the softmax is."""
    fs = lint_source(_STEP.format(energy=energy), "t.py", select=["ATT205"])
    assert [f.line for f in fs] == expected


_THRESHOLD = '''
import torch


def early_stop(running, finished, beam_scores):
    worst = torch.where(finished, torch.min(beam_scores, dim=1, keepdim=True)[0], -1.0e9)
    {use}
'''


@pytest.mark.parametrize("use, expected", [
    ("return torch.any(running > worst, dim=-1)", []),     # only compared: a threshold
    ("return int((worst > running.min()).sum())", []),      # counted through a comparison
    ("return worst", [6]),                                  # the caller may add it to logits
    ("return torch.softmax(running + worst, dim=-1)", [6]),
])
def test_a_fill_that_only_meets_comparisons_is_not_an_attention_mask(use, expected):
    """Beam-search bookkeeping fills scores with -1e9 and only compares or ranks them: no
    attention logits; the same fill returned or fed to a softmax is reported."""
    fs = lint_source(_THRESHOLD.format(use=use), "t.py", select=["ATT204"])
    assert [f.line for f in fs] == expected


_PROMOTED = '''
import torch
import torch.nn.functional as F


def attend(q, k, v, keep):
    s = torch.matmul(q, k.transpose(2, 3)) * q.size(-1) ** -0.5
    bias = torch.where(keep.logical_not(), -2.3819763e38, 0)
    {combine}
    return torch.matmul(F.softmax(s.float(), dim=-1).type_as(q), v)
'''


@pytest.mark.parametrize("combine, expected", [
    ("s = s + bias", []),                  # float16 + float32 → float32: the fill survives
    ("s = (s + bias).float()", []),
    ("s += bias", [8]),                    # in place: the scores' dtype, maybe float16
    ("s = s + bias.to(s.dtype)", [8]),     # cast to the scores' dtype
    ("s = s + bias.half()", [8]),
])
def test_fill_kept_float32_by_type_promotion(combine, expected):
    """torch.where of two Python scalars is float32 (the default dtype); added out of place it
    promotes float16 scores to float32, so the fill never meets float16 (torchtune's Gemma 2)."""
    fs = lint_source(_PROMOTED.format(combine=combine), "t.py", select=["ATT204"])
    assert [f.line for f in fs] == expected


_CAST_QUERY = '''
import torch
import torch.nn.functional as F


def camera_attention(q, k, v, valid):
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    {cast}
    bias = torch.where(valid[:, None, None, :], torch.zeros((), dtype=q.dtype),
                       torch.full((), -1e9, dtype=q.dtype))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
'''


@pytest.mark.parametrize("cast, reported", [
    ("q, k, v = q.float(), k.float(), v.float()\n"
     "    if q.is_cuda:\n"
     "        q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()", False),  # float32 or bfloat16
    ("q = q.to(torch.float32)", False),
    ("q = q.to(dtype=torch.double).contiguous()", False),
    ("q = q.float()\n    if q.is_cuda:\n        q = q.half()", True),  # float16 on one path
    ("q = q.to(k.dtype)", True),                                        # the model's dtype
    ("", True),
])
def test_fill_dtype_tracked_through_casts_of_a_local(cast, reported):
    """``dtype=q.dtype`` is as wide as every dtype ``q`` may hold at that point: casts by
    ``.float()``/``.bfloat16()``/``.to(dtype)`` are followed through locals and if-branches
    (diffusers' Sana-WM camera attention casts q to float32, then to bfloat16)."""
    src = _CAST_QUERY.format(cast=cast)
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "-1e9" in t)
    fs = lint_source(src, "t.py", select=["ATT204"])
    assert [f.line for f in fs] == ([line] if reported else [])


_CAST_SCORES = '''
import torch


def attend(q, k, v, pad_mask):
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    {cast}
    s = s.masked_fill(pad_mask, -1e9)
    return torch.softmax(s, dim=-1).to(v.dtype) @ v
'''


@pytest.mark.parametrize("cast, reported", [
    ("s = s.float()", False),
    ("s = s.to(torch.float32).transpose(-2, -1).transpose(-2, -1)", False),
    ("s = s.type(torch.half)", True),
    ("if s.is_cuda:\n        s = s.float()", True),  # cast on one path only
    ("s32 = s.float()", True),  # another tensor is cast, not the filled one
    ("", True),
])
def test_masked_fill_on_scores_cast_to_float32(cast, reported):
    """A -1e9 fill into scores whose local was cast to float32 fits; into scores of the
    model's dtype (or cast to float16) it overflows."""
    src = _CAST_SCORES.format(cast=cast)
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "-1e9" in t)
    fs = lint_source(src, "t.py", select=["ATT204"])
    assert [f.line for f in fs] == ([line] if reported else [])


def test_a_mask_named_tensor_cast_to_float_is_still_a_mask():
    """``key_mask = (...).float()`` of an untracked comparison stays the mask its name says, so
    the additive mask built from it is still checked (dtype tracking must not hide masks)."""
    src = (
        "import torch\n\n\n"
        "def attend(q, k, v, lengths):\n"
        "    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5\n"
        "    key_mask = (lengths[:, None] > 3)[:, None, None, :].float()\n"
        "    s = s + (1.0 - key_mask) * -1e9\n"
        "    return s.softmax(-1) @ v\n")
    assert [(f.code, f.line) for f in lint_source(src, "t.py", select=["ATT204"])] == [("ATT204", 7)]


_PENALTY = '''
import torch


def penalise(q, k, log_probs, keep_mask):
    {target} = {source}
    {target} += (~keep_mask).to(torch.float32) * -1e9
    {use}
'''


@pytest.mark.parametrize("target, source, use, reported", [
    # beam-search log-probabilities ranked by a helper: not attention
    ("log_probs", "log_probs / 2.0", "return gather_beams(torch.cat((log_probs, q)), 2)", False),
    ("log_probs", "log_probs / 2.0", "return torch.softmax(log_probs, dim=-1)", True),
    ("scores", "q @ k.transpose(-2, -1)", "return gather_beams(scores, 2)", True),
])
def test_additive_penalty_on_a_tensor_that_is_not_attention(target, source, use, reported):
    """``x += finished * -1e9`` masks attention only where ``x`` is established q·kᵀ scores or
    reaches a softmax (transformers' beam search penalises finished beams' log-probabilities)."""
    src = _PENALTY.format(target=target, source=source, use=use)
    fs = lint_source(src, "t.py", select=["ATT204"])
    assert [f.line for f in fs] == ([7] if reported else [])


_KV_CACHE_CAUSAL = '''
import torch
from einops import einsum


def create_causal_mask(i, j, device):
    return torch.ones((i, j), device=device, dtype=torch.bool).triu({diagonal})


def attend(q, k, v):
    i, j = q.shape[-2], k.shape[-2]
    sim = einsum(q, k, "b h i d, b h j d -> b h i j") * q.shape[-1] ** -0.5
    causal_mask = create_causal_mask(i, j, q.device)
    sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)
    return einsum(sim.softmax(dim=-1), v, "b h i j, b h j d -> b h i d")
'''


@pytest.mark.parametrize("diagonal, codes", [
    ("j - i + 1", []),          # query r is key r + j - i: its future is blocked, itself kept
    ("1 + j - i", []),
    ("diagonal=-i + j + 1", []),
    ("j - i", ["ATT202"]),       # off by one: each query is hidden from itself
    ("j - i - 1", ["ATT202"]),
])
def test_kv_cache_causal_mask_with_a_symbolic_diagonal(diagonal, codes):
    """``ones(i, j).triu(j - i + 1)`` (lucidrains' causal mask, i queries that are the last of j
    keys) blocks exactly each query's future; ``triu(j - i)`` also blocks the query itself."""
    src = _KV_CACHE_CAUSAL.format(diagonal=diagonal)
    assert [(f.code, f.line) for f in mask_findings(src)] == [(c, 14) for c in codes]


_LAYER_WEIGHTS = '''
import torch


def layer_loss_weights(layer_ids, n_layers, boost=1.0):
    w = torch.ones(len(layer_ids), device=layer_ids.device)
    w = w * torch.where(layer_ids < n_layers - 1, boost, 1.0)
    return w / {total}


def exit_probabilities(exit_logits):
    return torch.softmax(exit_logits, dim=-1)
'''

_WRITTEN_OUT_SOFTMAX = '''
import torch


def attend(q, k, v, keep):
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    s = torch.where(keep, s, 0.0)
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return (e / {total}) @ v
'''


@pytest.mark.parametrize("template, total, lines", [
    (_LAYER_WEIGHTS, "torch.sum(w)", []),   # weights divided by their total: no softmax
    (_LAYER_WEIGHTS, "w.sum()", []),
    (_WRITTEN_OUT_SOFTMAX, "e.sum(-1, keepdim=True)", [7]),
    (_WRITTEN_OUT_SOFTMAX, "torch.sum(e, dim=-1, keepdim=True)", [7]),
])
def test_only_a_row_sum_makes_a_written_out_softmax(template, total, lines):
    """``exp(s) / exp(s).sum(dim, keepdim=True)`` is a softmax over ``dim``, so a 0 fill of ``s``
    before it is ATT205; dividing by the sum of all entries (torchtune's early-exit loss
    weights) normalises no row, and its ``torch.where(..., 1.0)`` is no attention mask."""
    fs = lint_source(template.format(total=total), "t.py", select=["ATT205"])
    assert [f.line for f in fs] == lines


def test_inverted_mask_message_describes_the_mask_as_used():
    """``masked_fill(~m, ...)``: the pattern in the message is that of ``~m`` (what the consumer
    reads), and the message says so rather than attributing it to ``m``'s construction."""
    from attncheck.lint.engine import lint_source

    src = ("import torch\n\n\ndef f(q, k, v):\n    L, S = q.size(-2), k.size(-2)\n"
           "    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5\n"
           "    m = torch.ones(L, S, dtype=torch.bool).triu(1)\n"
           "    s = s.masked_fill(~m, float('-inf'))\n    return s.softmax(-1) @ v\n")
    [f] = lint_source(src, select=["ATT201"])
    assert "this ~m (from torch.ones(L, S, dtype=torch.bool).triu(1)) mask is True on and below" \
        in f.message


# a tokenizer's attention_mask (B, L): 1 = token, 0 = padding (Hugging Face glossary)
TOKENIZER_MASK = '''
import torch
import torch.nn.functional as F


def attend(q, k, v, attention_mask):
    scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    {pre}
    {use}
    return {ret}
'''
_SCORES_RET = "scores.softmax(-1) @ v"
TOKENIZER_MASK_CASES = [
    # (pre, use, return, ATT208 expected)
    ("", "scores = scores.masked_fill(attention_mask[:, None, None, :] == 1, float('-inf'))", _SCORES_RET, True),
    ("", "scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, float('-inf'))", _SCORES_RET, False),
    ("", "scores = scores.masked_fill(attention_mask[:, None, None, :].bool(), -1e4)", _SCORES_RET, True),
    ("", "scores = scores.masked_fill(~attention_mask[:, None, None, :].bool(), -1e4)", _SCORES_RET, False),
    ("", "scores = scores.masked_fill(attention_mask.unsqueeze(1).unsqueeze(2).ne(0), -1e4)", _SCORES_RET, True),
    ("", "scores = torch.where(attention_mask[:, None, None, :] == 0, scores, -1e4)", _SCORES_RET, True),
    ("", "scores = torch.where(attention_mask[:, None, None, :].bool(), scores, -1e4)", _SCORES_RET, False),
    ("", "scores = scores + attention_mask[:, None, None, :] * -1e4", _SCORES_RET, True),
    ("", "scores = scores + (1 - attention_mask[:, None, None, :]) * -1e4", _SCORES_RET, False),
    ("ext = attention_mask[:, None, None, :].to(q.dtype)",
     "ext = ext * torch.finfo(q.dtype).min", "F.scaled_dot_product_attention(q, k, v, attn_mask=ext)", True),
    ("ext = attention_mask[:, None, None, :].to(q.dtype)",
     "ext = (1.0 - ext) * torch.finfo(q.dtype).min", "F.scaled_dot_product_attention(q, k, v, attn_mask=ext)", False),
    ("", "pass", "F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask[:, None, None, :] == 0)", True),
    ("", "pass", "F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask[:, None, None, :] == 1)", False),
    # used as booleans only: the name alone does not say which way (MPT passes True = blocked)
    ("", "scores = scores.masked_fill(attention_mask, float('-inf'))", _SCORES_RET, False),
    ("", "scores = scores.masked_fill(attention_mask.to(q.device), float('-inf'))", _SCORES_RET, False),
    # an already additive 4-D mask (0 / -inf) handed to the layer: added as is, or turned into
    # booleans (True = blocked) and filled (LayoutLMv2); not laid out here, so not the 0/1 mask
    ("", "scores = scores + attention_mask", _SCORES_RET, False),
    ("", "scores = scores.masked_fill(attention_mask.to(torch.bool), torch.finfo(scores.dtype).min)",
     _SCORES_RET, False),
    ("", "scores = scores.masked_fill(attention_mask != 0, float('-inf'))", _SCORES_RET, False),
    # an additive bias built from a keep mask: 0 where it is True, -1e9 elsewhere (diffusers)
    ("bias = torch.where(attention_mask.bool().view(q.size(0), 1, 1, -1), 0.0, -1e4)", "pass",
     "F.scaled_dot_product_attention(q, k, v, attn_mask=bias)", False),
    ("bias = torch.where(attention_mask[:, None, None, :] == 1, -1e4, 0.0)", "pass",
     "F.scaled_dot_product_attention(q, k, v, attn_mask=bias)", True),
]


@pytest.mark.parametrize("pre,use,ret,inverted", TOKENIZER_MASK_CASES, ids=range(len(TOKENIZER_MASK_CASES)))
def test_att208_tokenizer_attention_mask_used_as_numbers(pre, use, ret, inverted):
    """A 0/1 ``attention_mask`` is 1 = token once the code treats it as numbers (compares it
    with 0/1, computes ``1 - m`` or ``m * c``, casts it): filling or adding a large negative
    where it is 1 masks the real tokens."""
    src = TOKENIZER_MASK.format(pre=pre, use=use, ret=ret)
    assert {c for _, c in pairs(src)} == ({"ATT208"} if inverted else set())


# the casts and the (B, 1, 1, L) layouts of a tokenizer mask, in either order: the cast before
# the layout is the same evidence that the mask holds 0/1 numbers as the cast after it
_MASK_CASTS = {"bool": ".bool()", "to_bool": ".to(torch.bool)", "type_bool": ".type(torch.bool)",
               "long": ".long()", "float": ".float()"}
_KEY_LAYOUTS = {"index": "{m}[:, None, None, :]", "unsqueeze": "{m}.unsqueeze(1).unsqueeze(2)",
                "view": "{m}.view(q.size(0), 1, 1, -1)",
                "rearrange": "rearrange({m}, 'b j -> b 1 1 j')"}


def _cast_layout(cast: str, layout: str, cast_first: bool) -> str:
    if cast_first:
        return _KEY_LAYOUTS[layout].format(m="attention_mask" + _MASK_CASTS[cast])
    return _KEY_LAYOUTS[layout].format(m="attention_mask") + _MASK_CASTS[cast]


@pytest.mark.parametrize("cast_first", [True, False], ids=["cast_first", "layout_first"])
@pytest.mark.parametrize("layout", list(_KEY_LAYOUTS))
@pytest.mark.parametrize("cast", list(_MASK_CASTS))
@pytest.mark.parametrize("inverted", [True, False], ids=["inverted", "correct"])
def test_att208_cast_and_key_layout_in_either_order(cast, layout, cast_first, inverted):
    """``attention_mask.bool()[:, None, None, :]`` is the same mask as
    ``attention_mask[:, None, None, :].bool()``: True on the real tokens, so filling it masks them
    (a boolean cast: ``masked_fill(m, …)`` vs ``masked_fill(~m, …)``; a number cast:
    ``scores + m * c`` vs ``scores + (1 - m) * c``)."""
    m = _cast_layout(cast, layout, cast_first)
    if "bool" in cast:
        use = f"scores = scores.masked_fill({'' if inverted else '~'}{m}, float('-inf'))"
    else:
        use = f"scores = scores + {m if inverted else f'(1 - {m})'} * -1e4"
    src = "from einops import rearrange\n" + TOKENIZER_MASK.format(pre="", use=use, ret=_SCORES_RET)
    assert {c for _, c in pairs(src)} == ({"ATT208"} if inverted else set()), use


@pytest.mark.parametrize("negate", ["~{m}", "{m}.logical_not()", "torch.logical_not({m})"])
@pytest.mark.parametrize("layout", list(_KEY_LAYOUTS))
@pytest.mark.parametrize("consumer, inverted", [
    ("scores = scores.masked_fill({mask}, float('-inf'))", False),
    ("scores = torch.where({mask}, float('-inf'), scores)", False),
    ("scores = torch.where({mask}, scores, float('-inf'))", True),
])
def test_att208_negated_cast_then_key_layout(negate, layout, consumer, inverted):
    """``~attention_mask.bool()`` laid out as ``(B, 1, 1, L)`` is True on the padding: the
    negation of a mask read as 0/1 numbers flips which tokens it marks."""
    m = _KEY_LAYOUTS[layout].format(m="(" + negate.format(m="attention_mask.bool()") + ")")
    src = "from einops import rearrange\n" + TOKENIZER_MASK.format(
        pre="", use=consumer.format(mask=m), ret=_SCORES_RET)
    assert {c for _, c in pairs(src)} == ({"ATT208"} if inverted else set()), m


def test_att208_additive_message_names_the_remedy():
    src = TOKENIZER_MASK.format(pre="", use="scores = scores + attention_mask[:, None, None, :] * -1e4",
                                ret=_SCORES_RET)
    (f,) = mask_findings(src)
    assert f.code == "ATT208" and "large negative where the mask is 1" in f.message
    assert "(1 - mask)" in f.message


PROBS_ZEROED = '''
import torch


def attend(q, k, v, keep):
    {pre}
    w = (q @ k.transpose(-2, -1) * q.size(-1) ** -0.5).softmax(-1)
    {use}
    return w @ v
'''
PROBS_ZEROED_CASES = [
    # (pre, use, ATT206 expected): a key padding mask laid out over the query axis selects keys
    ("", "w = w.masked_fill(keep[:, None, None, :] == 0, 0.0)", True),
    ("", "w = w * keep[:, None, None, :]", True),
    ("m = keep.unsqueeze(1).unsqueeze(2).bool()", "w = w.masked_fill(~m, 0)", True),
    ("", "w = w * keep.view(keep.size(0), 1, 1, -1).to(w.dtype)", True),
    ("", "w = w * keep.unsqueeze(-2)", True),
    # padded query rows zeroed (B, 1, L_q, 1): the kept keys still sum to 1 per row
    ("", "w = w * keep[:, None, :, None]", False),
    ("", "w = w * keep.unsqueeze(-1)", False),
    # the scores were masked before the softmax: zeroing again changes nothing
    ("q = q", "w = w.masked_fill(keep[:, None, None, :] == 0, 0.0)\n"
              "    s = q @ k.transpose(-2, -1)\n    s = s.masked_fill(keep[:, None, None, :] == 0, -1e4)\n"
              "    w = s.softmax(-1)", False),
]


@pytest.mark.parametrize("pre,use,zeroed", PROBS_ZEROED_CASES, ids=range(len(PROBS_ZEROED_CASES)))
def test_att206_probabilities_zeroed_at_padded_keys(pre, use, zeroed):
    src = PROBS_ZEROED.format(pre=pre, use=use)
    assert ({c for _, c in pairs(src)} == {"ATT206"}) is zeroed, pairs(src)


# ---- causal masks over a KV cache built from index grids shifted by sizes

_SHIFTED_INDEX_TEMPLATES = {
    "row_plus_size_difference": '''
import torch
import torch.nn.functional as F

def attend(q, k, v):
    q_len, kv_len = q.size(-2), k.size(-2)
    i = torch.arange(q_len)[:, None] + (kv_len - q_len)
    j = torch.arange(kv_len)[None, :]
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.size(-1) ** -0.5
    scores = torch.where(j {op} i, scores, torch.finfo(scores.dtype).min)
    return F.softmax(scores, dim=-1) @ v
''',
    "arange_from_past_length": '''
import torch
import torch.nn.functional as F

def attend(q, k, v):
    L = q.size(-2)
    past = k.size(-2) - L
    i = torch.arange(past, past + L).unsqueeze(1)
    j = torch.arange(past + L).unsqueeze(0)
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.size(-1) ** -0.5
    scores = scores.masked_fill(~(j {op} i), float("-inf"))
    return F.softmax(scores, dim=-1) @ v
''',
}


@pytest.mark.parametrize("op", ["<=", "<"])
@pytest.mark.parametrize("name", sorted(_SHIFTED_INDEX_TEMPLATES))
def test_kv_shifted_index_masks_follow_their_numerics(name, op):
    """The truth comes from running the module against SDPA with a lower-right causal mask
    (3 queries over 5 keys, float64); lint must report ATT202 exactly when it differs."""
    torch = pytest.importorskip("torch")
    src = _SHIFTED_INDEX_TEMPLATES[name].format(op=op)
    ns: dict = {}
    exec(compile(src, name, "exec"), ns)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 3, 4, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(2))
    keep = torch.ones(3, 5, dtype=torch.bool).tril(diagonal=5 - 3)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    out = ns["attend"](q, k, v)
    buggy = not torch.allclose(out, ref, atol=1e-9, rtol=0)
    assert buggy == (op == "<")  # the run agrees with the intended label
    codes = {f.code for f in mask_findings(src)}
    assert codes == ({"ATT202"} if buggy else set())


def test_index_shift_other_than_the_kv_alignment_is_not_read_as_causal():
    src = _SHIFTED_INDEX_TEMPLATES["row_plus_size_difference"].format(op="<").replace(
        "(kv_len - q_len)", "(q_len - kv_len)")
    assert mask_findings(src) == []
