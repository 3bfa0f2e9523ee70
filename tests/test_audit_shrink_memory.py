"""The shrinker on trackers with a memory narrower than their hidden width (SAM 2 / SAM 3 video:
``memory_encoder_output_channels = 64`` beside ``hidden_size = 256``), on configs whose image side
is a settable property, and on timm backbones whose stages are already narrow."""
import pytest

tf = pytest.importorskip("transformers")

from attncheck.audit.hf import image_shape  # noqa: E402
from attncheck.audit.shrink import HIDDEN, narrower_dims, shrink_config, timm_model_args  # noqa: E402


def test_memory_channels_stay_below_the_hidden_width_in_the_wider_shrink():
    default = tf.AutoConfig.for_model("sam3_tracker_video")
    assert narrower_dims(default) == ["Sam3TrackerVideoConfig.memory_encoder_output_channels = 64"]
    tiny = shrink_config(default, 0)
    # at the tiny width the memory channels equal the hidden width: the order the model relies on is lost
    assert tiny.memory_encoder_output_channels == tiny.mask_decoder_config.hidden_size == HIDDEN
    wide = shrink_config(default, 0, width=2 * HIDDEN)
    assert wide.memory_encoder_output_channels == 64 < wide.mask_decoder_config.hidden_size == 2 * HIDDEN
    assert wide.memory_attention_hidden_size == 2 * HIDDEN < default.memory_attention_hidden_size


def test_a_config_without_a_narrower_dimension_gets_no_wider_shrink():
    assert narrower_dims(tf.AutoConfig.for_model("bert")) == []


def test_image_side_set_through_a_property_is_shrunk_and_propagated():
    # Sam3TrackerVideoConfig.image_size is a property whose setter writes the sub-configs; its
    # constructor sets it from its keyword (default 1008), so the shrunk side must be passed back
    default = tf.AutoConfig.for_model("sam3_tracker_video")
    tiny = shrink_config(default, 0)
    side = tiny.image_size
    assert side < default.image_size
    assert tiny.vision_config.image_size == tiny.prompt_encoder_config.image_size == side
    patch = tiny.vision_config.backbone_config.patch_size
    assert tiny.memory_attention_rope_feat_sizes == [side // patch, side // patch]
    assert image_shape(tiny) == (3, side, side)


def test_image_side_comes_from_a_sibling_config_when_the_tower_declares_none():
    default = tf.AutoConfig.for_model("edgetam")
    assert getattr(default.vision_config, "image_size", None) is None
    tiny = shrink_config(default, 0)
    side = tiny.prompt_encoder_config.image_size
    assert side < default.prompt_encoder_config.image_size
    assert image_shape(tiny) == (3, side, side)


def test_timm_stage_widths_below_the_tiny_width_are_not_grown():
    pytest.importorskip("timm")
    args = timm_model_args("repvit_m1", {"features_only": True}, 0)
    # RepViT-M1's stages (48, 96, 192, 384): scaled to start at the tiny width they would no
    # longer match the channels a neck declares for them
    assert tuple(args.get("embed_dim", (48, 96, 192, 384))) == (48, 96, 192, 384)
