"""How a target that raises is reported: the known cause is named next to the exception, and one
traceback raised from the same line of the target in several checks is printed once."""
from __future__ import annotations

import torch

import attncheck
from attncheck.dynamic.base import diagnose_target_error
from attncheck.report.terminal import plain_lines


def fp16_overflowing_fill(q, k, v, is_causal=False):
    """(B, H, L, d) kernel whose -1e9 fill does not fit float16 (max 65504)."""
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    L, S = s.shape[-2:]
    blocked = torch.ones(L, S, dtype=torch.bool, device=s.device).triu(1)
    s = s.masked_fill(blocked, -1e9)
    return s.softmax(-1) @ v


def test_overflow_message_names_the_fill():
    h = torch.zeros(2, 2, dtype=torch.float16)
    try:
        h.masked_fill(torch.ones(2, 2, dtype=torch.bool), -1e9)
    except RuntimeError as exc:
        cause = diagnose_target_error(exc)
    else:  # pragma: no cover - torch accepted an overflowing fill
        raise AssertionError("torch no longer raises on an overflowing float16 fill")
    assert "torch.finfo(scores.dtype).min" in cause
    assert diagnose_target_error(ValueError("shape mismatch")) == ""


def test_each_error_names_the_cause_and_the_traceback_is_printed_once():
    rep = attncheck.check(fp16_overflowing_fill, checks=["shapes", "causality", "mask-pattern"],
                          causal=True, dtype="float16", device="cpu", max_examples=2)
    errors = [r for r in rep.results if r.status == "error"]
    assert len(errors) == 3
    assert all("does not fit the dtype" in r.message for r in errors)
    text = "\n".join(plain_lines(rep))
    assert text.count("RuntimeError: value cannot be converted") == 3 + 1  # 3 messages, 1 traceback
    assert text.count("(same traceback as shapes)") == 2
    # every check keeps its own reproduction line
    for name in ("shapes", "causality", "mask-pattern"):
        assert f"checks=['{name}']" in text


def returns_str(q, k, v):
    """Kernel that returns a string instead of an attention output."""
    return "not a tensor"


def test_wrong_return_type_fails_the_target_in_every_check():
    """A wrong return type is the target's fault (a ``fail``), never an internal error, whether
    the check runs the target directly or through a hypothesis property."""
    checks = ["shapes", "finite", "normalization", "reference", "batch-independence"]
    rep = attncheck.check(returns_str, checks=checks, device="cpu", max_examples=2)
    by_name = {r.check: r for r in rep.results}
    for name in checks:
        r = by_name[name]
        assert r.status == "fail", (name, r.status, r.message)
        assert "returned str" in r.message, (name, r.message)
        assert not r.metrics.get("internal_error"), name
