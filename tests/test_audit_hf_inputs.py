"""Model classes and inputs of the transformers audit for types outside the auto mappings and
inputs beyond plain ids / images: sub-config towers, patch sequences with ``grid_thw``, layout
boxes, waveform layouts, queries pre-scaled by the attention module.  A handful of tiny types."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

import transformers as tf  # noqa: E402

import attncheck  # noqa: E402
from attncheck.audit.hf import (  # noqa: E402
    Unsupported, build_hf, choose_class, expected_scale_for, module_facts, normalized_token_boxes, scale_folded_into_q,
    token_boxes)


def _class_of(model_type):
    return choose_class(model_type, tf.AutoConfig.for_model(model_type))


def test_sub_config_type_gets_the_outermost_model_of_its_package():
    # clvp_decoder: ClvpDecoder ⊂ ClvpModel ⊂ ClvpForCausalLM all take a ClvpDecoderConfig
    kind, cls = _class_of("clvp_decoder")
    assert (kind, cls.__name__) == ("decoder", "ClvpForCausalLM")


def test_video_tower_is_a_vision_model():
    kind, cls = _class_of("vjepa2")  # its forward takes pixel_values_videos (B, T, C, H, W)
    assert (kind, cls.__name__) == ("vision", "VJEPA2Model")


def test_tower_whose_first_argument_is_the_image_is_a_vision_model():
    kind, cls = _class_of("bridgetower_vision_model")  # forward(image, image_mask=None, ...)
    assert (kind, cls.__name__) == ("vision", "BridgeTowerVisionModel")


def test_plain_module_tower_built_from_its_config():
    # no PreTrainedModel takes IdeficsVisionConfig; the nn.Module tower that does takes pixels
    kind, cls = _class_of("idefics_vision")
    assert (kind, cls.__name__) == ("vision", "IdeficsVisionTransformer")
    assert not hasattr(cls, "_from_config")


def test_submodule_needing_parent_inputs_is_unsupported_with_its_inputs():
    with pytest.raises(Unsupported) as e:
        _class_of("sam_mask_decoder")
    msg = str(e.value)
    assert "SamMaskDecoder" in msg and "image_embeddings" in msg and "sparse_prompt_embeddings" in msg


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=16))
def test_token_boxes_are_valid_and_follow_the_token(ids):
    x = torch.tensor([ids])
    b = token_boxes(x)
    assert b.shape == (1, len(ids), 4) and b.dtype == torch.long
    assert (b >= 0).all() and (b <= 1000).all()
    assert (b[..., 0] < b[..., 2]).all() and (b[..., 1] < b[..., 3]).all()
    # a token keeps its box wherever it sits (left padding moves tokens)
    assert torch.equal(token_boxes(x.flip(1)), b.flip(1))
    f = normalized_token_boxes(x)
    assert f.dtype == torch.float32 and (f >= 0).all() and (f <= 1).all()
    assert torch.equal((f * 1000).round().long(), b)  # the same corners, as fractions of the page


def _batch_independent(m):
    x = m.make_inputs(3, generator=torch.Generator().manual_seed(0))
    alone, batch = m.forward(x[:1]).out, m.forward(x).out
    assert batch.shape[0] == 3
    torch.testing.assert_close(batch[:1], alone, atol=1e-5, rtol=1e-4)
    return x, batch


def test_grid_thw_vision_tower_gets_patches_split_back_per_image():
    (m,) = build_hf("hf:qwen2_vl_vision", "qwen2_vl_vision", sdpa=False)
    cfg = m.module.config
    merge, p = cfg.spatial_merge_size, cfg.patch_size
    assert m.kind == "vision" and m.info["input"] == "hidden_states"
    x, out = _batch_independent(m)
    n = (2 * merge) ** 2
    assert x.shape == (3, n, cfg.in_channels * cfg.temporal_patch_size * p * p)
    assert out.shape[:2] == (3, n)  # the flat (B·N, hidden) output, one row of patches per image


def test_layout_model_gets_boxes_per_token():
    (m,) = build_hf("hf:bros", "bros", sdpa=False)
    assert m.info["input_layout"] == "input_ids+bbox"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_layout_model_in_float16_gets_floating_boxes_in_its_dtype():
    # BROS multiplies its boxes by config.bbox_scale: integer boxes would make that float32 and
    # meet its float16 projection; floating boxes are cast to the model's dtype like any input
    (m,) = build_hf("hf:bros", "bros", dtype="float16", sdpa=False)
    seen = {}
    m.module.register_forward_pre_hook(lambda mod, args, kw: seen.update(kw), with_kwargs=True)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert seen["bbox"].dtype == torch.float16 and seen["bbox"].shape == (*x.shape, 4)
    assert (seen["bbox"] >= 0).all() and (seen["bbox"] <= 1).all()
    assert out.dtype == torch.float16 and out.shape[:2] == x.shape and out.isfinite().all()


def test_waveform_model_gets_a_channel_axis():
    (m,) = build_hf("hf:omniasr_ctc", "omniasr_ctc", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.dim() == 3 and x.shape[:2] == (2, 1)
    assert m.forward(x).out.shape[0] == 2


def test_query_prescaled_by_the_declared_scale_expects_an_unscaled_product():
    from transformers.models.clvp.modeling_clvp import ClvpSelfAttention
    from transformers.models.llama.modeling_llama import LlamaAttention

    clvp = ClvpSelfAttention(tf.ClvpEncoderConfig(hidden_size=64, num_attention_heads=4))
    assert scale_folded_into_q(clvp) == "scale"
    exp, why = expected_scale_for(module_facts(clvp), 16)
    assert exp == 1.0 and "multiplies q" in why
    llama = LlamaAttention(tf.LlamaConfig(hidden_size=64, num_attention_heads=4), 0)
    assert scale_folded_into_q(llama) is None
    assert expected_scale_for(module_facts(llama), 16) == (pytest.approx(0.25), "LlamaAttention declares its scale")


def test_clvp_encoder_scale_passes():
    rep = attncheck.audit("hf:clvp_encoder", checks="scale")
    assert rep["scale[eager]"].status == "pass", rep["scale[eager]"].message
    assert rep["scale[eager]"].metrics["expected_scale"] == 1.0


def test_time_series_model_gets_past_values_and_causality_from_its_modules():
    (m,) = build_hf("hf:patchtst", "patchtst", sdpa=False)
    cfg = m.module.config
    assert (m.kind, m.input_kind, m.causal) == ("series", "series", False)
    x, out = _batch_independent(m)
    assert x.shape == (3, cfg.context_length, cfg.num_input_channels)
    (fm,) = build_hf("hf:timesfm2_5", "timesfm2_5", sdpa=False)
    assert fm.causal is True  # decoder-only forecaster: its attention modules are causal


def test_causal_streaming_audio_encoder_expects_its_sliding_window():
    # Mimi's encoder transformer is causal with a sliding window (its modules declare is_causal)
    rep = attncheck.audit("hf:mimi_encoder", checks="mask-pattern")
    r = rep["mask-pattern[eager]"]
    assert r.status == "pass", r.message
    assert {lay["expected"] for lay in r.metrics["layers"]} == {"sliding window 4"}


def test_codec_output_is_per_sample_not_its_batch_loss():
    from transformers.utils import ModelOutput

    from attncheck.audit.hf import _per_sample_output

    audio = torch.randn(3, 1, 40)
    o = ModelOutput(loss=torch.tensor([0.5]), audio_values=audio)  # a codec: batch loss first
    assert _per_sample_output(o, 3, lambda t, B: t) is audio
    flat = torch.randn(3 * 4, 8)  # a flat patch output, split back per image
    split = _per_sample_output(ModelOutput(last_hidden_state=flat), 3, lambda t, B: t.reshape(B, -1, *t.shape[1:]))
    assert split.shape == (3, 4, 8) and torch.equal(split[1], flat[4:8])


def test_timm_backbone_replaced_by_the_transformers_backbone_of_its_architecture(monkeypatch):
    import importlib.util

    from attncheck.audit.hf import without_timm_backbones

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "timm" else real(n, *a))
    cfg = tf.AutoConfig.for_model("detr")  # its default backbone: timm resnet50, stages 1..4
    assert without_timm_backbones(cfg) == ["backbone_config: timm resnet50 → resnet"]
    assert cfg.backbone_config.model_type == "resnet" and list(cfg.backbone_config.out_indices) == [1, 2, 3, 4]
    swin = tf.AutoConfig.for_model("omdet-turbo")  # swin_tiny_patch4_window7_224: swin, not swinv2
    without_timm_backbones(swin)
    assert swin.backbone_config.model_type == "swin" and list(swin.backbone_config.out_indices) == [1, 2, 3]
    (m,) = build_hf("hf:detr", "detr", sdpa=False)
    assert m.info["backbone"] == "backbone_config: timm resnet50 → resnet"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[0] == 2


def test_tower_fed_feature_vectors_gets_a_feature_sequence():
    # Idefics2's perceiver resampler takes context (B, L, D) and a required mask; its output is a
    # fixed number of latents (no row per input position): bidirectional over its input
    (m,) = build_hf("hf:idefics2_perceiver", "idefics2_perceiver", sdpa=False)
    assert (m.kind, m.input_kind, m.info["input"], m.causal) == ("features", "features", "context", False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.shape == (2, m.seq_len, m.feature_dim) and x.is_floating_point()
    assert m.forward(x).out.shape[0] == 2
    assert "attention_mask" not in m.supports


@pytest.mark.slow
def test_feature_tower_whose_causal_mask_comes_from_its_parent_is_fed_by_the_parent():
    # BLT's global transformer builds no mask of its own: alone it is refused ("the causal mask
    # comes from its parent"), so it is run on what BltModel gives it, that mask included
    (m,) = build_hf("hf:blt_global_transformer", "blt_global_transformer", sdpa=False)
    assert m.info["parent"] == "BltForCausalLM" and m.info["input"].startswith("inputs_embeds ")


def test_audio_main_input_name_the_forward_does_not_take_is_not_audio():
    # the acoustic tokenizer decoder inherits main_input_name "input_values" but its forward takes
    # hidden_states (latents): fed as feature vectors, not as a waveform
    from attncheck.audit.hf import _feature_input

    kind, cls = _class_of("vibevoice_acoustic_tokenizer_decoder")
    assert kind == "text"
    assert _feature_input(cls, None) == "hidden_states"


def test_flattened_patches_keep_valid_row_and_column_ids():
    (m,) = build_hf("hf:pix2struct_vision_model", "pix2struct_vision_model", sdpa=False)
    assert (m.kind, m.info["input"], m.info["input_layout"]) == ("vision", "flattened_patches", "flattened-patches")
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x[0, :, :2].min() >= 1 and torch.equal(x[0, :, :2], x[1, :, :2])
    noise = torch.randn_like(x) * 100  # what a check may write: ids are taken from the layout, not x
    out = m.forward(noise).out
    assert out.shape[0] == 2 and torch.isfinite(out).all()


def test_sub_config_type_audited_through_the_submodule_its_parent_builds():
    # SamMaskDecoderConfig configures SamMaskDecoder inside SamModel: the decoder runs alone on the
    # inputs SamModel gave it, its image embeddings (B, C, H, W) being the checked input
    models = build_hf("hf:sam_mask_decoder", "sam_mask_decoder")
    m = models[0]
    assert (m.info["class"], m.info["parent"], m.kind) == ("SamMaskDecoder", "SamModel", "vision")
    assert m.info["input"].startswith("image_embeddings")
    linted = {getattr(o, "__name__", "") for o in m.source_objects}
    assert linted >= {"SamMaskDecoder", "SamTwoWayTransformer"} and "ParentFed" not in linted
    x = m.make_inputs(3, generator=torch.Generator().manual_seed(0))
    alone, batch = m.forward(x[:1]).out, m.forward(x).out
    torch.testing.assert_close(batch[:1], alone, atol=1e-5, rtol=1e-4)
    assert [a.variant for a in models] == ["eager", "sdpa"]


def test_sub_config_submodule_the_parent_does_not_call_runs_on_a_map_for_its_first_convolution():
    # SamModel calls its SamMaskEmbedding only for mask prompts: the embedding runs alone on a
    # random (B, 1, H, W) map, and is judged by running (it has no attention)
    (m,) = build_hf("hf:sam_prompt_encoder", "sam_prompt_encoder", sdpa=False)
    assert (m.info["class"], m.info["parent"]) == ("SamMaskEmbedding", "SamModel")
    assert m.info["input"].startswith("masks [1, ") and "drawn for its first convolution" in m.info["input"]
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[0] == 2 and torch.isfinite(out).all()
    assert not m.attention_modules


def test_sub_config_submodule_fed_hidden_states_is_audited_on_them_not_on_its_mask():
    # T5GemmaModuleConfig configures T5GemmaSelfAttention, fed hidden_states (B, L, D) and a 4-D
    # float mask by its parent: the hidden states are the checked input, the mask stays fixed
    (m,) = build_hf("hf:t5_gemma_module", "t5_gemma_module", sdpa=False)
    assert (m.info["class"], m.kind) == ("T5GemmaSelfAttention", "vision")
    assert m.info["input"].startswith("hidden_states")
    x = m.make_inputs(3, generator=torch.Generator().manual_seed(0))
    assert x.dim() == 3 and x.is_floating_point()
    alone, batch = m.forward(x[:1]).out, m.forward(x).out
    torch.testing.assert_close(batch[:1], alone, atol=1e-5, rtol=1e-4)


def test_model_class_needing_its_parents_features_is_audited_through_the_parent():
    # Sam3DetrDecoder is a PreTrainedModel of its own config whose forward needs the text and
    # image features Sam3Model computes: run alone on them, the image features (B, L, D) checked
    models = build_hf("hf:sam3_detr_decoder", "sam3_detr_decoder", sdpa=False)
    m = models[0]
    assert (m.info["class"], m.info["parent"]) == ("Sam3DetrDecoder", "Sam3Model")
    assert m.info["input"].startswith("vision_features")
    assert m.forward(m.make_inputs(2, generator=torch.Generator().manual_seed(0))).out.shape[0] >= 1


def test_prompt_encoder_without_attention_runs_on_its_parents_points():
    # Sam2PromptEncoder (the outermost class built from its config, not the positional embedding
    # inside it) embeds the points Sam2Model gives it: it runs, and no attention is seen
    (m,) = build_hf("hf:sam2_prompt_encoder", "sam2_prompt_encoder", sdpa=False)
    assert (m.info["class"], m.info["parent"]) == ("Sam2PromptEncoder", "Sam2Model")
    assert m.info["input"].startswith("input_points") and not m.attention_modules
def test_spectrogram_takes_the_mel_bins_of_a_nested_encoder_config():
    from attncheck.audit.hf import _audio_feature_size

    canary = tf.AutoConfig.for_model("canary")  # the encoder_config declares the filter bank
    assert _audio_feature_size(canary) == canary.encoder_config.num_mel_bins == 128
    assert _audio_feature_size(tf.AutoConfig.for_model("whisper")) == 80
    (m,) = build_hf("hf:lasr_ctc", "lasr_ctc", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.shape[-1] == m.module.config.encoder_config.num_mel_bins
    assert m.forward(x).out.shape[0] == 2


def test_generic_audio_input_of_a_waveform_encoder_gets_waveforms():
    # SpeechEncoderDecoderModel's main input is ``inputs``; its wav2vec2 encoder config has a
    # conv feature encoder, so the encoder input is a waveform (B, samples), not a spectrogram
    from attncheck.audit.hf import _audio_candidates

    cfg = tf.AutoConfig.for_model("speech-encoder-decoder")
    x = _audio_candidates(cfg, "inputs")[0](1, torch.Generator().manual_seed(0))
    stride = 1
    for s in cfg.encoder.conv_stride:
        stride *= s
    assert x.dim() == 2 and x.shape[1] % stride == 0
    assert _audio_candidates(tf.AutoConfig.for_model("whisper"), "input_features")[0](1, None).dim() == 3


def test_transducer_is_audited_through_its_encoder():
    # RNN-T: an LSTM prediction network (no attention) over the encoder's frames; the attention
    # is all in the encoder, which gets the spectrogram
    (m,) = build_hf("hf:parakeet_rnnt", "parakeet_rnnt", sdpa=False)
    assert m.kind == "audio" and "ParakeetEncoder" in m.info["audited_submodule"]
    assert m.attention_modules
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[0] == 2


def test_image_tokenizer_without_forward_is_audited_through_encode():
    # ChameleonVQVAE defines encode(pixel_values) and no forward; its encoder has a VQGAN
    # attention block over the H·W positions of the last stage
    kind, cls = _class_of("chameleon_vqgan")
    assert (kind, cls.__name__) == ("vision", "ChameleonVQVAE")
    (m,) = build_hf("hf:chameleon_vqgan", "chameleon_vqgan", sdpa=False)
    assert (m.info["class"], m.info["method"]) == ("ChameleonVQVAE", "encode")
    assert "ImageEncoding" not in {getattr(o, "__name__", "") for o in m.source_objects}
    x = m.make_inputs(3, generator=torch.Generator().manual_seed(0))
    alone, batch = m.forward(x[:1]).out, m.forward(x).out
    torch.testing.assert_close(batch[:1], alone, atol=1e-4, rtol=1e-4)


def test_token_model_refusing_ids_is_fed_embeddings():
    # the Qwen3-Omni code predictor takes its parent's hidden states: input_ids is refused
    (m,) = build_hf("hf:qwen3_omni_moe_talker_code_predictor", "qwen3_omni_moe_talker_code_predictor", sdpa=False)
    assert m.info["input"] == "inputs_embeds" and m.info["built_as"] == "embeds"
    assert m.input_kind == "features" and m.feature_dim == m.module.config.hidden_size
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.shape == (2, m.seq_len, m.feature_dim)
    assert m.forward(x).out.shape[:2] == x.shape[:2]


def test_encoder_returning_a_pooled_vector_is_checked_on_its_last_hidden_state():
    # DPRQuestionEncoder returns pooler_output (B, D) only: the per-position output is the last
    # of its hidden states
    (m,) = build_hf("hf:dpr", "dpr", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape == (2, x.shape[1], m.module.config.hidden_size) and "built_as" not in m.info
    o = m.module(input_ids=x, output_hidden_states=True)
    torch.testing.assert_close(out, o.hidden_states[-1])


def test_seq2seq_encoder_fed_flattened_patches():
    (m,) = build_hf("hf:pix2struct", "pix2struct", sdpa=False)
    assert m.info["encoder_input"] == "flattened_patches"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_sub_model_of_a_class_without_a_forward():
    from attncheck.audit.hf import forward_submodel_config

    config = tf.AutoConfig.for_model("qwen2_5_omni")
    _, cls = choose_class("qwen2_5_omni", config)
    assert cls.forward is torch.nn.Module.forward  # its generate() runs the thinker
    field, sub = forward_submodel_config(cls, config)
    assert field == "thinker_config" and sub is config.thinker_config
    assert forward_submodel_config(tf.LlamaForCausalLM, tf.LlamaConfig()) is None


@pytest.mark.slow
def test_class_without_a_forward_is_audited_through_the_sub_model_it_builds():
    (m,) = build_hf("hf:qwen2_5_omni", "qwen2_5_omni", sdpa=False)
    assert m.info["model_type"] == "qwen2_5_omni"
    assert type(m.module) is tf.Qwen2_5OmniThinkerForConditionalGeneration
    assert "thinker_config" in m.info["audited_submodule"]
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_cross_attention_tower_gets_the_states_it_attends_to():
    # BLIP-2's Q-Former: learned queries (B, Q, D) attend to image features (B, N, encoder_hidden_size)
    (m,) = build_hf("hf:blip_2_qformer", "blip_2_qformer", sdpa=False)
    width = m.module.config.encoder_hidden_size
    assert m.info["input"] == "query_embeds"
    assert m.info["input_layout"].endswith(f"+encoder_hidden_states(B, 7, {width})")
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape[:2]


def test_to_dtype_keeps_the_modules_the_class_keeps_in_float32():
    """Like ``from_pretrained(dtype=...)``: ``_keep_in_fp32_modules`` stay float32 in float16 only,
    ``_keep_in_fp32_modules_strict`` in float16 and bfloat16; float64 casts everything."""
    from attncheck.audit.hf import to_dtype

    class Toy(torch.nn.Module):
        _keep_in_fp32_modules = ["head"]
        _keep_in_fp32_modules_strict = ["router"]

        def __init__(self):
            super().__init__()
            self.body, self.head, self.router = (torch.nn.Linear(2, 2) for _ in range(3))

    def dtypes(m):
        return (m.body.weight.dtype, m.head.bias.dtype, m.router.weight.dtype)

    f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
    assert dtypes(to_dtype(Toy(), f16)) == (f16, f32, f32)
    assert dtypes(to_dtype(Toy(), bf16)) == (bf16, bf16, f32)
    assert dtypes(to_dtype(Toy(), f64)) == (f64, f64, f64)


class _Conditioned(torch.nn.Module):
    """A block fed a sequence and two conditioning inputs, each first passed to a submodule."""

    def __init__(self):
        super().__init__()
        self.context = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU())
        self.codes = torch.nn.Embedding(11, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, hidden_states, context_states, codes, steps):
        c = self.context(context_states) + self.codes(codes)
        return self.norm(hidden_states + c.mean(1, keepdim=True) * steps)


def test_conditioning_inputs_are_read_from_the_submodule_the_forward_applies():
    from attncheck.audit.hf import conditioning_inputs

    g = torch.Generator().manual_seed(0)
    got = conditioning_inputs(_Conditioned(), ["context_states", "codes"], g)
    assert got["context_states"].shape == (1, 7, 5) and got["context_states"].is_floating_point()
    assert got["codes"].shape == (1, 7) and got["codes"].dtype == torch.long
    assert 0 <= int(got["codes"].min()) and int(got["codes"].max()) < 11
    # ``steps`` is used directly, not passed to a submodule: nothing to read its shape from
    assert conditioning_inputs(_Conditioned(), ["context_states", "steps"], g) is None


@pytest.mark.slow
def test_draft_model_gets_its_context_states_and_a_key_mask_over_both():
    # MuseGlimmer's assistant (a block-diffusion draft model) attends from its noise block to its
    # target's context states then itself: the context is fixed, the key mask spans both
    (m,) = build_hf("hf:muse_glimmer_assistant", "muse_glimmer_assistant", sdpa=False)
    n = m.info["conditioning_keys"]
    assert m.info["input"] == "noise_embeds" and m.causal is False
    assert "context_hidden_states(B, 7," in m.info["input_layout"] and n == 7
    assert {"attention_mask", "position_ids"} <= m.supports
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    ref = m.forward(x).out
    assert ref.shape[:2] == x.shape[:2]
    # right padding: the real rows are unchanged (the mask reaches the model over both spans)
    am = torch.ones(2, m.seq_len, dtype=torch.long)
    am[:, -3:] = 0
    xp = x.clone()
    xp[:, -3:] = torch.randn(2, 3, x.shape[-1])
    torch.testing.assert_close(m.forward(xp, attention_mask=am).out[:, :-3], m.forward(x[:, :-3]).out)


class _Parent(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_audio = (torch.nn.Linear(config.audio_config.width, 4) if config.audio_config is not None
                            else None)
        self.other = torch.nn.Linear(4, 4)


def test_module_built_from_a_sub_config_field_is_found_in_the_parents_init():
    from types import SimpleNamespace

    from attncheck.audit.hf import _built_from_field

    parent = _Parent(SimpleNamespace(audio_config=SimpleNamespace(width=3)))
    assert _built_from_field(parent, "audio_config") is parent.embed_audio
    assert _built_from_field(parent, "vision_config") is None


@pytest.mark.slow
@pytest.mark.parametrize("model_type, layout", [("gemma4_unified_audio", "inputs_embeds(B, L, "),
                                                ("gemma4_unified_vision", "merged-patches-batched")])
def test_sub_config_module_the_parent_does_not_call_runs_alone_and_has_no_attention(model_type, layout):
    # Gemma 4 unified is encoder-free: its audio "tower" projects waveform frames (RMSNorm →
    # Linear), its vision embedder projects 3 × 3 merged patches with (x, y) position tables;
    # the parent builds both from its sub-configs, and run alone no softmax is seen
    (m,) = build_hf(f"hf:{model_type}", model_type, sdpa=False)
    assert m.info["parent"] == "Gemma4UnifiedForConditionalGeneration"
    assert "built by" in m.info["audited_submodule"] and m.info["attention_modules"] == 0
    assert m.info["input_layout"].startswith(layout)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[0] == 2


@pytest.mark.slow
def test_head_needing_task_inputs_is_audited_through_the_backbone_it_builds():
    # JEV's decision head scores options at marked tokens (marks, num_options,
    # question_type_ids: inputs of its task, batch of one prompt); its attention is all in the
    # backbone it builds from config.text_config
    (m,) = build_hf("hf:jev", "jev", sdpa=False)
    assert m.info["model_type"] == "jev" and m.kind == "decoder"
    assert "built from its text_config" in m.info["audited_submodule"]
    assert "marks" in m.info["audited_submodule"]


@pytest.mark.parametrize("model_type, cls_name, expected", [("jev", "JevForDecision", True),
                                                            ("esmfold2", "EsmFold2Model", False)])
def test_backbone_stands_for_a_head_only_when_it_holds_all_the_attention(model_type, cls_name, expected):
    # JEV's head adds a linear scorer to its backbone; ESMFold2's folding trunk, structure module
    # and confidence head attend beside the protein language model it builds from esmc_config
    from attncheck.audit.hf import _attention_all_in_submodel

    cls = getattr(tf, cls_name)
    assert _attention_all_in_submodel(cls, tf.AutoConfig.for_model(model_type), None) is expected
