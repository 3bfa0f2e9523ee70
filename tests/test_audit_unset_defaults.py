"""Default configs that cannot build their own model (fields the model reads left unset, a
sub-config other than the one the class declares, a backbone returning one stage to a neck that
takes all) and the documented rules that repair them; classes transformers registers but does
not export.  Config-level checks, plus a few tiny builds."""
import pytest
import torch

pytest.importorskip("transformers")

import transformers as tf  # noqa: E402

from attncheck.audit.hf import build_hf, choose_class  # noqa: E402
from attncheck.audit.shrink import (HEAD_DIM, HEADS, POSITIONS, UNSET_SIZE, declared_sub_configs,  # noqa: E402
                                    example_arguments, fill_all_backbone_stages, fill_unset_documented,
                                    fill_unset_sizes, shrink_config, tie_stage_channels)


def test_unset_fields_take_the_value_the_config_docstring_documents():
    cfg = tf.AutoConfig.for_model("granite4_vision")
    assert cfg.downsample_rate is None and cfg.deepstack_layer_map is None
    assert fill_unset_documented(cfg, {"downsample_rate": None}) == ["Granite4VisionConfig.deepstack_layer_map = []"]
    assert cfg.downsample_rate is None  # an override stays
    assert fill_unset_documented(cfg) == ['Granite4VisionConfig.downsample_rate = "1/4"']  # 'e.g. `"1/4"` or `"3/8"`'
    assert fill_unset_documented(cfg) == []


def test_docstring_example_arguments_name_the_class_own_fields():
    # ">>> configuration = TimmBackboneConfig("resnet50")": the positional argument is the first
    # field TimmBackboneConfig declares (transformers' configs take keywords only)
    assert example_arguments(tf.TimmBackboneConfig) == {"backbone": "resnet50"}
    assert example_arguments(tf.LlamaConfig) == {}  # "LlamaConfig()": nothing passed
    cfg = tf.TimmBackboneConfig()
    assert fill_unset_documented(cfg)[0].startswith("TimmBackboneConfig.backbone = 'resnet50'")
    assert cfg.backbone == "resnet50"


def test_unset_sizes_of_an_optional_module_are_filled_as_a_group_the_validators_accept():
    # Qwen4-Exp's defaults declare "indexed_attention" layers but leave every indexer size None
    cfg = shrink_config(tf.AutoConfig.for_model("qwen4_exp_text"), 0)
    assert "indexed_attention" in cfg.layer_types and cfg.indexer_budget is None
    assert fill_unset_sizes(cfg, {"indexer_budget": None}) == []  # a group with an override is left alone
    done = fill_unset_sizes(cfg)
    assert {d.split(" = ")[0].split(".")[1] for d in done} == {
        "indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio"}
    assert (cfg.indexer_n_heads, cfg.indexer_kv_heads, cfg.indexer_head_dim) == (HEADS, 1, HEAD_DIM)
    # the budget keeps every position the tiny model holds: the selection is the dense causal map
    assert (cfg.indexer_budget, cfg.indexer_compress_ratio) == (POSITIONS, UNSET_SIZE)
    cfg.validate()  # the class's own validators (one key head, budget divisible by the block length)
    assert fill_unset_sizes(cfg) == []


def test_backbone_returns_every_stage_and_the_neck_widths_follow_it():
    uv = tf.AutoConfig.for_model("uvdoc")
    assert uv.backbone_config.out_features == [uv.backbone_config.stage_names[-1]]
    assert fill_all_backbone_stages(uv, {"out_features": None}) == []
    assert fill_all_backbone_stages(uv) and uv.backbone_config.out_features == uv.backbone_config.stage_names[1:]
    assert fill_all_backbone_stages(uv) == []
    # PP-OCRv6-small-det declares a PP-LCNetV3 backbone of four returned stages; its
    # __post_init__ builds a PP-LCNetV4 one when none is given
    small = tf.AutoConfig.for_model("pp_ocrv6_small_det")
    assert small.backbone_config.model_type == "pp_lcnet_v4"
    declared, changes = declared_sub_configs(small)
    assert declared.backbone_config.model_type == "pp_lcnet_v3" and len(changes) == 1
    assert declared.backbone_config.out_features == ["stage2", "stage3", "stage4", "stage5"]
    assert declared_sub_configs(declared) == (declared, [])
    assert fill_all_backbone_stages(declared) == []  # four returned stages: left alone
    assert tie_stage_channels(declared, [8, 16, 32, 64]) == [
        "PPOCRV6SmallDetConfig.layer_list_out_channels = [8, 16, 32, 64]"]
    assert list(declared.layer_list_out_channels) == [8, 16, 32, 64]
    assert tie_stage_channels(declared, [8, 16, 32]) == []  # another stage count: not this list


@pytest.mark.slow  # two conv models built and run: ~20 s each on 2 loaded cores
@pytest.mark.parametrize("model_type", ["uvdoc", "pp_ocrv6_small_det"])
def test_convolutional_model_with_an_inconsistent_default_runs_once_repaired(model_type):
    (m,) = build_hf(f"hf:{model_type}", model_type, sdpa=False)
    assert "filled" in m.info
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(m.forward(x).out).all()


def test_registered_class_missing_from_the_package_exports_is_found_in_its_modeling_module():
    cfg = tf.AutoConfig.for_model("voxtral_realtime_text")
    assert not hasattr(tf, "VoxtralRealtimeTextModel")
    kind, cls = choose_class("voxtral_realtime_text", cfg)
    assert cls.__name__ == "VoxtralRealtimeTextModel"
