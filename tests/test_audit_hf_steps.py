"""Per-step models of the transformers audit: a forward fed several sequences per step (states,
actions, returns, timesteps), read from the shapes its docstring documents."""
import pytest
import torch

pytest.importorskip("transformers")

from attncheck.audit.checks import AuditContext, check_causality, check_padding  # noqa: E402
from attncheck.audit.hf import build_hf, documented_steps  # noqa: E402


class _Steps(torch.nn.Module):
    def forward(self, states=None, actions=None, timesteps=None, attention_mask=None, image=None):
        r"""
        states (`torch.FloatTensor` of shape `(batch_size, episode_length, state_dim)`):
            states.
        actions (`torch.FloatTensor` of shape `(batch_size, episode_length, act_dim)`):
            actions.
        timesteps (`torch.LongTensor` of shape `(batch_size, episode_length)`):
            timesteps.
        attention_mask (`torch.FloatTensor` of shape `(batch_size, episode_length)`):
            mask.
        image (`torch.FloatTensor` of shape `(batch_size, num_patches, patch_dim)`):
            another axis.
        """


class _Config:
    state_dim, act_dim, patch_dim = 5, 3, 7


def test_steps_read_from_the_documented_shapes():
    arg, width, others = documented_steps(_Steps(), _Config())
    # the image is on another axis, the mask is the checks' own
    assert (arg, width, others) == ("states", 5, {"actions": 3, "timesteps": None})


def test_steps_need_a_width_the_config_declares():
    class Config:
        act_dim = 3
    arg, width, others = documented_steps(_Steps(), Config())
    assert (arg, width, others) == ("actions", 3, {"timesteps": None})


@pytest.mark.slow
def test_decision_transformer_is_checked_on_its_states():
    m = build_hf("hf:decision_transformer", "decision_transformer", sdpa=False)[0]
    assert m.input_kind == "features" and m.causal is True and m.info["input"] == "states"
    ctx = AuditContext()
    assert check_causality(m, ctx).status == "pass"
    # both padding sides: every per-step input moves with its step
    r = check_padding(m, ctx)
    assert r.status == "pass" and "right and left" in r.message
