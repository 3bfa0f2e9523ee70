"""After any run — including one where the target raises, hangs or a check mutates everything —
the target's parameters, buffers, grads, requires_grad flags, training mode, RNG states, grad
mode, default dtype and function-mode stack are exactly as before."""
import random

import pytest
import torch
from torch.overrides import TorchFunctionMode

import attncheck
from attncheck.dynamic import base
from attncheck.dynamic.state import global_state, module_state, module_state_equal

from _dynamic_helpers import load

buggy = load("dynamic/buggy_modules.py")
nano = load("dynamic/nanogpt_layer.py")


class _Outer(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _vandal(target, ctx):
    """A check that changes everything it can, pushes a function mode, then raises."""
    m = target.module
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1.0)
            p.grad = torch.ones_like(p)
            p.requires_grad_(False)
        for b in m.buffers():
            b.fill_(7)
    m.train()
    m.to(torch.float64)
    torch.manual_seed(123)
    random.seed(5)
    torch.set_grad_enabled(False)
    torch.set_default_dtype(torch.float64)
    _Outer().__enter__()          # left pushed on purpose
    m.new_attribute = 1
    raise RuntimeError("vandal")


def _prepare_module():
    m = nano.make_causal_layer()
    m.train()                      # a non-default training flag
    m.c_proj.weight.requires_grad_(False)
    m.c_attn.weight.grad = torch.full_like(m.c_attn.weight, 0.5)
    return m


def _everything(m):
    return module_state(m), global_state().as_comparable(), dict(vars(m)).keys()


def test_state_restored_after_vandal_check_and_raising_target():
    base.register_check("vandal", default=False)(_vandal)
    m = _prepare_module()
    random.seed(1)
    torch.manual_seed(2)
    before_mod, before_glob, before_keys = _everything(m)
    report = attncheck.check(m, checks=["vandal", "shapes"], max_examples=2)
    assert report["vandal"].status == "error" and "vandal" in report["vandal"].message
    assert report["shapes"].status == "pass"           # the next check ran on a clean module
    after_mod, after_glob, after_keys = _everything(m)
    assert module_state_equal(before_mod, after_mod)
    assert before_glob == after_glob
    assert before_keys == after_keys
    assert m.c_attn.weight.dtype == torch.float32 and m.training
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32


def test_state_restored_when_target_raises_and_under_outer_mode():
    m = buggy.RaisingAttention()
    outer = _Outer()
    with outer:
        before = (module_state(m), global_state().as_comparable())
        report = attncheck.check(m, checks=["shapes", "finite", "gradient-flow"], max_examples=2)
        after = (module_state(m), global_state().as_comparable())
    assert {r.status for r in report.results} == {"error"}
    assert all("boom" in r.message for r in report.results)
    assert module_state_equal(before[0], after[0]) and before[1] == after[1]


def test_rng_advances_not_after_check():
    m = nano.make_causal_layer()
    torch.manual_seed(9)
    expected = torch.rand(3)
    torch.manual_seed(9)
    attncheck.check(m, checks=["determinism"], max_examples=2)
    torch.testing.assert_close(torch.rand(3), expected, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_run_restores_device_and_rng():
    m = nano.make_causal_layer()
    torch.cuda.init()
    before = (module_state(m), global_state().as_comparable())
    report = attncheck.check(m, checks=["shapes", "finite"], device="cuda", max_examples=2)
    assert report.device.startswith("cuda") and report.ok
    assert m.c_attn.weight.device.type == "cpu"
    assert module_state_equal(before[0], module_state(m))
    assert before[1] == global_state().as_comparable()
