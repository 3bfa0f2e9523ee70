"""The config shrinker gives tiny, consistent configs for transformers model types (configs only,
no models: fast), keeping heads dividing the width, KV heads dividing the heads, rotary dims inside
the head dim, and every per-layer attention type."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

tf = pytest.importorskip("transformers")

from attncheck.audit.shrink import (  # noqa: E402
    HEAD_DIM,
    HEADS,
    LEVELS,
    VOCAB,
    _construct,
    code_section_defaults,
    consistent,
    repair_misspelled_fields,
    shrink_config,
    shrink_values,
)

ALL_TYPES = sorted(tf.CONFIG_MAPPING.keys())


def _shrunk(model_type: str):
    """The first level that builds, as the audit's builder tries them."""
    default = tf.AutoConfig.for_model(model_type)
    errors = []
    for level in LEVELS:
        try:
            return level, shrink_config(default, level)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}")
    raise AssertionError(f"{model_type}: no level builds: {errors[0]}")


def _assert_consistent(model_type: str) -> None:
    try:
        tf.AutoConfig.for_model(model_type)
    except Exception:  # noqa: BLE001 - the default config itself cannot be built: nothing to shrink
        return
    level, cfg = _shrunk(model_type)
    assert consistent(cfg) == [], (model_type, level, consistent(cfg))


@given(st.sampled_from(ALL_TYPES))
def test_any_config_class_shrinks_consistently(model_type):
    _assert_consistent(model_type)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ALL_TYPES)
def test_every_config_class_shrinks_consistently(model_type):
    _assert_consistent(model_type)


def test_kv_heads_follow_the_original_grouping():
    # MHA stays MHA, MQA stays MQA, GQA becomes 2 groups of 2
    assert shrink_config(tf.AutoConfig.for_model("llama")).num_key_value_heads == HEADS
    mistral = shrink_config(tf.AutoConfig.for_model("mistral"))
    assert (mistral.num_attention_heads, mistral.num_key_value_heads) == (HEADS, 2)
    assert mistral.hidden_size % mistral.num_attention_heads == 0
    v = shrink_values({"num_attention_heads": 32, "num_key_value_heads": 1, "hidden_size": 4096})
    assert v == {"num_attention_heads": HEADS, "num_key_value_heads": 1, "hidden_size": 64}


def test_mla_dims_deepseek_v3():
    c = shrink_config(tf.AutoConfig.for_model("deepseek_v3"))
    assert c.qk_rope_head_dim + c.qk_nope_head_dim == HEAD_DIM == c.qk_head_dim
    assert c.kv_lora_rank == 32 and c.q_lora_rank == 32 and c.v_head_dim == HEAD_DIM
    assert c.n_routed_experts == 4 and c.num_experts_per_tok == 2 and c.n_group == 1 and c.topk_group == 1
    assert c.num_hidden_layers == 2
    lc = shrink_config(tf.AutoConfig.for_model("longcat_flash"))  # head_dim: the rotary width
    assert lc.head_dim == lc.qk_rope_head_dim < lc.qk_head_dim == HEAD_DIM


def test_rotary_dim_inside_head_dim():
    for t in ("gptj", "codegen"):
        c = shrink_config(tf.AutoConfig.for_model(t))
        assert c.rotary_dim <= c.n_embd // c.n_head, t


def test_gpt_neo_nested_attention_types():
    c = shrink_config(tf.AutoConfig.for_model("gpt_neo"))
    assert c.attention_types == [[["global", "local"], 1]]
    assert c.attention_layers == ["global", "local"] and c.num_layers == 2


def test_per_stage_lists_swin():
    c = shrink_config(tf.AutoConfig.for_model("swin"))
    assert list(c.num_heads) == [HEADS] * 4 and len(c.depths) == 4 and max(c.depths) <= 2
    assert c.embed_dim % HEADS == 0
    # the last stage (resolution halved 3 times) still holds one window
    assert c.image_size // c.patch_size // 8 >= c.window_size


def test_layer_types_keep_every_attention_type():
    c = shrink_config(tf.AutoConfig.for_model("gpt_oss"))
    assert set(c.layer_types) == {"sliding_attention", "full_attention"}
    assert len(c.layer_types) == c.num_hidden_layers
    assert c.sliding_window == 4
    q = shrink_config(tf.AutoConfig.for_model("qwen3_next"))
    assert {"linear_attention", "full_attention"} <= set(q.layer_types)


def test_token_ids_fit_the_vocab_and_nested_configs_shrink():
    c = shrink_config(tf.AutoConfig.for_model("gemma3"))
    assert c.text_config.vocab_size == VOCAB and c.text_config.hidden_size == 64
    assert c.vision_config.hidden_size == 64
    assert c.image_token_index < VOCAB


def test_overrides_follow_attribute_map_and_lists_do_not_crash():
    c = shrink_config(tf.AutoConfig.for_model("gpt_neo"), overrides={"num_attention_heads": 2})
    assert c.num_heads == 2
    with pytest.raises(Exception):  # noqa: B017 - the config class rejects it; the caller reports it
        shrink_config(tf.AutoConfig.for_model("llama"), overrides={"num_attention_heads": [4, 4]})


def test_mamba2_heads_times_head_dim_stay_expand_times_width():
    m = shrink_config(tf.AutoConfig.for_model("mamba2"))
    assert m.hidden_size == 64 and m.num_heads * m.head_dim == m.expand * m.hidden_size
    b = shrink_config(tf.AutoConfig.for_model("bamba"))
    assert b.mamba_n_heads * b.mamba_d_head == b.mamba_expand * b.hidden_size
    h = shrink_config(tf.AutoConfig.for_model("nemotron_h"))
    assert h.mamba_num_heads % h.n_groups == 0 and h.ssm_state_size == 16
    f = shrink_config(tf.AutoConfig.for_model("falcon_h1"))  # heads × head dim = the SSM width
    assert f.mamba_n_heads * f.mamba_d_head == f.mamba_d_ssm == 128 and f.mamba_d_state == 16


class _Validated:
    """A config class whose validators tie fields: ``window <= positions``, ``groups | width``."""

    def __init__(self, width, window, positions, groups=1, layers=1):
        if window > positions or width % groups:
            raise ValueError("window must fit the positions and groups divide the width")
        self.width, self.window, self.positions, self.groups, self.layers = width, window, positions, groups, layers


def test_rejected_values_are_given_back_per_field_not_per_level():
    # one field at its original value is enough: the cheapest (positions) is given back, width stays tiny
    c = _construct(_Validated, {"width": 4096, "window": 128, "positions": 4096},
                   {"width": 64, "window": 128, "positions": 64}, {})
    assert (c.width, c.window, c.positions) == (64, 128, 4096)
    # two violations: no single field fixes them; every shrink the class accepts is kept (layers)
    orig = {"width": 4096, "window": 128, "positions": 4096, "groups": 512, "layers": 32}
    c = _construct(_Validated, orig, {**orig, "width": 64, "positions": 64, "layers": 2}, {})
    assert (c.width, c.positions, c.layers) == (4096, 4096, 2)
    # overrides are never given back
    with pytest.raises(ValueError):
        _construct(_Validated, {"width": 64, "window": 4, "positions": 64},
                   {"width": 64, "window": 128, "positions": 64}, {"window": 128})


def test_validated_config_keeps_its_widths_shrunk():
    # granite_speech5's validator wants context_size <= max_position_embeddings
    c = shrink_config(tf.AutoConfig.for_model("granite_speech5_encoder"))
    assert c.hidden_size == 64 and c.context_size <= c.max_position_embeddings


def test_fields_the_defaults_leave_unset_get_tiny_values():
    assert shrink_config(tf.AutoConfig.for_model("ministral")).head_dim == 64 // HEADS
    n = shrink_config(tf.AutoConfig.for_model("nemotron"))
    assert n.num_key_value_heads == n.num_attention_heads == HEADS
    d = shrink_config(tf.AutoConfig.for_model("dots1"))
    assert (d.n_routed_experts, d.num_experts_per_tok, d.n_shared_experts) == (4, 2, 1)


def test_sizes_equal_in_the_original_stay_equal():
    a = shrink_config(tf.AutoConfig.for_model("dots3_note_audio_encoder"))
    assert a.adapter_input_size == a.hidden_size == 64
    m = shrink_config(tf.AutoConfig.for_model("mimi"))
    assert m.upsample_groups == m.hidden_size == 64
    s = shrink_config(tf.AutoConfig.for_model("sam"))  # across nested configs
    assert s.vision_config.output_channels == s.prompt_encoder_config.hidden_size == 64
    # SAM's 2-D sine position features: half the prompt encoder's width per axis
    assert 2 * s.vision_config.num_pos_feats == s.mask_decoder_config.hidden_size == 64


def test_rope_sections_the_model_code_defaults_to():
    assert code_section_defaults("transformers.models.glm4v.configuration_glm4v") == {"mrope_section": (8, 12, 12)}
    g = shrink_config(tf.AutoConfig.for_model("glm4v_text"))
    assert sum(g.rope_parameters["mrope_section"]) == HEAD_DIM // 2
    moe = shrink_config(tf.AutoConfig.for_model("glm4v_moe_text"))  # partial_rotary_factor 0.5
    assert sum(moe.rope_parameters["mrope_section"]) == HEAD_DIM // 4
    q = shrink_config(tf.AutoConfig.for_model("qwen2_vl"))  # sections on the config
    assert sum(q.text_config.rope_parameters["mrope_section"]) == HEAD_DIM // 2


def test_backbone_output_stages_and_detector_input_channels_stay_wired():
    u = shrink_config(tf.AutoConfig.for_model("upernet"))  # every stage feeds the decode head
    assert u.backbone_config.out_indices == [1, 2, 3, 4]
    r = shrink_config(tf.AutoConfig.for_model("rt_detr"))
    # the encoder reads the backbone's last three stages: list entries follow list entries, not
    # an equal scalar (encoder_ffn_dim 1024 → 128 is no stage width)
    assert list(r.encoder_in_channels) == list(r.backbone_config.hidden_sizes[1:])
    assert list(r.encode_proj_layers) == [2]  # a feature level of encoder_in_channels, not a layer
    assert r.num_queries <= 8 and r.decoder_layers == 2


def test_source_layer_lists_keep_their_first_entries():
    m = shrink_config(tf.AutoConfig.for_model("mistral_large4_text"))
    assert m.num_hidden_layers == 2
    assert list(m.kv_source_layers) == [0, 1]
    assert len(m.no_rope_layers) == len(m.mlp_layer_types) == 2
    assert shrink_values({"num_hidden_layers": 8, "shared_kv": [0, 0, 2, 2, 4, 4, 6, 6]})["shared_kv"] == [0, 0]


def test_stage_widths_no_list_names_scale_with_the_stage_widths():
    # HGNet-V2 reads stage_*_channels, not hidden_sizes: every per-stage width scales alike, so the
    # detector's encoder_in_channels (tied to hidden_sizes) still equal the stages it reads
    d = shrink_config(tf.AutoConfig.for_model("d_fine"))
    b = d.backbone_config
    assert list(b.stage_in_channels[1:]) == list(b.stage_out_channels[:-1])
    assert list(d.encoder_in_channels) == [b.stage_out_channels[i - 1] for i in b.out_indices]
    v = shrink_config(tf.AutoConfig.for_model("dinov2"))  # stages are layers: shrunk with them
    assert v.num_hidden_layers == 2


def test_per_layer_overrides_of_a_heterogeneous_config_shrink_too():
    # Dots3's sliding-window layers override heads and MLA ranks through per_layer_config; the
    # global values of per-layer attributes are read without the per-layer guard
    default = tf.AutoConfig.for_model("dots3_note_text")
    tiny = shrink_config(default, 0)
    assert set(tiny.layer_types) == set(default.layer_types)
    for i in range(tiny.num_hidden_layers):
        layer = tiny.per_layer_config[i]
        assert layer.num_attention_heads == layer.num_key_value_heads == HEADS
        assert layer.kv_lora_rank <= 32 and layer.qk_nope_head_dim + layer.qk_rope_head_dim == HEAD_DIM
    # NeoMME: the per-layer windows are shrunk (its global-attention layer keeps None)
    neo = shrink_config(tf.AutoConfig.for_model("neomme"), 0)
    windows = [neo.per_layer_config[i].sliding_window for i in range(neo.num_hidden_layers)]
    assert [t == "full_attention" for t in neo.layer_types] == [w is None for w in windows]
    assert all(w is None or w <= 4 for w in windows)


def test_nested_config_keeps_its_vocab_when_the_parent_ties_token_ranges_to_it():
    # Apertus 1.5: visual and audio codebook ids are offsets into the text vocab, which the
    # parent validates; the text config is shrunk all but its vocab instead of given back whole
    default = tf.AutoConfig.for_model("apertus1p5")
    tiny = shrink_config(default, 0)
    text = tiny.text_config
    assert text.vocab_size == default.text_config.vocab_size
    assert (text.hidden_size, text.num_hidden_layers) == (64, 2)
    assert tiny.audio_token_offset + tiny.audio_config.codebook_size <= text.vocab_size


def test_cycled_block_pattern_keeps_a_layer_of_every_kind():
    # RecurrentGemma repeats block_types = (recurrent, recurrent, attention) over its 26 layers:
    # two layers would keep no attention block
    tiny = shrink_config(tf.AutoConfig.for_model("recurrent_gemma"), 0)
    assert tiny.num_hidden_layers == 3 and list(tiny.block_types) == ["recurrent", "recurrent", "attention"]
    assert "sliding_attention" in tiny.layers_block_type
    # a pattern whose last new kind comes later than the 4th entry is compressed to its kinds
    out = shrink_values({"num_hidden_layers": 24, "block_types": ["a"] * 5 + ["b"] + ["a"] * 2})
    assert out["block_types"] == ["a", "b"] and out["num_hidden_layers"] == 2


def test_default_choice_left_unset_takes_the_first_option():
    # X-MOD's forward needs a language when the input names none: default_language among languages
    out = shrink_values({"languages": ["de_DE", "en_XX"], "default_language": None, "default_mode": None})
    assert out["default_language"] == "de_DE" and out["default_mode"] is None
    tiny = shrink_config(tf.AutoConfig.for_model("xmod"), 0)
    assert tiny.default_language == tiny.languages[0]


def test_layers_outside_a_partial_layer_count_keep_every_kind():
    # Gemma-3n: the last num_kv_shared_layers reuse the keys / values of the last earlier layer
    # of their type, so the layers before them need one of each type
    default = tf.AutoConfig.for_model("gemma3n_text")
    assert 0 < default.num_kv_shared_layers < default.num_hidden_layers
    tiny = shrink_config(default, 0)
    first_shared = tiny.num_hidden_layers - tiny.num_kv_shared_layers
    assert tiny.num_kv_shared_layers >= 1
    assert set(tiny.layer_types[:first_shared]) == set(default.layer_types)
    assert "reuse" in tiny.kv_sharing_modes  # the property that raised for 2 layers, 2 shared


def test_layer_kinds_the_class_leaves_unset_come_from_the_models_mask_mapping():
    # LFM2-MoE's config leaves layer_types None while its decoder layers index it; the modeling
    # code builds a mask per kind: {"full_attention": ..., "conv": ...}
    from attncheck.audit.shrink import code_layer_kinds

    default = tf.AutoConfig.for_model("lfm2_moe")
    assert default.layer_types is None
    assert code_layer_kinds(type(default).__module__) == ("full_attention", "conv")
    tiny = shrink_config(default, 0)
    assert tiny.layer_types == ["full_attention", "conv"] and tiny.num_hidden_layers == 2
    assert code_layer_kinds("transformers.models.no_such_model.configuration_no_such_model") == ()


def test_two_layers_of_each_kind_and_widths_the_class_derives():
    # Zamba ties the shared attention block of its hybrid layers to the first one (two hybrid
    # layers needed), and derives attention_hidden_size = 2 × hidden_size itself
    default = tf.AutoConfig.for_model("zamba")
    once, twice = shrink_config(default, 0), shrink_config(default, 0, repeat=2)
    assert once.layers_block_type.count("hybrid") == 1
    assert twice.layers_block_type == ["linear_attention", "hybrid"] * 2 and twice.num_hidden_layers == 4
    assert twice.attention_hidden_size == 2 * twice.hidden_size == 128
    assert twice.num_attention_heads * twice.attention_head_dim == twice.attention_hidden_size
def test_image_sides_and_feature_map_sides_stay_tied_across_nested_configs():
    # SAM 2: the prompt encoder's grid (image_size / patch_size) is the side of the backbone's
    # last feature map, and backbone_feature_sizes are the image side over the level strides
    s = shrink_config(tf.AutoConfig.for_model("sam2"))
    side = s.vision_config.backbone_config.image_size[0]
    assert side <= 128 and s.prompt_encoder_config.image_size == side
    stride = [1024 // f[0] for f in tf.AutoConfig.for_model("sam2").vision_config.backbone_feature_sizes]
    assert [list(f) for f in s.vision_config.backbone_feature_sizes] == [[side // r] * 2 for r in stride]
    assert s.vision_config.backbone_feature_sizes[-1][0] == side // s.prompt_encoder_config.patch_size
    # a single tower: nothing to tie (the image side follows its own patches)
    v = shrink_config(tf.AutoConfig.for_model("vit"))
    assert v.image_size == 4 * v.patch_size


def test_memory_attention_rope_sides_follow_the_last_feature_map():
    # SAM 2 video: memory attention runs on the last feature map, its 2-D rope tables are built
    # for memory_attention_rope_feat_sizes: they shrink with the image like backbone_feature_sizes
    default = tf.AutoConfig.for_model("sam2_video")
    assert default.memory_attention_rope_feat_sizes == default.vision_config.backbone_feature_sizes[-1]
    for level in (0, 2):
        s = shrink_config(default, level)
        assert list(s.memory_attention_rope_feat_sizes) == list(s.vision_config.backbone_feature_sizes[-1])
        assert s.memory_attention_rope_feat_sizes[0] < default.memory_attention_rope_feat_sizes[0]


def test_a_misspelled_default_field_is_moved_to_the_declared_field():
    # EdgeTAM's default backbone spells ``archirecture``: ``architecture`` kept its default
    # (resnet50), whose channels the RepViT neck (backbone_channel_list) does not take
    c = tf.AutoConfig.for_model("edgetam_vision_model")
    assert c.backbone_config.architecture != "repvit_m1"
    assert repair_misspelled_fields(c) == ["TimmWrapperConfig.archirecture → architecture"]
    assert c.backbone_config.architecture == "repvit_m1"
    assert repair_misspelled_fields(c) == []  # done once: the field no longer holds its default
    for model_type in ("llama", "sam2", "detr"):  # correctly spelled configs are left alone
        assert repair_misspelled_fields(tf.AutoConfig.for_model(model_type)) == []


def test_width_of_the_widest_stage_follows_the_base_channels():
    # Emu3's VQ-VAE: hidden_size (its attention blocks' width) = base_channels × the largest
    # channel multiplier
    o = tf.AutoConfig.for_model("emu3_vqgan")
    assert o.hidden_size == o.base_channels * max(o.channel_multiplier)
    s = shrink_config(o)
    assert s.base_channels < o.base_channels and s.hidden_size == s.base_channels * max(s.channel_multiplier)


def test_hierarchical_output_width_keeps_its_stage_doubling():
    import transformers as tf

    from attncheck.audit.shrink import shrink_config

    # CLAP's HTSAT audio tower: hidden_size = patch_embeds_hidden_size × 2^(stages - 1) (96 × 8)
    default = tf.ClapAudioConfig()
    f = 2 ** (len(default.depths) - 1)
    assert default.hidden_size == default.patch_embeds_hidden_size * f
    tiny = shrink_config(default, 0)
    assert tiny.patch_embeds_hidden_size < default.patch_embeds_hidden_size
    assert tiny.hidden_size == tiny.patch_embeds_hidden_size * f
    # its spectrogram image side shrinks like an image side: whole windows at the last stage
    assert tiny.spec_size < default.spec_size
    last = tiny.spec_size // tiny.patch_size // 2 ** (len(tiny.depths) - 1)
    assert last >= tiny.window_size and last % tiny.window_size == 0


def test_feature_layers_a_projector_reads_become_the_last_layers():
    import transformers as tf

    from attncheck.audit.shrink import shrink_config

    default = tf.AutoConfig.for_model("molmo2")  # the adapter reads ViT layers 24 and 18 of 25
    assert default.adapter_config.vision_feature_layer == [24, 18]
    tiny = shrink_config(default, 0)
    assert tiny.adapter_config.vision_feature_layer == [-1, -2]  # deepest first, as given
    n = tiny.vision_config.num_hidden_layers
    assert n < default.vision_config.num_hidden_layers and tiny.vision_config.hidden_size < 1152
    assert all(-n <= i < 0 for i in tiny.adapter_config.vision_feature_layer)
    llava = shrink_config(tf.AutoConfig.for_model("llava"), 0)
    assert llava.vision_feature_layer == tf.AutoConfig.for_model("llava").vision_feature_layer  # negative: kept


def test_keywords_a_parent_passes_to_a_sub_config_survive_shrinking():
    # CHMv2 builds its DINOv3 backbone_config with return_class_token=True, no field of the
    # backbone's config class, which its backbone reads (else it returns no class tokens)
    default = tf.AutoConfig.for_model("chmv2")
    assert default.backbone_config.return_class_token is True
    tiny = shrink_config(default, 0)
    assert tiny.backbone_config.return_class_token is True
    assert tiny.backbone_config.hidden_size < default.backbone_config.hidden_size
    # only flags are carried: a size passed so (a timm tower's num_classes) keeps the shrunk value
    video = shrink_config(tf.AutoConfig.for_model("pe_video_encoder"), 0)
    assert getattr(video.vision_config, "num_classes", None) != 1024
    # a heterogeneous config, whose per-layer attributes refuse global reads, shrinks as before
    hetero = shrink_config(tf.AutoConfig.for_model("embedding_gemma2"), 0)
    assert hetero.text_config.hidden_size < tf.AutoConfig.for_model("embedding_gemma2").text_config.hidden_size


def test_a_field_equal_to_the_towers_image_side_follows_their_shrunk_side():
    # DepthPro: patch_size (the side of the tiles its DINOv2 encoders see) must equal their
    # image_size; its hook ids (layers of those encoders) become the last layers
    default = tf.AutoConfig.for_model("depth_pro")
    assert default.patch_size == default.image_model_config.image_size == 384
    tiny = shrink_config(default, 0)
    assert tiny.patch_size == tiny.image_model_config.image_size == tiny.patch_model_config.image_size < 384
    assert tiny.image_model_config.hidden_size < default.image_model_config.hidden_size  # not given back
    n = tiny.image_model_config.num_hidden_layers
    assert sorted(tiny.intermediate_hook_ids) == [-2, -1] and n >= 2


@pytest.mark.slow  # timm imports and builds two MobileNet-V5 towers on the meta device
def test_timm_generator_width_multiplier_shrinks_the_stages():
    timm = pytest.importorskip("timm")
    import torch

    from attncheck.audit.shrink import TIMM_WIDTH_MULTIPLIER, timm_architecture_args

    # Gemma 3n's MobileNet-V5 tower: the generator's channel_multiplier, which the class never sees
    assert timm_architecture_args("mobilenetv5_300m_enc")["channel_multiplier"] == 1.0
    tiny = shrink_config(tf.AutoConfig.for_model("gemma3n_vision"), 0)
    assert tiny.model_args["channel_multiplier"] == TIMM_WIDTH_MULTIPLIER
    with torch.device("meta"):
        full = timm.create_model("mobilenetv5_300m_enc")
        small = timm.create_model("mobilenetv5_300m_enc", **tiny.model_args)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(small) < count(full) / 10
    # a generator without a width multiplier gets none
    assert "channel_multiplier" not in shrink_config(tf.AutoConfig.for_model("timm_wrapper"), 0).model_args


def test_width_of_a_sibling_stack_and_local_attention_window_shrink():
    # BLT: the local stacks project to the global transformer's width (hidden_size_global), and
    # the local window (local_attention_window_len) is written into the encoder's sliding_window
    c = shrink_config(tf.AutoConfig.for_model("blt"))
    assert c.encoder_config.hidden_size_global == c.decoder_config.hidden_size_global == c.global_config.hidden_size
    assert c.global_config.hidden_size == 64
    assert c.local_attention_window_len == c.encoder_config.sliding_window == 4


def test_default_without_full_attention_layers_gets_one_of_each_kind_the_code_masks():
    # GraniteMoeHybrid derives all-Mamba layers by default; its modeling code builds full-attention
    # masks too: one layer of each kind.  A class deriving all full-attention layers is left alone
    g = shrink_config(tf.AutoConfig.for_model("granitemoehybrid"))
    assert sorted(g.layer_types) == ["full_attention", "linear_attention"]
    assert shrink_config(tf.AutoConfig.for_model("qwen2")).layer_types == ["full_attention"] * 2


def test_rope_section_the_model_code_reads_without_a_default_gets_three_axes():
    # HunYuanVL's rotary embedding takes len(rope_parameters.get("mrope_section")) in every
    # forward; its default config has none: three axes summing to half the tiny head dim
    from attncheck.audit.shrink import HEAD_DIM, code_section_defaults

    assert "mrope_section" in code_section_defaults("transformers.models.hunyuan_vl.configuration_hunyuan_vl")
    c = shrink_config(tf.AutoConfig.for_model("hunyuan_vl_text"))
    sec = c.rope_parameters["mrope_section"]
    assert len(sec) == 3 and sum(sec) == HEAD_DIM // 2 == c.head_dim // 2


def test_output_projection_width_shrinks_with_the_embedding_it_projects():
    # Gemma 4 unified's vision embedder normalises and projects its mm_embed_dim features with
    # a layer of output_proj_dims inputs: both 3840 by default, both shrunk alike
    c = shrink_config(tf.AutoConfig.for_model("gemma4_unified_vision"))
    assert c.output_proj_dims == c.mm_embed_dim < 3840
