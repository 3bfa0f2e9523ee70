"""Mask convention: detected empirically once per target when no ``mask_convention`` hint is
given (``attncheck.dynamic.maskconv``); never a false failure when it cannot be determined."""
import pytest
from torch import nn

import attncheck
from attncheck.dynamic.maskconv import detect_mask_convention

from _dynamic_helpers import load

hf = load("lint/correct/hf_eager_attention.py")
textbook = load("lint/correct/textbook_mha.py")
FAST = {"device": "cpu", "max_examples": 3}


class PadBlockedLayer(nn.Module):
    """Self-attention whose mask is a bool ``(B, L_q, L_k)`` tensor, True = blocked, under the
    non-standard name ``pad``."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, pad=None):
        B, L, E = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        if pad is not None:
            s = s.masked_fill(pad[:, None], float("-inf"))
        w = s.softmax(-1)
        return (w @ v).transpose(1, 2).reshape(B, L, E), w


class IgnoresMask(PadBlockedLayer):
    """Takes ``attention_mask`` but uses it for nothing (e.g. a mask meant for something else)."""

    def forward(self, x, attention_mask=None):
        return super().forward(x, None)


class LeakyMask(PadBlockedLayer):
    """Keep-convention mask filled with -5 instead of -inf: masked keys keep some weight."""

    def forward(self, x, mask=None):
        B, L, E = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, -5.0)
        w = s.softmax(-1)
        return (w @ v).transpose(1, 2).reshape(B, L, E), w


def detect(obj, **hints):
    t = attncheck.target(obj, **hints)
    return t, detect_mask_convention(t)


def test_hf_additive_layer_no_false_failure():
    """The issue's case: HF-style ``attention_mask`` (additive float, holds the causal part)."""
    r = attncheck.check(hf.LlamaStyleAttention(), checks=["normalization"], **FAST)
    n = r["normalization"]
    assert n.status == "pass", n.message
    assert n.metrics["mask_convention"] == "additive"
    assert n.metrics["mask_convention_source"] == "detected"
    assert n.metrics["masked_keys_tested"] is True
    assert "additive (detected)" in n.message
    assert r.extra["mask_convention"]["convention"] == "additive"


@pytest.mark.parametrize("make,hints,expected", [
    (lambda: hf.LlamaStyleAttention(), {}, "additive"),
    (lambda: textbook.MultiHeadAttention(d_model=32, num_heads=4), {}, "keep"),
    (lambda: nn.MultiheadAttention(16, 2, batch_first=True), {"kind": "layer", "mask_shape": "QK"},
     "blocked"),
    (lambda: PadBlockedLayer(), {"mask_arg": "pad", "mask_shape": "BQK"}, "blocked"),
], ids=["hf-additive", "textbook-keep", "nn-mha-blocked", "pad-blocked"])
def test_detected_convention(make, hints, expected):
    _, det = detect(make(), **hints)
    assert det["source"] == "detected" and det["convention"] == expected, det
    assert det["tried"][-1] == expected and not det.get("leaky")


def test_detected_convention_used_by_checks():
    r = attncheck.check(PadBlockedLayer(), checks=["normalization", "padding"], mask_arg="pad",
                        **FAST)
    assert r["normalization"].status == "pass", r["normalization"].message
    assert r["normalization"].metrics["mask_convention"] == "blocked"
    assert r["padding"].status == "pass", r["padding"].message
    assert r["padding"].metrics["mask_convention"] == "blocked"


def test_hint_and_adapter_skip_detection():
    t = attncheck.target(textbook.MultiHeadAttention(d_model=32, num_heads=4),
                         mask_convention="keep")
    assert not t.needs_mask_detection()
    assert t.ensure_mask_convention()["source"] == "hint"
    t = attncheck.target(nn.MultiheadAttention(16, 2))
    assert not t.needs_mask_detection()
    assert t.ensure_mask_convention() == {**t.mask_detection, "convention": "blocked",
                                          "source": "adapter"}


def test_undeterminable_convention_warns_never_fails():
    r = attncheck.check(IgnoresMask(), checks=["normalization", "padding"], **FAST)
    n, p = r["normalization"], r["padding"]
    assert n.status == "warn" and "masked keys not tested" in n.message, n.message
    assert "could not be determined" in n.message
    assert n.metrics["masked_keys_tested"] is False
    assert n.metrics["mask_convention_source"] == "failed"
    assert p.status == "skip" and "could not be determined" in p.message


def test_leaky_mask_is_detected_and_still_fails():
    _, det = detect(LeakyMask())
    assert det["convention"] == "keep" and det["leaky"] is True
    r = attncheck.check(LeakyMask(), checks=["normalization"], **FAST)["normalization"]
    assert r.status == "fail" and "masked keys are not 0" in r.message


def test_empty_mask_arg_means_no_masks():
    t = attncheck.target(hf.LlamaStyleAttention(), mask_arg="")
    assert t.mask_arg is None and not t.accepts_mask and not t.needs_mask_detection()
    assert t.cli_args() == "--hint mask_arg="


def test_terminal_report_names_the_detected_convention():
    from rich.console import Console

    from attncheck.report.terminal import render_report

    rep = attncheck.check(PadBlockedLayer(), checks=["shapes"], mask_arg="pad", **FAST)
    con = Console(record=True, width=200)
    render_report(rep, con)
    assert "mask convention: mask 'pad': detected convention blocked" in con.export_text()
