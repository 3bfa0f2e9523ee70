"""Every built-in family audits offline on CPU with no false failure, and the numbers behind the
family-specific checks (sliding window, GQA, T5's scale, encoder patterns) are the declared ones."""
import pytest
import torch

import attncheck
from attncheck.audit.families import FamilyUnavailable, build, timm_unavailable_reason

DYNAMIC = ("causality,padding,batch-independence,kv-cache,backend-agreement,normalization,saturation,"
           "scale,mask-pattern,gqa")
_CACHE: dict[str, object] = {}


def _audit(spec):
    if spec not in _CACHE:
        _CACHE[spec] = attncheck.audit(spec, checks=DYNAMIC)
    return _CACHE[spec]


def _assert_clean(rep):
    bad = [(r.check, r.status, r.message) for r in rep.results if r.status in ("fail", "error")]
    assert not bad, bad
    assert rep.ok


HF = ["hf:gpt2", "hf:llama", "hf:bert", "hf:mistral", "hf:qwen2", "hf:t5", "hf:vit"]
OTHERS = ["xt:decoder", "xt:encoder", "torch:MultiheadAttention", "torch:TransformerEncoderLayer"]


@pytest.mark.parametrize("spec", HF)
def test_hf_family_clean_on_both_backends(spec):
    pytest.importorskip("transformers")
    rep = _audit(spec)
    _assert_clean(rep)
    assert rep.extra["variants"] == ["eager", "sdpa"]
    assert rep["backend-agreement"].status == "pass"
    for v in ("eager", "sdpa"):
        assert rep[f"normalization[{v}]"].status == "pass"
        assert rep[f"normalization[{v}]"].metrics["max_row_sum_error"] < 1e-5
        assert rep[f"scale[{v}]"].status == "pass"
        assert rep[f"mask-pattern[{v}]"].status == "pass"
    kind = rep.extra["model"]["kind"]
    if kind in ("decoder", "seq2seq"):
        for v in ("eager", "sdpa"):
            c = rep[f"causality[{v}]"]
            assert c.status == "pass"
            assert c.metrics["max_future_delta"] == 0.0  # exact: correct models are bit-identical
            assert {"no-mask", "mask-ones", "left-pad"} <= set(c.metrics["paths"])
            assert rep[f"kv-cache[{v}]"].status == "pass"
        assert "output_attentions" in rep["causality[eager]"].metrics["paths"]
    else:
        assert rep["causality[eager]"].status == "skip"
        layers = rep["mask-pattern[eager]"].metrics["layers"]
        assert {lay["observed"] for lay in layers} == {"full"}


def test_mistral_sliding_window_observed():
    pytest.importorskip("transformers")
    rep = _audit("hf:mistral")
    for v in ("eager", "sdpa"):
        layers = rep[f"mask-pattern[{v}]"].metrics["layers"]
        assert [lay["observed"] for lay in layers] == ["sliding window 4"] * 2


def test_qwen2_gqa_grouping():
    pytest.importorskip("transformers")
    # Qwen2's default config is MHA (32 KV heads of 32), and the shrinker keeps it MHA: ask for GQA
    rep = attncheck.audit("hf:qwen2", checks="gqa", config={"num_key_value_heads": 2})
    g = rep["gqa[sdpa]"]
    assert g.status == "pass"
    assert g.metrics["num_kv_heads"] == 2 and g.metrics["group_size"] == 2
    assert all(lay["kv_heads"] == 2 for lay in g.metrics["layers"])
    assert rep["gqa[eager]"].status == "skip"  # K not captured for a hand-written softmax


def test_mistral_gqa_repeated_kv_layout():
    pytest.importorskip("transformers")
    g = _audit("hf:mistral")["gqa[sdpa]"]
    assert g.status == "pass"
    for lay in g.metrics["layers"]:
        # Mistral repeats K/V itself before SDPA: the layout must be repeat_interleave
        assert lay.get("layout", [0, 0, 2, 2]) == [0, 0, 2, 2]


def test_t5_scale_is_one_and_decoder_causal():
    pytest.importorskip("transformers")
    rep = _audit("hf:t5")
    s = rep["scale[eager]"]
    assert s.status == "pass"
    assert s.metrics["expected_scale"] == 1.0  # T5Attention declares scaling = 1.0 (folded into init)
    assert {lay["expected_from"] for lay in s.metrics["layers"]} == {"T5Attention declares its scale"}
    patterns = {(tuple(lay["shape"]), lay["observed"]) for lay in rep["mask-pattern[sdpa]"].metrics["layers"]}
    assert patterns == {((7, 7), "full"), ((12, 7), "full"), ((12, 12), "causal")}


@pytest.mark.parametrize("spec", OTHERS)
def test_other_families_clean(spec):
    if spec.startswith("xt:"):
        pytest.importorskip("x_transformers")
    rep = _audit(spec)
    _assert_clean(rep)
    assert len(rep.extra["variants"]) == 2
    assert rep["backend-agreement"].status == "pass"
    v0 = rep.extra["variants"][0]
    if spec != "xt:encoder":
        assert rep[f"causality[{v0}]"].status == "pass"
        assert rep[f"mask-pattern[{v0}]"].metrics["layers"][0]["observed"] == "causal"
    assert rep[f"scale[{v0}]"].status == "pass"


def test_timm_optional():
    reason = timm_unavailable_reason()
    rep = attncheck.audit("timm:vit_tiny_patch16_224", checks="normalization")
    if reason is None:  # pragma: no cover - timm is not installed in CI
        assert rep.ok
        return
    assert [r.status for r in rep.results] == ["skip"]
    assert rep.results[0].message == f"skipped: timm unavailable ({reason}); pip install timm"
    assert rep.ok  # never a failure
    with pytest.raises(FamilyUnavailable):
        build("timm:vit_tiny_patch16_224")


def test_audit_restores_module_state():
    from attncheck.dynamic.state import module_state, module_state_equal

    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(16, 2, batch_first=True)
    before = module_state(m)
    rng = torch.get_rng_state()
    threads = torch.get_num_threads()
    rep = attncheck.audit(m, checks="causality,padding,normalization")
    assert module_state_equal(before, module_state(m))
    assert torch.equal(rng, torch.get_rng_state())
    assert torch.get_num_threads() == threads
    assert rep["normalization[need_weights=True]"].status == "pass"


def test_hf_source_files_found_and_linted_clean():
    pytest.importorskip("transformers")
    import os

    from attncheck.audit.runner import run_lint, source_files

    models = build("hf:gpt2")
    files = source_files([o for m in models for o in m.source_objects])
    names = {os.path.basename(f) for f in files}
    assert {"modeling_gpt2.py", "sdpa_attention.py", "masking_utils.py"} <= names
    assert not any(os.sep + "torch" + os.sep in f for f in files)
    modeling = [f for f in files if f.endswith("modeling_gpt2.py")]
    res, section = run_lint(modeling)
    assert res.status == "pass", section["findings"]  # no false failure on GPT-2's own source
    assert section["files"] == modeling


def test_hf_config_override_per_layer_sliding_window():
    """Qwen2 with sliding attention on layer 1 only (layer_types): each layer is judged against
    its own declared type."""
    pytest.importorskip("transformers")
    rep = attncheck.audit("hf:qwen2", checks="mask-pattern,causality,kv-cache",
                          config={"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1})
    assert rep.extra["model"]["layer_types"] == ["full_attention", "sliding_attention"]
    for v in ("eager", "sdpa"):
        layers = rep[f"mask-pattern[{v}]"].metrics["layers"]
        assert [(lay["observed"], lay["expected"]) for lay in layers] == [
            ("causal", "causal"), ("sliding window 4", "sliding window 4")]
        assert rep[f"causality[{v}]"].status == "pass"
        assert rep[f"kv-cache[{v}]"].status == "pass"
    with pytest.raises(ValueError):
        attncheck.audit("xt:decoder", config={"x": 1})


def test_preload_imports_the_model_code_before_the_timed_build():
    import sys

    pytest.importorskip("transformers")
    from attncheck.audit import families as F

    F.preload("hf:bert")
    assert "transformers.models.bert.modeling_bert" in sys.modules
    # best effort: specs it cannot resolve are left for build() to report
    F.preload("hf:not_a_model_type")
    F.preload("torch:mha")
