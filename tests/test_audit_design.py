"""Deviations that are a model's declared design are ``warn`` with the reason read from its config
or modules; real defects stay ``fail``."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.audit.checks import _band, classify_pattern

pytest.importorskip("transformers")


def _audit(model_type: str, checks: str):
    return attncheck.audit(f"hf:{model_type}", checks=checks)


def test_random_masking_makes_batch_independence_a_warning():
    rep = _audit("vit_mae", "batch-independence")
    res = rep["batch-independence[eager]"]
    assert res.status == "warn", res.message
    assert "config.mask_ratio = 0.75" in res.metrics["by_design"]
    assert res.metrics["other_samples_delta"] > 1e-3  # the deviation itself is still measured


def test_convolution_over_the_sequence_explains_padding():
    res = _audit("convbert", "padding")["padding[eager]"]
    assert res.status == "warn", res.message
    assert "Conv1d, kernel (9,)" in res.metrics["by_design"]


def test_trigram_embeddings_mix_positions_before_attention():
    res = _audit("mobilebert", "padding")["padding[eager]"]
    assert res.status == "warn", res.message
    # the trigram input embedding concatenates the embeddings of positions i - 1, i, i + 1
    assert "changes positions [5, 7]" in res.metrics["by_design"]


def test_permutation_lm_declares_bidirectional_attention():
    rep = _audit("xlnet", "causality,mask-pattern")
    for name in ("causality[eager]", "mask-pattern[eager]"):
        assert rep[name].status == "warn", rep[name].message
        assert "config.attn_type = 'bi'" in rep[name].metrics["by_design"]


def test_tiled_kv_heads_declared_by_the_module_are_a_warning():
    res = _audit("jetmoe", "gqa")["gqa[sdpa]"]
    assert res.status == "warn", res.message
    assert "num_key_value_groups = 1" in res.message
    assert all(lay.get("by_design") for lay in res.metrics["layers"] if lay["ok"] is not None)


def test_mask_ignored_by_the_kernel_is_still_a_failure():
    # YOSO turns the 0/1 padding mask into 1 + mask / 10000 and truncates it to int: every key,
    # padded or not, gets weight 1 — a defect, not a design the config declares
    res = _audit("yoso", "padding")["padding[eager]"]
    assert res.status == "fail", res.message
    assert "by_design" not in res.metrics


def test_position_ids_ignored_by_the_forward_skip_left_padding():
    res = _audit("csm_depth_decoder_model", "padding")["padding[eager]"]
    assert res.status == "pass", res.message
    assert res.metrics["left"] == "skipped: the model ignores the position_ids it is given"


@given(st.integers(8, 16), st.integers(1, 3), st.integers(1, 3))
def test_band_reads_the_extent_before_and_after_each_query(L, a, b):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    allowed = (j - i >= -a) & (j - i <= b)
    assert _band(allowed) == (a, b)
    assert _band(allowed & (j <= i)) is None  # one-sided: a sliding window, not a band
    if a != b:
        assert classify_pattern(allowed) == ("other", None)


def test_window_attribute_of_a_global_layer_is_not_its_pattern():
    # every Exaone 4 attention module stores config.sliding_window; only the layers whose layer
    # type is sliding use it, so the global layer stays causal as the layer schedule says
    res = _audit("exaone4", "mask-pattern")["mask-pattern[eager]"]
    assert res.status == "pass", res.message
    assert [lay["observed"] for lay in res.metrics["layers"]] == ["sliding window 4", "causal"]


def test_merged_self_and_cross_attention_is_judged_on_the_self_block():
    res = _audit("t5gemma2", "mask-pattern")["mask-pattern[eager]"]
    merged = [lay for lay in res.metrics["layers"] if lay.get("layout", "").startswith("merged")]
    assert merged and all(lay["ok"] for lay in merged)
    assert {lay["observed"] for lay in merged} == {"sliding window 4", "causal"}


def test_image_tower_convolution_does_not_excuse_a_text_padding_defect():
    # AIMv2's text tower is causal only when a mask is passed (docs/audit.md); the patch
    # convolution of its image tower never sees the token sequence
    res = _audit("aimv2", "padding")["padding[eager]"]
    assert res.status == "fail", res.message
    assert "by_design" not in res.metrics


def test_float32_softmax_of_a_float64_model_is_reported_once():
    # transformers' eager attention calls softmax(scores, dtype=torch.float32): in a float64 model
    # the mask value finfo(float64).min overflows to -inf, so the fully masked rows of left-padded
    # queries become NaN — one warn names that design; no check fails because of it
    rep = attncheck.audit("hf:llama", dtype="float64",
                          checks="causality,padding,normalization,backend-agreement")
    assert not [r.check for r in rep.results if r.status in ("fail", "error")]
    notes = [r for r in rep.results if r.check.startswith("softmax-dtype")]
    assert [r.check for r in notes] == ["softmax-dtype[eager]"]
    assert notes[0].status == "warn"
    assert notes[0].metrics["softmax_dtype"] == "float32"
    assert set(notes[0].metrics["left_out"]) == {"causality left-pad", "padding left"}
    assert "overflows to −inf in float32" in notes[0].message
    assert "left-pad" in rep["causality[sdpa]"].metrics["paths"]  # SDPA runs in float64: checked
    # the eager rows carry float32 rounding, judged with float32's tolerance
    assert 1e-10 < rep["normalization[eager]"].metrics["max_row_sum_error"] < 1e-6
    assert rep["normalization[sdpa]"].metrics["tolerance"] == 1e-10


def test_mask_passed_to_an_attention_module_names_its_pattern():
    from attncheck.audit.checks import passed_mask_pattern

    class Attn(torch.nn.Module):
        def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None,
                    encoder_attention_mask=None):
            return hidden_states

    mod, x, L = Attn(), torch.zeros(1, 5, 8), 5
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    additive = torch.zeros(1, 1, L, L).masked_fill(~causal, torch.finfo(torch.float32).min)
    assert passed_mask_pattern(mod, (x,), {}) is None  # no mask: is_causal decides
    assert passed_mask_pattern(mod, (x, causal[None, None]), {}) == ("causal", None)
    assert passed_mask_pattern(mod, (x,), {"attention_mask": additive}) == ("causal", None)
    assert passed_mask_pattern(mod, (x,), {"attention_mask": torch.zeros(1, 1, 1, L)}) == ("full", None)
    assert passed_mask_pattern(mod, (x,), {"attention_mask": torch.ones(1, L)}) == ("full", None)
    padded = torch.tensor([[1, 1, 1, 0, 0]])
    assert passed_mask_pattern(mod, (x,), {"attention_mask": padded}) is None
    # a cross-attention call is masked by encoder_attention_mask
    kw = {"attention_mask": causal[None, None], "encoder_hidden_states": x,
          "encoder_attention_mask": torch.zeros(1, 1, 1, L)}
    assert passed_mask_pattern(mod, (x,), kw) == ("full", None)
    # an additive entry hides its key when it leaves a weight below the smallest normal float32
    # (e^−100 of Swin's −100 does, e^−50 does not), whatever the mask's dtype
    eye = torch.eye(L, dtype=torch.bool)
    for hidden, pattern in ((-100.0, ("sliding", 1)), (-1e4, ("sliding", 1)), (-50.0, ("full", None))):
        assert passed_mask_pattern(mod, (x, torch.zeros(L, L).masked_fill(~eye, hidden)[None]), {}) == pattern
    # torch.nn.MultiheadAttention's bool attn_mask: True = not allowed
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    assert passed_mask_pattern(mha, (x, x, x), {"attn_mask": ~causal}) == ("causal", None)


def test_is_causal_attribute_overridden_by_the_mask_the_model_passes():
    # LightGlueAttention sets is_causal = True, but the model always passes a bidirectional mask
    res = attncheck.audit("hf:lightglue", checks="mask-pattern")["mask-pattern[eager]"]
    assert res.status == "pass", res.message
    assert all(lay["expected"] == "full" and "is_causal = True" in lay["expected_from"]
               for lay in res.metrics["layers"])


class _PhraseSelfAttention(torch.nn.Module):
    """Single-head self-attention over ``(B, L, E)`` called with a bool ``(B, 1, L, L)``
    ``attention_mask`` (True = visible); ``honours_mask=False`` adds the bool mask to the scores
    as 0 / 1, which leaves every key visible."""

    def __init__(self, dim: int, honours_mask: bool):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.honours_mask = honours_mask

    def forward(self, hidden_states, attention_mask=None):
        q, k, v = self.qkv(hidden_states).chunk(3, dim=-1)
        scores = (q @ k.transpose(-1, -2))[:, None] / q.shape[-1] ** 0.5
        if self.honours_mask:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
        return (torch.softmax(scores, dim=-1) @ v[:, None]).squeeze(1)


def _phrase_masked_model(honours_mask: bool):
    # a bidirectional encoder that restricts its self-attention to two phrases of 3 positions
    # (block-diagonal mask), as Grounding DINO does for the phrases of its text prompt
    from attncheck.audit.model import AuditModel, Forward

    L, E = 6, 8
    torch.manual_seed(0)
    attn = _PhraseSelfAttention(E, honours_mask)
    phrase = torch.arange(L) // 3
    mask = (phrase[:, None] == phrase[None, :])[None, None]

    def fwd(x, attention_mask=None, position_ids=None, output_attentions=False):
        return Forward(attn(x, attention_mask=mask.expand(x.shape[0], 1, L, L)))

    return AuditModel(spec="phrases", module=attn, forward_fn=fwd, kind="encoder", causal=False,
                      input_kind="features", feature_dim=E, seq_len=L,
                      attention_modules=[("layers.0.attn", attn)]), mask[0, 0]


@pytest.mark.parametrize("honours_mask", [True, False])
def test_mask_passed_to_an_attention_module_is_its_expected_pattern(honours_mask):
    from attncheck.audit.checks import AuditContext, check_mask_pattern

    m, mask = _phrase_masked_model(honours_mask)
    res = check_mask_pattern(m, AuditContext())
    (layer,) = res.metrics["layers"]
    # the passed block-diagonal mask, not the model's bidirectional `full`, is the expectation
    assert layer["expected"] == "other" and "the expectation is the mask it is given" in layer["expected_from"]
    if honours_mask:
        assert res.status == "pass", res.message
        assert layer["observed"] == "other" and layer["ok"]
    else:  # the module ignores the mask it is given: every key stays visible
        assert res.status == "fail"
        assert layer["observed"] == "full" and not layer["ok"]


@pytest.mark.parametrize("honours_mask", [True, False])
def test_mask_passed_to_a_windowed_module_is_its_expected_pattern(honours_mask):
    # a module that declares a window side (Swin's window_size) while its map is one window of
    # tokens: the mask it is given (the shifted-window mask) is the expectation, not any band
    from attncheck.audit.checks import AuditContext, check_mask_pattern

    m, _ = _phrase_masked_model(honours_mask)
    m.attention_modules[0][1].window_size = (2, 2)
    res = check_mask_pattern(m, AuditContext())
    (layer,) = res.metrics["layers"]
    assert layer["expected"] == "other" and "the expectation is the mask it is given" in layer["expected_from"]
    assert (res.status == "pass") is honours_mask, res.message
    assert layer["observed"] == ("other" if honours_mask else "full")


def test_mask_that_widens_the_model_pattern_is_not_the_expectation():
    from attncheck.audit.checks import AuditContext, check_mask_pattern

    m, _ = _phrase_masked_model(True)
    m.causal = True  # a causal model given a mask that shows later positions of a phrase
    res = check_mask_pattern(m, AuditContext())
    (layer,) = res.metrics["layers"]
    assert res.status == "fail" and layer["expected"] == "causal" and "expected_from" not in layer


def test_float32_operators_of_a_float64_model_set_the_tolerance():
    # CodeGen's eager attention casts q and k to float32 for q·kᵀ: decoding with the cache differs
    # from the full forward by ~5e-10 in a float64 model — float32 rounding, not a cache defect;
    # its SDPA path stays in float64 and keeps float64's tolerance
    rep = attncheck.audit("hf:codegen", dtype="float64", checks="kv-cache")
    kv = rep["kv-cache[eager]"]
    assert kv.status == "pass", kv.message
    assert kv.metrics["atol"] == 1e-5
    assert 1e-12 < kv.metrics["prefill_1"]["max_abs_diff"] < 1e-6
    note = rep["compute-dtype[eager]"]
    assert note.status == "warn"
    assert note.metrics["compute_dtype"] == "float32" and "bmm" in note.metrics["ops"]
    assert rep["kv-cache[sdpa]"].metrics["atol"] == 1e-10
    assert not [r.check for r in rep.results if r.check == "compute-dtype[sdpa]"]


def test_backends_are_compared_on_the_same_random_draws():
    # ViT-MAE masks a random subset of patches in forward (torch.rand noise): both dispatch
    # paths must draw the same noise, or they see different inputs (|Δ| ~ 4 before)
    # (float64: the run that drew different noise per path before)
    res = attncheck.audit("hf:vit_mae", dtype="float64", checks="backend-agreement")["backend-agreement"]
    assert res.status == "pass", res.message
    assert max(res.metrics["pairs"].values()) < 1e-4


def test_scores_cast_before_the_softmax_of_a_float64_model_are_the_softmax_dtype():
    # MPT calls softmax(scores.float()): the cast comes before the call, so the float64 mask
    # value is already −inf when the softmax sees it; the left-padded NaN is that design
    rep = attncheck.audit("hf:mpt", dtype="float64", checks="causality")
    res = rep["causality[eager]"]
    assert res.status == "pass", res.message
    assert "left-pad" in res.metrics["paths_left_out"]
    note = rep["softmax-dtype[eager]"]
    assert set(note.metrics["left_out"]) == {"causality left-pad"}
    assert "reach softmax cast to float32" in note.message


def test_model_code_raising_on_the_softmax_dtype_nan_is_left_out_not_an_error():
    # BLT's patcher takes the entropy of a Categorical over its logits, which validates them: the
    # left-padded NaN of the float32 softmax (float64 model) makes the forward raise
    rep = attncheck.audit("hf:blt_patcher", dtype="float64", checks="padding")
    res = rep["padding[eager]"]
    assert res.status == "pass", res.message
    assert res.metrics["left"].startswith("left out")
    assert "padding left" in rep["softmax-dtype[eager]"].metrics["left_out"]


def test_backend_paths_with_nan_from_the_softmax_dtype_are_left_out():
    # T5Gemma 2's text encoder: a bidirectional sliding window of 4, so the last right-padded
    # queries see only padded keys; eager's float32 softmax of the float64 mask value gives those
    # rows NaN, which the next (global) layer carries into every real position — the same design
    # the padding check leaves out, so the right-padded path is not compared either
    res = attncheck.audit("hf:t5gemma2_text", dtype="float64", checks="backend-agreement")["backend-agreement"]
    assert res.status == "pass", res.message
    assert set(res.metrics["left_out"]) == {"right-pad"}
    assert "overflows to −inf in float32" in res.metrics["left_out"]["right-pad"]
    assert set(res.metrics["pairs"]) == {"sdpa/no-mask"}
    assert res.metrics["pairs"]["sdpa/no-mask"] < 1e-5


def test_float16_noise_comes_from_a_finite_float64_run_of_the_other_path():
    # BLT's eager path is NaN in float64 (its empty patch slots are fully masked rows, NaN through
    # eager's float32 softmax), so the float64 run of the eager reference cannot measure float16's
    # noise; SDPA's own float16 error against its float64 run (≈ 6e-3) does, and the two paths
    # agree within it (before: noise 0, Δ 5.9e-3 > 5e-3 failed)
    res = attncheck.audit("hf:blt", dtype="float16", checks="backend-agreement")["backend-agreement"]
    assert res.status == "pass", res.message
    assert res.metrics["noise_from"] == {"sdpa/no-mask": "sdpa", "sdpa/right-pad": "sdpa"}
    assert 1e-3 < res.metrics["pairs"]["sdpa/no-mask"] < 2e-2


def test_float16_backend_noise_is_the_larger_of_the_two_paths():
    # unlimited_ocr's greedy top-2 MoE router: SDPA's float16 rounding flips one token's expert
    # choice (SDPA float16 vs its float64 run: 0.019 at that token), eager's does not (3.6e-4);
    # the paths agree in float64 (4.7e-8), so their float16 difference (0.019) is SDPA's own noise
    res = attncheck.audit("hf:unlimited_ocr", dtype="float16", checks="backend-agreement")["backend-agreement"]
    assert res.status == "pass", res.message
    assert res.metrics["noise_from"]["sdpa/no-mask"] == "sdpa"


def test_float16_padding_leak_threshold_is_the_dtype_noise():
    # DBRX's MoE gathers the tokens routed to each expert: padded tokens routed elsewhere change
    # the rows a real token is computed with, which moves it by one float16 ulp (Δ 1.2e-4), below
    # the output's own float16 error; float32 keeps the exact threshold
    from attncheck.audit.checks import AuditContext, leak_tolerance

    ctx = AuditContext()
    assert leak_tolerance(ctx, torch.float32, 5e-4) == ctx.leak_atol
    assert leak_tolerance(ctx, torch.float16, 5e-4) == 5e-4
    assert leak_tolerance(ctx, torch.bfloat16, 0.0) == ctx.leak_atol
    res = attncheck.audit("hf:dbrx", dtype="float16", checks="padding")["padding[sdpa]"]
    assert res.status == "pass", res.message
    left = res.metrics["left"]
    assert left["pad_content_delta"] <= left["leak_atol"] == left["dtype_noise"] > 1e-6


class _CausalTowerAttention(torch.nn.Module):
    """Single-head self-attention of a causal text tower inside a bidirectional model (SAM 3's
    CLIP text encoder): ``sdpa`` calls SDPA, with ``is_causal`` when given no mask, as
    transformers' SDPA path does; otherwise a hand-written softmax that applies only the mask
    it is given (eager attention ignores ``is_causal``)."""

    is_causal = True

    def __init__(self, dim: int, sdpa: bool):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.sdpa = sdpa

    def forward(self, hidden_states, attention_mask=None):
        q, k, v = (t[:, None] for t in self.qkv(hidden_states).chunk(3, dim=-1))
        if self.sdpa:
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=attention_mask, is_causal=attention_mask is None)
        else:
            scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
            if attention_mask is not None:
                scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
            out = torch.softmax(scores, dim=-1) @ v
        return out.squeeze(1)


def _tower_variants(eager_gets_causal_mask: bool):
    from attncheck.audit.model import AuditModel, Forward

    L, E = 6, 8
    torch.manual_seed(0)
    eager, sdpa = _CausalTowerAttention(E, sdpa=False), _CausalTowerAttention(E, sdpa=True)
    sdpa.load_state_dict(eager.state_dict())
    causal = torch.ones(L, L, dtype=torch.bool).tril()[None, None]

    def model(attn, mask):
        def fwd(x, attention_mask=None, position_ids=None, output_attentions=False):
            return Forward(attn(x, attention_mask=None if mask is None else mask.expand(x.shape[0], 1, L, L)))

        return AuditModel(spec="tower", variant="sdpa" if attn.sdpa else "eager", module=attn, forward_fn=fwd,
                          kind="encoder", causal=False, input_kind="features", feature_dim=E, seq_len=L,
                          attention_modules=[("text.layers.0.attn", attn)])

    return model(eager, causal if eager_gets_causal_mask else None), model(sdpa, None)


@pytest.mark.parametrize("eager_gets_causal_mask", [True, False])
def test_sdpa_is_causal_flag_is_the_mask_when_eager_got_a_causal_mask(eager_gets_causal_mask):
    from attncheck.audit.checks import AuditContext, check_mask_pattern

    eager, sdpa = _tower_variants(eager_gets_causal_mask)
    ctx = AuditContext()
    e, s = check_mask_pattern(eager, ctx), check_mask_pattern(sdpa, ctx)
    (layer,) = s.metrics["layers"]
    assert layer["observed"] == "causal"
    if eager_gets_causal_mask:  # the same causal tower on both paths
        assert e.status == s.status == "pass", (e.message, s.message)
        assert layer["expected"] == "causal"
    else:  # is_causal set on a module the eager path runs bidirectionally: the SDPA path differs
        assert e.status == "pass" and s.status == "fail"
        assert layer["expected"] == "full"
