"""Vision inputs of the transformers audit beyond a plain image: required arguments made from
their documented shapes, several main inputs, clips for video towers, tuple config fields, and
timm models shrunk through ``model_args``.  A handful of tiny types."""
import pytest
import torch

pytest.importorskip("transformers")

import transformers as tf  # noqa: E402

from attncheck.audit.hf import build_hf, choose_class, documented_input, image_shape  # noqa: E402


class _Documented(torch.nn.Module):
    def forward(self, pixel_values, prompt_pixel_values, prompt_masks, task_inputs, flags, boxes):
        r"""
        prompt_pixel_values (`torch.FloatTensor` of shape `(batch_size, num_channels, height, width)`):
            Prompt image.
        prompt_masks (`torch.FloatTensor` of shape `(batch_size, num_channels, height, width)`):
            Prompt mask.
        task_inputs (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Task tokens.
        flags (`torch.BoolTensor` of shape `(batch_size, height)`):
            Flags.
        boxes (`torch.FloatTensor` of shape `(batch_size, num_boxes, 4)`):
            A dimension the audit cannot size.
        """


def _vision_config(**kw):
    return tf.PretrainedConfig(image_size=24, num_channels=3, vocab_size=100, **kw)


def test_documented_input_follows_the_documented_shape_and_role():
    g = torch.Generator().manual_seed(0)
    cfg = _vision_config(task_seq_len=5)
    m = _Documented()
    img = documented_input(m, "prompt_pixel_values", cfg, g)
    assert img.shape == (1, *image_shape(cfg)) == (1, 3, 24, 24) and img.dtype == torch.float32 and img.std() > 0.5
    mask = documented_input(m, "prompt_masks", cfg, g)
    assert mask.shape == (1, 3, 24, 24) and bool((mask == 1).all())  # every position real
    ids = documented_input(m, "task_inputs", cfg, g)  # a plain Tensor named *inputs: token ids
    assert ids.dtype == torch.long and ids.shape == (1, 5)  # the config's task_seq_len
    assert int(ids.min()) >= 4 and int(ids.max()) < 100 - 16
    flags = documented_input(m, "flags", cfg, g)
    assert flags.dtype == torch.bool and flags.shape == (1, 24) and bool(flags.all())
    assert documented_input(m, "boxes", cfg, g) is None  # num_boxes: not a size the audit knows
    assert documented_input(m, "pixel_values", cfg, g) is None  # undocumented


def test_several_main_inputs_audit_the_first_with_the_others_documented():
    kind, cls = choose_class("oneformer", tf.AutoConfig.for_model("oneformer"))
    assert isinstance(cls.main_input_name, (list, tuple)) and kind == "vision"
    (m,) = build_hf("hf:oneformer", "oneformer", sdpa=False)
    assert m.info["input"] == "pixel_values" and m.info["input_layout"] == "image"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[0] == 2 and torch.isfinite(out).all()


def test_tuple_config_field_becomes_a_list_when_the_model_concatenates_lists():
    default = tf.AutoConfig.for_model("vitmatte")
    assert isinstance(default.fusion_hidden_sizes, tuple)  # `[hidden_size] + fusion_hidden_sizes` in the model
    (m,) = build_hf("hf:vitmatte", "vitmatte", sdpa=False)
    assert isinstance(m.module.config.fusion_hidden_sizes, list)
    assert m.module.config.fusion_hidden_sizes == list(m.module.config.fusion_hidden_sizes)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[0] == 2


def test_timm_model_args_shrink_the_arguments_of_the_timm_architecture():
    pytest.importorskip("timm")
    from attncheck.audit.shrink import timm_architecture_args, timm_model_args

    full = timm_architecture_args("vit_pe_core_large_patch14_336")
    assert (full["embed_dim"], full["depth"], full["num_heads"], full["patch_size"]) == (1024, 24, 16, 14)
    args = timm_model_args("vit_pe_core_large_patch14_336", None, 0)
    assert (args["embed_dim"], args["depth"], args["num_heads"]) == (64, 2, 4)
    assert args["img_size"] == 14 * 4  # four patches per side
    assert "patch_size" not in args  # unchanged arguments are left to the architecture
    assert timm_model_args("vit_pe_core_large_patch14_336", {"depth": 3}, 3)["depth"] == 2
    # an architecture timm does not register: the given arguments are still shrunk
    assert timm_model_args("no_such_timm_architecture", {"depth": 3, "drop_rate": 0.1}, 0) == {"depth": 2, "drop_rate": 0.1}
    assert timm_model_args("no_such_timm_architecture", None, 0) == {}


def test_video_text_model_gets_a_clip_from_its_nested_timm_tower():
    pytest.importorskip("timm")
    (m,) = build_hf("hf:pe_video", "pe_video", sdpa=False)
    assert m.info["input_layout"] == "input_ids+pixel_values_videos(B,T,C,H,W)"
    side = m.module.config.video_config.vision_config.model_args["img_size"]
    assert image_shape(m.module.config) == (3, side, side)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == (2, x.shape[1])


def test_patch_sequence_with_per_patch_positions_is_split_back_per_image():
    (m,) = build_hf("hf:gemma4_vision", "gemma4_vision", sdpa=False)  # pixel_position_ids (B, N, 2)
    assert m.info["input_layout"].startswith("patches")
    k = m.module.config.pooling_kernel_size
    x = m.make_inputs(3, generator=torch.Generator().manual_seed(0))
    assert x.shape[1] == (2 * k) ** 2  # 2k × 2k patches: pooled to 2 × 2 soft tokens per image
    out = m.forward(x).out  # the model strips padding into one flat (B·4, D) sequence
    assert out.shape[:2] == (3, 4)
    alone = m.forward(x[1:2]).out
    torch.testing.assert_close(out[1:2], alone, atol=1e-5, rtol=1e-4)


def test_frame_tower_gets_the_frames_of_whole_clips():
    (m,) = build_hf("hf:xclip_vision_model", "xclip_vision_model", sdpa=False)  # B·T frames of B clips
    assert m.info["input_layout"] == "clip-frames"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.shape[1] == m.module.config.num_frames
    out = m.forward(x).out
    assert out.shape[:2] == (2, m.module.config.num_frames)
    torch.testing.assert_close(out[1:], m.forward(x[1:]).out, atol=1e-5, rtol=1e-4)


def test_per_layer_types_left_unset_are_filled_with_the_documented_values():
    from attncheck.audit.shrink import documented_values, shrink_config

    default = tf.AutoConfig.for_model("deepseek_ocr2_text")
    assert default.mlp_layer_types is None  # the model indexes it per layer
    assert documented_values(type(default), "mlp_layer_types") == ["dense", "sparse"]
    assert documented_values(type(default), "no_such_field") == []
    small = shrink_config(default, 0)
    assert small.mlp_layer_types == ["dense", "sparse"][: small.num_hidden_layers] and small.num_hidden_layers == 2
    assert shrink_config(default, 0, {"mlp_layer_types": ["dense"] * 2}).mlp_layer_types == ["dense", "dense"]


def test_joint_model_with_a_patch_sequence_tower_gets_its_fixed_image_as_patches():
    (m,) = build_hf("hf:siglip2", "siglip2", sdpa=False)  # spatial_shapes + pixel_attention_mask
    assert m.info["input_layout"].startswith("input_ids+pixel_values")
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[:2] == tuple(x.shape) and torch.isfinite(out).all()


def test_navit_packed_tower_keeps_each_image_to_itself():
    (m,) = build_hf("hf:minicpmv4_6_vision", "minicpmv4_6_vision", sdpa=False)  # target_sizes + one strip
    assert m.info["input_layout"] == "navit-packed"
    x = m.make_inputs(3, generator=torch.Generator().manual_seed(0))
    cfg = m.module.config
    side = cfg.image_size // cfg.patch_size
    assert x.shape == (3, side * side, cfg.num_channels, cfg.patch_size, cfg.patch_size)
    out = m.forward(x).out  # (1, 3·L, D) packed → (3, L, D)
    assert out.shape[0] == 3
    torch.testing.assert_close(out[2:], m.forward(x[2:]).out, atol=1e-5, rtol=1e-4)


class _StridedRecognizer(torch.nn.Module):
    """A CNN whose last pooling window (4) needs a 4 × 4 map after its stride-16 stem: images of
    side ≥ 64; its config declares no image side (text-line crops of any size)."""

    main_input_name = "pixel_values"

    def __init__(self, fail_other: bool = False):
        super().__init__()
        self.config = tf.PretrainedConfig(num_channels=3)
        self.stem = torch.nn.Conv2d(3, 8, kernel_size=16, stride=16)
        self.fail_other = fail_other

    def forward(self, pixel_values):
        if self.fail_other:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        h = torch.nn.functional.avg_pool2d(self.stem(pixel_values), 4)
        return h.flatten(2).transpose(1, 2)


def test_images_grow_until_the_strides_and_pooling_fit():
    from attncheck.audit.hf import MAX_GROWN_SIDE, _first_accepted_layout

    m = _StridedRecognizer()
    a, x = _first_accepted_layout("test", m, "vision", torch.float32)
    assert x.shape[-2:] == (64, 64) and m.attncheck_image_side == 64  # 32 → 64: the first side that fits
    assert a.image_shape == (3, 64, 64) and a.make_inputs(1).shape == (1, 3, 64, 64)
    other = _StridedRecognizer(fail_other=True)
    with pytest.raises(RuntimeError, match="mat1"):  # not a too-small map: no growing
        _first_accepted_layout("test", other, "vision", torch.float32)
    assert not hasattr(other, "attncheck_image_side") and MAX_GROWN_SIDE >= 64


@pytest.mark.slow  # builds four PP-OCR models on the meta device
def test_task_class_that_adds_attention_to_an_attention_free_base_is_chosen():
    from attncheck.audit.hf import _head_with_attention
    from attncheck.audit.shrink import shrink_config

    # PP-OCRv5 recognizer: its base model is the CNN backbone; the SVTR attention blocks are in
    # the text-recognition head
    cfg = shrink_config(tf.AutoConfig.for_model("pp_ocrv5_mobile_rec"), 0)
    _, base = choose_class("pp_ocrv5_mobile_rec", cfg)
    assert base.__name__ == "PPOCRV5MobileRecModel"
    assert _head_with_attention("pp_ocrv5_mobile_rec", cfg, base).__name__ == "PPOCRV5MobileRecForTextRecognition"
    # PP-OCRv6 tiny recognizer: a convolutional head, no attention anywhere: no class is chosen
    tiny = shrink_config(tf.AutoConfig.for_model("pp_ocrv6_tiny_rec"), 0)
    assert _head_with_attention("pp_ocrv6_tiny_rec", tiny, choose_class("pp_ocrv6_tiny_rec", tiny)[1]) is None


def test_tower_fed_flattened_patches_gets_a_patch_sequence():
    # Molmo2's ViT embeds (B, N, C·p²) patches with a Linear; N its position count
    (m,) = build_hf("hf:molmo2_vision", "molmo2_vision", sdpa=False)
    assert m.info["input_layout"] == "patch-sequence"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    cfg = m.module.config
    assert x.shape == (2, cfg.num_position_embeddings, cfg.num_channels * cfg.patch_size ** 2)
    out = m.forward(x).out
    assert out.shape[:2] == x.shape[:2] and torch.isfinite(out).all()
