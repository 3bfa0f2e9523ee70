"""Repairs of tiny configs whose defaults disagree with their own model code, and input layouts
read from the forward's source and docstring (attncheck.audit.shrink / attncheck.audit.hf)."""
import pytest
import torch

tf = pytest.importorskip("transformers")

from attncheck.audit.checks import passed_mask_allowed  # noqa: E402
from attncheck.audit.hf import (_counted_dim, _documented_row, flattened_prompt_inputs,  # noqa: E402
                                unpacked_input_dims)
from attncheck.audit.shrink import (FFN, documented_list_entries, fill_fed_width,  # noqa: E402
                                    keep_widths_distinct, shrink_config)


def test_linear_fed_another_width_takes_the_width_that_reaches_it():
    # Llama 4's vision defaults: 768-wide patches, pixel-shuffled by 0.5 → 4 × width channels,
    # read by a projector sized by intermediate_size
    config = shrink_config(tf.Llama4VisionConfig(), 0)
    ffn, width = config.intermediate_size, config.hidden_size
    fed = 4 * width
    exc = RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (8x{fed} and {ffn}x{width})")
    done = fill_fed_width(config, exc)
    assert config.intermediate_size == fed
    assert done == [f"Llama4VisionConfig.intermediate_size: {ffn} → {fed}"]
    assert config.hidden_size == width  # only the one field


def test_concatenated_widths_repair_the_list_entry_that_holds_one_of_them():
    # DeepSeek-OCR 2: the SAM neck's last channel count is concatenated with the encoder's queries
    config = shrink_config(tf.DeepseekOcr2VisionConfig(), 0)
    neck = config.sam_config.downsample_channels[-1]
    width = config.encoder_config.hidden_size
    assert neck != width
    exc = RuntimeError("Sizes of tensors must match except in dimension 1. "
                       f"Expected size {neck} but got size {width} for tensor number 1 in the list.")
    assert fill_fed_width(config, exc) == [f"DeepseekOcr2SamVisionConfig.downsample_channels[1]: {neck} → {width}"]
    assert list(config.sam_config.downsample_channels)[-1] == width


def test_width_repair_needs_one_field_and_a_width_error():
    config = shrink_config(tf.Llama4VisionConfig(), 0)
    before = config.to_dict()
    # 64 is held by several fields, 3 by none of the sized ones: nothing is guessed
    exc = RuntimeError("mat1 and mat2 shapes cannot be multiplied (8x3 and 64x64)")
    assert fill_fed_width(config, exc) == []
    assert fill_fed_width(config, ValueError("mat1 and mat2 shapes cannot be multiplied (8x3 and 64x64)")) == []
    assert fill_fed_width(config, None) == []
    assert config.to_dict() == before


def test_widths_the_shrink_made_equal_are_kept_apart_in_their_original_ratio():
    # OmDet-Turbo builds task_project only when class_embed_dim != decoder_hidden_dim
    default = tf.OmDetTurboConfig()
    config = shrink_config(default, 0)
    assert config.class_embed_dim == config.decoder_hidden_dim
    done = keep_widths_distinct(default, config)
    ratio = default.class_embed_dim // default.decoder_hidden_dim
    assert config.class_embed_dim == ratio * config.decoder_hidden_dim
    # sizes equal in the original stay equal (the text tower's width feeds the class embedding)
    assert config.text_config.hidden_size == config.class_embed_dim == config.text_projection_in_dim
    assert any(d.startswith("OmDetTurboConfig.class_embed_dim") for d in done)
    assert keep_widths_distinct(default, shrink_config(tf.LlamaConfig(), 0)) == []  # not this tree


def test_timm_backbone_image_side_follows_the_shrunk_image():
    config = shrink_config(tf.OmDetTurboConfig(), 0)
    assert config.backbone_config.img_size == config.image_size < 640
    assert config.timm_kwargs["img_size"] == config.image_size


def test_empty_list_gets_one_documented_supported_value():
    assert documented_list_entries(tf.LwDetrConfig()) == {"projector_scale_factors": [1.0]}
    assert documented_list_entries(tf.LwDetrConfig(projector_scale_factors=[0.5, 2.0])) == {}
    assert documented_list_entries(tf.LlamaConfig()) == {}


class _Tiles(torch.nn.Module):
    def forward(self, pixel_values, aspect_ratio_ids, aspect_ratio_mask):
        r"""
        aspect_ratio_ids (`torch.Tensor` of shape `(batch_size, max_num_images)`):
            Ids.
        aspect_ratio_mask (`torch.Tensor` of shape `(batch_size, max_num_images, max_num_tiles)`):
            Mask.
        """
        batch_size, num_concurrent_media, num_tiles, num_channels, height, width = pixel_values.shape
        return pixel_values


def test_tiled_image_dims_from_the_forward_and_the_config():
    cfg = tf.PretrainedConfig(max_num_tiles=4)
    dims = unpacked_input_dims(_Tiles(), "pixel_values")
    assert dims == ["batch_size", "num_concurrent_media", "num_tiles", "num_channels", "height", "width"]
    assert [_counted_dim(d, cfg) for d in dims[1:3]] == [1, 4]
    assert _counted_dim("max_num_images", cfg) == 1
    assert _counted_dim("num_queries", cfg) is None
    assert unpacked_input_dims(_Tiles(), "aspect_ratio_ids") is None


class _Prompted(torch.nn.Module):
    def forward(self, pixel_values, classes_input_ids, classes_attention_mask, tasks_input_ids,
                tasks_attention_mask, classes_structure, patches=None):
        r"""
        classes_input_ids (`torch.LongTensor` of shape `(total_classes (>= batch_size), sequence_length)`):
            Flattened class names.
        tasks_input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
            Tasks.
        classes_structure (torch.LongTensor of shape `(batch_size)`):
            Classes per task.
        patches (`torch.Tensor` of shape `(num_image_tokens, patch_size * merge, patch_size * merge, 3)`):
            Blocks.
        """


def test_flattened_prompt_gets_its_mask_and_one_item_per_sample():
    ids = torch.randint(4, 100, (1, 7))
    got = flattened_prompt_inputs(_Prompted(), {"classes_input_ids": ids, "tasks_input_ids": ids})
    assert set(got) == {"classes_attention_mask", "classes_structure"}  # the tasks are per sample
    assert torch.equal(got["classes_attention_mask"], torch.ones(1, 7, dtype=torch.long))
    assert torch.equal(got["classes_structure"], torch.ones(1, dtype=torch.long))


def test_documented_row_is_a_product_of_config_fields():
    cfg = tf.PretrainedConfig(patch_size=5, merge=2)
    assert _documented_row(_Prompted(), "patches", cfg) == (10, 10, 3)
    assert _documented_row(_Prompted(), "patches", tf.PretrainedConfig(patch_size=5)) is None
    assert _documented_row(_Prompted(), "tasks_input_ids", cfg) is None  # rows per sample, not flattened


class _WindowAttention(torch.nn.Module):
    def forward(self, x, mask=None):
        return x


def test_additive_window_mask_argument_is_the_mask_given():
    # Swin's shifted-window mask (Liu et al. 2021): 0 visible, -100 hidden, one (N, N) per window
    shifted = torch.zeros(2, 4, 4)
    shifted[1, :2, 2:] = shifted[1, 2:, :2] = -100.0
    allowed = passed_mask_allowed(_WindowAttention(), (torch.zeros(2, 4, 8),), {"mask": shifted[1:]})
    expected = torch.ones(4, 4, dtype=torch.bool)
    expected[:2, 2:] = expected[2:, :2] = False
    assert torch.equal(allowed, expected)
    # the union over windows: the unshifted window sees everything
    assert bool(passed_mask_allowed(_WindowAttention(), (), {"mask": shifted}).all())
    assert passed_mask_allowed(_WindowAttention(), (), {}) is None


@pytest.mark.slow
def test_tiled_vision_tower_runs_on_tiles_of_the_configs_count():
    from attncheck.audit.hf import build_hf

    m = build_hf("hf:mllama_vision_model", "mllama_vision_model", sdpa=False)[0]
    assert m.info["input_layout"] == "image-tiles"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert tuple(x.shape[:3]) == (2, 1, m.module.config.max_num_tiles) and x.dim() == 6


@pytest.mark.slow
def test_sub_config_image_tower_the_parent_calls_only_with_an_image_is_run_on_images():
    from attncheck.audit.hf import build_hf

    m = build_hf("hf:pp_chart2table_vision", "pp_chart2table_vision", sdpa=False)[0]
    assert m.info["class"] == "GotOcr2VisionEncoder" and m.info["parent"] == "GotOcr2ForConditionalGeneration"
    assert type(m.module.config).__name__ == "PPChart2TableVisionConfig"
    assert m.make_inputs(1, generator=torch.Generator().manual_seed(0)).dim() == 4


def test_width_repair_is_reported_and_lets_the_tower_run():
    from attncheck.audit.hf import build_hf

    m = build_hf("hf:llama4_vision_model", "llama4_vision_model", sdpa=False)[0]
    cfg = m.module.config
    assert cfg.intermediate_size == 4 * cfg.hidden_size  # pixel shuffle by 0.5: 4 × the channels
    assert m.info["filled"] == f"Llama4VisionConfig.intermediate_size: {FFN} → {cfg.intermediate_size}"
