"""Configs of the transformers audit: the config a model class is built from (a composite's
sub-config), attributes a parent config writes into its sub-configs, and inputs a forward needs
beside the checked one.  A handful of tiny types."""
import pytest
import torch

pytest.importorskip("transformers")

import transformers as tf  # noqa: E402

from attncheck.audit.hf import build_hf, config_for_class  # noqa: E402


def test_causal_lm_of_a_composite_is_built_from_its_text_config():
    composite = tf.AutoConfig.for_model("llama4")
    got = config_for_class(tf.Llama4ForCausalLM, composite)
    assert type(got) is tf.Llama4TextConfig and got is composite.text_config
    assert config_for_class(tf.Llama4ForConditionalGeneration, composite) is composite
    (m,) = build_hf("hf:emu3", "emu3", sdpa=False)  # Emu3ForCausalLM takes the Emu3TextConfig
    assert type(m.module).__name__ == "Emu3ForCausalLM" and type(m.module.config) is tf.Emu3TextConfig
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_attribute_a_parent_config_writes_is_filled_into_a_lone_sub_config():
    from attncheck.audit.shrink import fill_missing_attribute

    text = tf.T5Gemma2TextConfig()
    assert not hasattr(text, "dropout_rate")  # T5Gemma2Config.__post_init__ writes it
    err = AttributeError("'T5Gemma2TextConfig' object has no attribute 'dropout_rate'")
    assert fill_missing_attribute(text, err) == "T5Gemma2TextConfig.dropout_rate"
    assert text.dropout_rate == tf.T5Gemma2Config().dropout_rate
    assert fill_missing_attribute(text, AttributeError("'int' object has no attribute 'x'")) is None
    # a lone Pix2StructTextConfig lacks the initializer_range its parent writes: built and run
    (m,) = build_hf("hf:pix2struct_text_model", "pix2struct_text_model", sdpa=False)
    assert m.module.config.initializer_range == tf.Pix2StructConfig().initializer_range
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_video_text_model_gets_a_clip_of_its_num_frames_next_to_the_ids():
    (m,) = build_hf("hf:xclip", "xclip", sdpa=False)
    assert m.info["input_layout"] == "input_ids+pixel_values(B,T,C,H,W)"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_audio_encoder_gets_its_feature_mask_and_whole_chunks():
    (m,) = build_hf("hf:qwen3_asr_encoder", "qwen3_asr_encoder", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    window = m.module.config.n_window
    assert x.shape[-1] % (2 * window) == 0  # (B, mels, frames): whole chunks of 2·n_window frames
    assert m.forward(x).out.shape[0] == 2


def test_backbone_keeps_one_output_per_neck_entry():
    from attncheck.audit.shrink import shrink_config

    default = tf.AutoConfig.for_model("depth_anything")  # Dinov2 backbone, stages 9..12 of 12
    tiny = shrink_config(default, 0)
    bb = tiny.backbone_config
    assert len(bb.out_indices) == len(default.backbone_config.out_indices) == len(tiny.neck_hidden_sizes)
    assert bb.out_indices == [1, 2, 3, 4] and bb.out_features == ["stage1", "stage2", "stage3", "stage4"]
    assert bb.num_hidden_layers == 4


def test_unset_moe_sizes_of_a_config_declaring_experts_are_filled():
    from attncheck.audit.shrink import shrink_config

    default = tf.AutoConfig.for_model("diffusion_gemma_text")
    assert default.num_experts is None and default.moe_intermediate_size is None
    tiny = shrink_config(default, 0)
    assert (tiny.num_experts, tiny.top_k_experts, tiny.moe_intermediate_size) == (4, 2, 128)


def test_forecaster_gets_a_per_sample_category_next_to_its_past_values():
    from attncheck.audit.hf import _series_variants

    (m,) = build_hf("hf:timesfm", "timesfm", sdpa=False)
    _, make, kwargs, _ = _series_variants(m.module, m.module.config)[0]
    x = make(3, torch.Generator().manual_seed(0))
    kw = kwargs(x)
    assert torch.equal(kw["freq"], torch.zeros(3, 1, dtype=torch.long))  # TimesFM's frequency bucket
    assert torch.equal(kw["past_values_padding"], torch.zeros(x.shape[:2]))
    assert m.forward(x).out.shape[0] == 3


def test_text_tower_with_an_inherited_pixel_main_input_is_a_token_model():
    from attncheck.audit.hf import choose_class

    default = tf.AutoConfig.for_model("sam3_lite_text_text_model")
    kind, cls = choose_class("sam3_lite_text_text_model", default)
    assert cls.main_input_name == "pixel_values"  # inherited from the package's image model
    assert (kind, cls.__name__) == ("text", "Sam3LiteTextTextModel")


def test_block_diffusion_decoder_is_bidirectional_by_its_modules_design():
    # DiffusionGemma: a causal encoder, then a canvas decoder whose attention modules declare
    # is_causal = False; its canvas maps (256 queries) are not in the checked positions' order
    import attncheck

    rep = attncheck.audit("hf:diffusion_gemma", checks="mask-pattern,batch-independence")
    for variant in ("eager", "sdpa"):
        r = rep[f"mask-pattern[{variant}]"]
        assert r.status == "pass", r.message
        assert [lay["expected"] for lay in r.metrics["layers"]][:2] == ["sliding window 4", "causal"]
        assert rep[f"batch-independence[{variant}]"].status == "pass"


def test_model_without_a_forward_is_audited_through_its_encoder_tower():
    from attncheck.audit.hf import choose_class

    # Apertus1p5VisionTokenizerModel exposes encode() only; its encoder is built from the same config
    kind, cls = choose_class("apertus1p5_vision_tokenizer", tf.AutoConfig.for_model("apertus1p5_vision_tokenizer"))
    assert (kind, cls.__name__) == ("vision", "Apertus1p5VisionTokenizerEncoder")


def test_per_layer_window_of_a_heterogeneous_config_is_read_per_layer():
    # NeoMME's sliding_window is a per-layer attribute: the global read raises, layer i's is
    # config.per_layer_config[i].sliding_window (None on its global-attention layers)
    from attncheck.audit.hf import config_value

    cfg = tf.AutoConfig.for_model("neomme", num_hidden_layers=6, sliding_window=8)
    with pytest.raises(Exception):
        cfg.sliding_window  # noqa: B018
    assert config_value(cfg, "sliding_window") is None
    got = [config_value(cfg, "sliding_window", i) for i in range(6)]
    assert got == [8, cfg.default_long_sliding_window, 8, cfg.default_long_sliding_window, 8, None]
    assert config_value(cfg, "no_such_field", 0) is None


def test_window_the_defaults_leave_unset_is_filled_when_the_forward_needs_one():
    # Step3p7's text model builds its sliding-window mask in every forward, also when its
    # default config (all layers full attention) sets no window
    from attncheck.audit.shrink import WINDOW, fill_unset_windows

    cfg = tf.AutoConfig.for_model("step3p5", num_hidden_layers=2)
    assert cfg.sliding_window is None
    assert fill_unset_windows(cfg, {"sliding_window": None}) == []  # an override stays
    assert fill_unset_windows(cfg) == [f"{type(cfg).__name__}.sliding_window = {WINDOW}"]
    assert cfg.sliding_window == WINDOW and fill_unset_windows(cfg) == []


@pytest.mark.slow
def test_model_needing_a_window_its_defaults_leave_unset_is_built_with_one():
    from attncheck.audit.shrink import WINDOW

    (m,) = build_hf("hf:step3p5", "step3p5", sdpa=False)
    assert m.info["filled"] == f"Step3p7TextConfig.sliding_window = {WINDOW}"
def test_unset_modality_placeholder_id_gets_a_reserved_id_of_its_own():
    from attncheck.audit.shrink import RESERVED_TOP, shrink_config

    default = tf.AutoConfig.for_model("blip-2")
    assert default.image_token_index is None  # the checkpoint's processor adds the token
    tiny = shrink_config(default, 0)
    vocab = tiny.text_config.vocab_size
    assert vocab - RESERVED_TOP <= tiny.image_token_index < vocab
    others = {getattr(tiny.text_config, k) for k in ("pad_token_id", "bos_token_id", "eos_token_id")}
    assert tiny.image_token_index not in others
    (m,) = build_hf("hf:blip-2", "blip-2", sdpa=False)  # ids drawn below the reserved ones: text alone
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert not (x == m.module.config.image_token_index).any()
    assert m.forward(x).out.shape[:2] == x.shape


def test_feed_forward_size_no_config_declares_is_the_tiny_one():
    from attncheck.audit.shrink import FFN, fill_missing_attribute

    text = tf.AutoConfig.for_model("qwen3_omni_moe_talker_text")
    assert not hasattr(text, "shared_expert_intermediate_size")  # its model reads it
    err = AttributeError("'Qwen3OmniMoeTalkerTextConfig' object has no attribute 'shared_expert_intermediate_size'")
    assert fill_missing_attribute(text, err) == "Qwen3OmniMoeTalkerTextConfig.shared_expert_intermediate_size"
    assert text.shared_expert_intermediate_size == FFN
    err = AttributeError("'Qwen3OmniMoeTalkerTextConfig' object has no attribute 'not_a_known_role'")
    assert fill_missing_attribute(text, err) is None


def test_parameters_the_models_init_skips_are_drawn_and_named():
    from attncheck.audit.hf import _instantiate
    from attncheck.audit.shrink import shrink_config

    # Qwen3OmniMoeTalkerModel's _init_weights skips its experts (torch.empty memory): NaN while
    # built, then drawn from N(0, initializer_range²); the initialised ones are untouched
    cls = tf.Qwen3OmniMoeTalkerModel
    config = shrink_config(tf.AutoConfig.for_model("qwen3_omni_moe_talker_text"), 0)
    torch.manual_seed(0)
    m = _instantiate(cls, config, "eager")
    assert set(m.attncheck_redrawn) == {f"layers.{i}.mlp.experts.{p}" for i in range(config.num_hidden_layers)
                                        for p in ("gate_up_proj", "down_proj")}
    assert all(torch.isfinite(p).all() for p in m.parameters())
    w = m.layers[0].mlp.experts.down_proj
    assert abs(float(w.detach().std()) - config.initializer_range) < 0.2 * config.initializer_range
    assert not hasattr(_instantiate(tf.LlamaModel, shrink_config(tf.LlamaConfig(), 0), "eager"), "attncheck_redrawn")


def test_per_layer_type_rope_the_defaults_leave_out_is_default_rope():
    from attncheck.audit.shrink import ROPE_THETA, fill_missing_layer_rope, shrink_config

    text = shrink_config(tf.AutoConfig.for_model("cohere_compass_text"), 0)
    assert text.rope_parameters == {} and "full_attention" in text.layer_types  # the checkpoint fills it
    assert fill_missing_layer_rope(text, KeyError("full_attention")) == (
        "CohereCompassTextConfig.rope_parameters['full_attention']")
    assert text.rope_parameters["full_attention"] == {"rope_type": "default", "rope_theta": ROPE_THETA}
    assert fill_missing_layer_rope(text, KeyError("not_a_layer_type")) is None
    assert fill_missing_layer_rope(text, AttributeError("full_attention")) is None


@pytest.mark.slow
def test_decoder_with_per_layer_type_rope_left_out_builds_and_runs():
    (m,) = build_hf("hf:cohere_compass_text", "cohere_compass_text", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_decoding_of_a_model_that_returns_no_cache_is_not_compared():
    # RecurrentGemma keeps its recurrent state in its modules and returns no cache: a step
    # without one restarts the state, so step-by-step decoding cannot follow its own cache
    from attncheck.audit.hf import Unsupported

    (m,) = build_hf("hf:recurrent_gemma", "recurrent_gemma", sdpa=False)
    x = m.make_inputs(1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(Unsupported, match="returns no cache"):
        m.decode_fn(x, 2)


def test_token_model_without_a_config_vocab_draws_ids_below_its_first_embedding():
    # Canine embeds Unicode code points through hash-bucket tables: no vocab_size in its config
    from attncheck.audit.hf import _adapter, _first_embedding_rows

    cfg = tf.CanineConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128,
                          num_hash_buckets=96)
    model = tf.CanineModel(cfg).eval()
    assert not hasattr(cfg, "vocab_size") and _first_embedding_rows(model) == 96
    a = _adapter("hf:canine", model, cfg, "text", "eager", torch.float32)
    x = a.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert int(x.max()) < 96 and a.forward(x).out.shape[:2] == x.shape
    assert _first_embedding_rows(torch.nn.Linear(2, 2)) is None


def test_model_tying_one_kinds_layers_is_built_with_two_of_each_kind():
    # Zamba's post_init raises when its one hybrid layer has no other hybrid layer to tie into
    (m,) = build_hf("hf:zamba", "zamba", sdpa=False)
    assert m.info["filled"] == "two layers of each per-layer kind" and m.info["shrink_level"] == 0
    assert m.module.config.layers_block_type.count("hybrid") == 2
def test_region_features_sized_by_the_config_are_fed_next_to_the_ids():
    from attncheck.audit.hf import _declared_dim

    config = tf.AutoConfig.for_model("lxmert")
    assert _declared_dim(config, "visual_feats") == config.visual_feat_dim
    assert _declared_dim(config, "visual_pos") == config.visual_pos_dim
    assert _declared_dim(config, "attention_mask") is None
    (m,) = build_hf("hf:lxmert", "lxmert", sdpa=False)
    assert m.info["input_layout"] == "input_ids+visual_feats+visual_pos"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_cross_attended_images_get_a_token_to_image_mask():
    # IDEFICS: images (B, T, C, H, W) reached through gated cross-attention, image_attention_mask (B, L, T)
    (m,) = build_hf("hf:idefics", "idefics", sdpa=False)
    assert m.info["input_layout"] == "input_ids+pixel_values(B,T,C,H,W)+image_attention_mask"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_decoder_stack_needing_its_encoders_output_gets_a_fixed_random_one():
    # T5Gemma 2's decoder raises without encoder_hidden_states: it is fed (1, ENC_LEN, hidden)
    # random states, and its merged self + cross maps are judged with that encoder length
    from attncheck.audit.hf import ENC_LEN

    (m,) = build_hf("hf:t5gemma2_decoder", "t5gemma2_decoder", sdpa=False)
    assert m.info["input_layout"] == "input_ids+encoder_hidden_states"
    assert m.enc_len == ENC_LEN
    x = m.make_inputs(2, 6, generator=torch.Generator().manual_seed(0))
    y = x.clone()
    y[:, 5] = (y[:, 5] + 1 - m.token_range[0]) % (m.token_range[1] - m.token_range[0]) + m.token_range[0]
    with torch.no_grad():
        a, b = m.forward(x).out, m.forward(y).out
    assert torch.equal(a[:, :5], b[:, :5]) and not torch.equal(a[:, 5], b[:, 5])  # causal over the ids


def test_clipping_bound_the_defaults_leave_unset_is_filled_when_the_forward_clips():
    # DBRX clamps q/k/v with clip_qkv unconditionally: clamp(min=None, max=None) raises
    from attncheck.audit.shrink import CLIP, fill_unset_bounds

    cfg = tf.AutoConfig.for_model("dbrx")
    assert cfg.attn_config.clip_qkv is None
    assert fill_unset_bounds(cfg, {"clip_qkv": None}) == []  # an override stays
    assert fill_unset_bounds(cfg) == [f"DbrxAttentionConfig.clip_qkv = {CLIP}"]
    assert cfg.attn_config.clip_qkv == CLIP and fill_unset_bounds(cfg) == []


def test_sub_config_type_spelled_otherwise_and_the_class_its_docstring_builds():
    # NougatConfig names its encoder "donut_swin" (registered: "donut-swin") and has no model of
    # its own: its docstring builds a VisionEncoderDecoderModel, from an encoder + decoder config
    from attncheck.audit.hf import _model_class_of, default_config

    with pytest.raises(ValueError):
        tf.AutoConfig.for_model("nougat")
    c = default_config("nougat")
    assert (c.encoder.model_type, c.decoder.model_type) == ("donut-swin", "mbart")
    cls = _model_class_of(c)
    assert cls is tf.VisionEncoderDecoderModel
    v = config_for_class(cls, c)
    assert isinstance(v, tf.VisionEncoderDecoderConfig) and v.encoder is c.encoder and v.decoder is c.decoder


def test_docstring_class_of_a_sibling_config_is_not_the_towers_class():
    # Qwen2.5-Omni's text config has no model class named after it; its docstring example builds
    # the Thinker, a model of the sibling Qwen2_5OmniThinkerConfig: the text tower is audited
    from attncheck.audit.hf import _model_class_of, choose_class

    c = tf.AutoConfig.for_model("qwen2_5_omni_text")
    assert "Qwen2_5OmniThinkerForConditionalGeneration(" in type(c).__doc__
    assert _model_class_of(c) is None
    assert choose_class("qwen2_5_omni_text", c)[1].__name__ == "Qwen2_5OmniThinkerTextModel"


def test_plain_mapping_the_defaults_leave_unset_is_filled_empty():
    # Chameleon looks its image tokens up in vocabulary_map (the tokenizer's vocabulary), None
    # by default; a text-only forward needs no entry.  Sub-configs and rope parameters stay
    from attncheck.audit.shrink import fill_unset_mappings

    cfg = tf.AutoConfig.for_model("chameleon")
    assert cfg.vocabulary_map is None
    assert fill_unset_mappings(cfg, {"vocabulary_map": None}) == []  # an override stays
    assert fill_unset_mappings(cfg) == ["ChameleonConfig.vocabulary_map = {}"]
    assert cfg.vocabulary_map == {} and fill_unset_mappings(cfg) == []
    assert fill_unset_mappings(tf.AutoConfig.for_model("llama")) == []
