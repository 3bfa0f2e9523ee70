"""Model types that used to crash or falsely fail the audit: each is built from its own shrunk
config, with the class and inputs of its modality, and judged against the model's own declared
design (scale, windows, sinks, position ids).  The whole-zoo sweep is a bench
(``attncheck audit hf:all``); these are a handful of tiny types."""
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

pytest.importorskip("transformers")

import attncheck  # noqa: E402
from attncheck.audit.cli import audit_cmd  # noqa: E402
from attncheck.audit.sweep import classify, markdown_table, zoo_types  # noqa: E402


def _status(rep, name):
    return rep[name].status


def test_deepseek_v3_mla_scale_and_no_gqa_crash():
    rep = attncheck.audit("hf:deepseek_v3", checks="scale,gqa,causality")
    assert rep.ok, [(r.check, r.message) for r in rep.results if not r.ok]
    for v in ("eager", "sdpa"):
        s = rep[f"scale[{v}]"]
        assert s.status == "pass"
        # q·k width = nope 8 + rope 8 = 16: the module's scaling (1/√16 here, no yarn mscale)
        assert s.metrics["expected_scale"] == pytest.approx(0.25)
        assert rep[f"gqa[{v}]"].status == "skip"
        assert rep[f"causality[{v}]"].metrics["max_future_delta"] == 0.0


def test_gpt_oss_sinks_are_a_warning_with_the_reason():
    rep = attncheck.audit("hf:gpt_oss", checks="normalization,mask-pattern,causality")
    n = rep["normalization[eager]"]
    assert n.status == "warn" and "attention sinks" in n.message
    assert n.metrics["sinks"] == ["GptOssAttention"]
    assert 0 < n.metrics["max_row_sum_error"] < 1
    # the sink column is not a key: the maps are over the 12 positions, sliding then full
    layers = rep["mask-pattern[eager]"].metrics["layers"]
    assert [lay["observed"] for lay in layers] == ["sliding window 4", "causal"]
    assert rep.ok


def test_gpt_neo_unscaled_and_local_layers_by_design():
    rep = attncheck.audit("hf:gpt_neo", checks="scale,mask-pattern")
    s = rep["scale[eager]"]
    assert s.status == "warn" and "unscaled attention by the model's design" in s.message
    assert s.metrics["unscaled"] == 2
    layers = rep["mask-pattern[eager]"].metrics["layers"]
    assert [(lay["observed"], lay["expected"]) for lay in layers] == [
        ("causal", "causal"), ("sliding window 4", "sliding window 4")]


def test_moe_router_softmax_is_not_attention():
    rep = attncheck.audit("hf:olmoe", checks="mask-pattern,normalization")
    layers = rep["mask-pattern[eager]"].metrics["layers"]
    assert len(layers) == 2 and all(lay["shape"] == [12, 12] for lay in layers)
    assert rep.ok


def test_roberta_padding_uses_the_models_own_position_ids():
    rep = attncheck.audit("hf:roberta", checks="padding,backend-agreement")
    p = rep["padding[eager]"]
    assert p.status == "pass", p.message
    assert "left" in p.message  # left padding is checked, with positions padding_idx + 1 + i
    assert p.metrics["pad_id"] == 1


def test_clip_text_tower_causal_by_its_masks():
    rep = attncheck.audit("hf:CLIPTextModel", checks="causality,mask-pattern")
    c = rep["causality[sdpa]"]
    assert c.status == "pass" and "causal detected" in c.message
    assert c.metrics["max_future_delta"] == 0.0


def test_forward_default_is_decoder_false_overrides_the_config():
    # BlipTextModel.forward(is_decoder=False) builds a bidirectional mask although its config
    # says is_decoder=True: not declared causal, so its full dependency pattern is no leak
    rep = attncheck.audit("hf:blip_text_model", checks="causality")
    c = rep["causality[eager]"]
    assert c.status == "skip", c.message
    assert c.metrics["observed_pattern"] == "full"


def test_whisper_speech_seq2seq_decoder_audited():
    rep = attncheck.audit("hf:whisper", checks="causality,kv-cache,mask-pattern")
    assert rep.ok, [(r.check, r.message) for r in rep.results if not r.ok]
    assert rep.extra["model"]["encoder_input"] == "input_features"
    assert rep["kv-cache[eager]"].status == "pass"
    observed = {lay["observed"] for lay in rep["mask-pattern[eager]"].metrics["layers"]}
    assert observed == {"full", "causal"}


def test_unsupported_type_is_a_skip_with_the_reason():
    # a list where an int is required: the config class rejects every level
    rep = attncheck.audit("hf:llama", checks="causality", config={"num_attention_heads": [4, 4]})
    (b,) = rep.results
    assert b.check == "build" and b.status == "skip" and b.message.startswith("unsupported:")
    assert rep.extra["unsupported"]
    assert classify(rep)["outcome"] == "unsupported"


def test_float64_audit_header_and_strict_json():
    r = CliRunner().invoke(audit_cmd, ["hf:gpt2", "--dtype", "float64", "--checks", "kv-cache,normalization",
                                       "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["dtype"] == "float64"
    kv = next(x for x in doc["results"] if x["check"] == "kv-cache[eager]")
    assert kv["status"] == "pass" and kv["metrics"]["atol"] == 1e-10
    assert kv["metrics"]["prefill_1"]["max_abs_diff"] < 1e-10
    r = CliRunner().invoke(audit_cmd, ["hf:gpt2", "--dtype", "float64", "--checks", "normalization"])
    assert "float64" in r.output


def test_dtype_is_rejected_for_other_families():
    r = CliRunner().invoke(audit_cmd, ["torch:MultiheadAttention", "--dtype", "float16"])
    assert r.exit_code == 2 and "hf: specs only" in r.output


def test_zoo_type_globs_and_table():
    types = zoo_types(include=["qwen2*"], exclude=["*_vl*", "*audio*"])
    assert "qwen2" in types and "qwen2_moe" in types
    assert not any("_vl" in t or "audio" in t for t in types)
    doc = {"dtype": "float32", "jobs": 1, "seconds": 3.0,
           "counts": {"clean": 1, "finding": 1, "error": 1, "unsupported": 1, "no-attention": 1,
                      "timeout": 0, "crashed": 0},
           "types": [{"type": "a", "outcome": "clean", "seconds": 1.0},
                     {"type": "b", "outcome": "finding", "seconds": 1.0, "reason": "x | y"},
                     {"type": "c", "outcome": "unsupported", "seconds": 0.5, "reason": "r"},
                     {"type": "d", "outcome": "no-attention", "seconds": 0.5, "reason": "n"},
                     {"type": "e", "outcome": "error", "seconds": 60.0, "reason": "build: timed out"}]}
    md = markdown_table(doc, "attncheck audit hf:all")
    assert "| `b` | finding | 1.0 | x \\| y |" in md
    assert "Audited (clean + finding) 2 of 4 types" in md and "Clean (1): `a`" in md


@pytest.mark.slow
def test_hf_all_sweep_subprocess():
    """The sweep in a worker process, through the console script: JSON with one row per type."""
    p = subprocess.run([sys.executable, "-m", "attncheck", "audit", "hf:all", "--include", "gpt2",
                        "--include", "mamba", "--format", "json", "--jobs", "1",
                        "--checks", "causality,normalization"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert [r["type"] for r in doc["types"]] == ["gpt2", "mamba"]
    assert [r["outcome"] for r in doc["types"]] == ["clean", "no-attention"]
    assert doc["counts"]["clean"] == 1 and doc["kind"] == "audit-sweep"


@pytest.mark.slow
def test_hf_all_passes_its_timeout_to_each_build_and_check():
    """``--timeout`` bounds every model build and check of the sweep, as it does for one audit:
    a limit no build can meet makes the type an error row that names the limit."""
    p = subprocess.run([sys.executable, "-m", "attncheck", "audit", "hf:all", "--include", "gpt2",
                        "--format", "json", "--jobs", "1", "--checks", "causality", "--timeout", "0.01"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stderr[-2000:]
    (row,) = json.loads(p.stdout)["types"]
    assert row["outcome"] == "error" and "timed out after 0.01 s" in row["reason"]
