"""Runner: correct fixtures pass every applicable check; bad targets give fail/error results with
the reason while the other checks still run; time limits; eval vs train mode."""
import math
import time

import pytest
import torch
import torch.nn.functional as F

import attncheck
from attncheck.dynamic.runner import resolve_device, resolve_dtype

from _dynamic_helpers import load

sdpa_k = load("dynamic/sdpa_kernels.py")
nano = load("dynamic/nanogpt_layer.py")
buggy = load("dynamic/buggy_modules.py")
textbook = load("lint/correct/textbook_mha.py")

FAST = dict(max_examples=3, device="cpu")


def _ok(report):
    bad = [(r.check, r.status, r.message) for r in report.results if not r.ok]
    assert not bad, bad
    return report


# the default suite on correct targets (sdpa, sdpa_causal, nn.MultiheadAttention batch-first and
# sequence-first causal, nanoGPT, the textbook layer) is in test_dynamic_correct_sweep.py


def test_textbook_mha_eval_passes_train_explains_dropout():
    m = textbook.MultiHeadAttention()          # d_model 512, 8 heads, dropout 0.1 on weights
    ev = attncheck.check(m, checks=["normalization", "gradient-flow"], **FAST)
    _ok(ev)
    msg = ev["normalization"].message
    assert "eval mode" in msg and "dropout off" in msg
    assert ev.extra["mode"] == "eval"
    tr = attncheck.check(m, checks=["normalization"], train=True, **FAST)
    r = tr["normalization"]
    assert r.status == "warn"
    assert "do not sum to 1" in r.message and "dropout" in r.message and "1/(1-p)" in r.message
    assert r.metrics["dropout"] == [["dropout", 0.1]]
    assert m.training  # the module's own flag was restored (constructed in train mode)


@pytest.mark.parametrize("cls,check,status,needle", [
    (buggy.NaNAttention, "finite", "fail", "non-finite output"),
    (buggy.RaisingAttention, "shapes", "error", "boom"),
    (buggy.WrongShapeAttention, "shapes", "fail", "output shape"),
    (buggy.WrongTypeAttention, "shapes", "fail", "expected a tensor"),
    (buggy.DropoutInEvalAttention, "determinism", "fail", "differ"),
])
def test_buggy_modules_fail_with_reason(cls, check, status, needle):
    report = attncheck.check(cls(), checks=["shapes", "finite", "determinism"], **FAST)
    r = report[check]
    assert r.status == status, (r.status, r.message)
    assert needle in r.message
    assert len(report.results) == 3          # the other checks still ran


def _scales_q_in_place(q, k, v):
    q.mul_(2.0)                               # writes into the caller's tensor
    return F.scaled_dot_product_attention(q, k, v)


class _DriftingWeights(torch.nn.Module):
    """Each forward nudges its own projection weight in place."""

    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        with torch.no_grad():
            self.mha.in_proj_weight.add_(0.01)
        return self.mha(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("obj,written", [
    (_scales_q_in_place, "input q"),
    (_DriftingWeights(), "parameter mha.in_proj_weight"),
])
def test_determinism_names_in_place_writes_not_randomness(obj, written):
    r = attncheck.check(obj, checks=["determinism"], **FAST)["determinism"]
    assert r.status == "fail"
    assert f"writes in place into {written}" in r.message and "dropout" not in r.message
    assert r.metrics["max_abs_diff"] > 0


class _CountingDropout(torch.nn.Module):
    """Dropout left on at inference, and a call counter kept in a buffer."""

    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls += 1
        return F.dropout(self.mha(x, x, x, need_weights=False)[0], 0.5, training=True)


def test_determinism_names_a_written_buffer_next_to_randomness():
    r = attncheck.check(_CountingDropout(), checks=["determinism"], **FAST)["determinism"]
    assert r.status == "fail"
    assert "writes in place into buffer calls" in r.message and "dropout not gated" in r.message


def test_determinism_still_blames_randomness_without_in_place_writes():
    r = attncheck.check(buggy.DropoutInEvalAttention(), checks=["determinism"],
                        **FAST)["determinism"]
    assert r.status == "fail" and "dropout not gated" in r.message
    assert "in place" not in r.message


def test_failure_reports_smallest_example_and_reproduction():
    r = attncheck.check(buggy.WrongShapeAttention(), checks=["shapes"], **FAST)["shapes"]
    ex = r.metrics["example"]
    assert ex["B"] == 1 and ex["L_q"] == 1          # shrunk / edge case first
    assert "reproduce:" in r.details and "seed" in r.details


def test_hanging_target_times_out_and_other_checks_run():
    t0 = time.monotonic()
    report = attncheck.check(buggy.HangingAttention(), checks=["shapes", "determinism"],
                             timeout=0.5, **FAST)
    assert time.monotonic() - t0 < 20
    for r in report.results:
        assert r.status == "error" and "timed out after 0.5 s" in r.message


def test_thread_timeout_fallback_off_main_thread():
    import threading

    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", attncheck.check(
        buggy.HangingAttention(), checks=["shapes"], timeout=0.5, **FAST)))
    th.start()
    th.join(30)
    assert box["r"]["shapes"].status == "error" and "timed out" in box["r"]["shapes"].message


class _Saturated(torch.nn.Module):
    """Self-attention with logits multiplied by 1e4: softmax saturates, q/k grads ~0."""

    def __init__(self, E=16):
        super().__init__()
        self.q = torch.nn.Linear(E, E)
        self.k = torch.nn.Linear(E, E)
        self.v = torch.nn.Linear(E, E)

    def forward(self, x):
        s = self.q(x) @ self.k(x).transpose(-2, -1) * 1e4
        return s.softmax(-1) @ self.v(x)


def test_gradient_flow_judges_relative_magnitude():
    torch.manual_seed(0)
    r = attncheck.check(_Saturated(), checks=["gradient-flow"], **FAST)["gradient-flow"]
    # saturated: the q/k gradients are (near) zero although not None; which q/k parameter the
    # message names first depends on the initialisation
    assert r.status == "fail" and ("vanishes" in r.message or "exactly zero" in r.message)
    assert any(f"{p}.{w}" in r.message for p in "qk" for w in ("weight", "bias"))
    assert "v.weight" not in r.message


def test_gradient_flow_flags_unused_parameter():
    m = nano.make_causal_layer()
    m.unused = torch.nn.Linear(2, 2)
    r = attncheck.check(m, checks=["gradient-flow"], **FAST)["gradient-flow"]
    assert r.status == "fail" and "unused" in r.message and "no gradient" in r.message


def test_normalization_catches_wrong_dim_and_mask_leak():
    def wrong_dim(q, k, v):
        return (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-2) @ v

    def leaky_mask(q, k, v, attn_mask=None):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if attn_mask is not None:
            s = s.masked_fill(~attn_mask, -5.0)          # not -inf: masked keys keep weight
        return s.softmax(-1) @ v

    r = attncheck.check(wrong_dim, checks=["normalization"], **FAST)["normalization"]
    assert r.status == "fail" and "sum to 1" in r.message
    r = attncheck.check(leaky_mask, checks=["normalization"], **FAST)["normalization"]
    assert r.status == "fail" and "masked keys" in r.message


def test_normalization_not_observable_is_skip_not_pass():
    class Opaque(torch.nn.Module):
        def forward(self, x):  # no softmax, no weights: attention-free mixing
            return x.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(1, -1, 1)

    r = attncheck.check(Opaque(), checks=["normalization"], embed_dim=8, **FAST)["normalization"]
    assert r.status == "skip" and "not observable" in r.message


def test_device_and_dtype_resolution():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("bf16") is torch.bfloat16 and resolve_dtype(None) is torch.float32
    with pytest.raises(ValueError):
        resolve_dtype("int8")
    with pytest.raises(ValueError):
        attncheck.check(sdpa_k.sdpa, checks=["no-such-check"])


def test_report_json_schema():
    rep = attncheck.check(sdpa_k.sdpa, checks=["shapes", "determinism"], **FAST).to_dict()
    assert rep["version"] == 1 and rep["target"] == "sdpa"
    assert [r["check"] for r in rep["results"]] == ["shapes", "determinism"]
    for r in rep["results"]:
        assert set(r) >= {"check", "status", "message", "metrics"}
        assert r["status"] in {"pass", "fail", "warn", "skip", "error"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_auto_device_is_cuda_and_fixtures_pass_there():
    rep = attncheck.check(nano.make_causal_target(), max_examples=3)
    assert rep.device.startswith("cuda")
    _ok(rep)
    rep16 = attncheck.check(F.scaled_dot_product_attention, dtype="float16", causal=True,
                            checks=["shapes", "finite", "normalization"], max_examples=3)
    _ok(rep16)


def _nan_kernel(q, k, v):
    return torch.full_like(q, float("nan"))


def test_all_nan_output_never_passes_a_comparison_check():
    """Regression: NaN == NaN comparisons made determinism & co. report 'pass' on a NaN kernel."""
    import attncheck

    rep = attncheck.check(_nan_kernel, checks=["finite", "determinism", "batch-independence",
                                               "permutation-equivariance"],
                          device="cpu", max_examples=2)
    status = {r.check: r.status for r in rep.results}
    assert status == {"finite": "fail", "determinism": "skip", "batch-independence": "skip",
                      "permutation-equivariance": "skip"}
    assert rep["determinism"].metrics["output_finite"] is False
    assert "NaN/inf for finite inputs" in rep["determinism"].message
