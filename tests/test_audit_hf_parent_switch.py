"""Sub-config types whose module their parent builds only behind a ``use_*`` switch (IDEFICS'
perceiver resampler): audited through the module the switch adds to the parent."""
import types

import pytest

pytest.importorskip("transformers")

from attncheck.audit.hf import _shared_switches, build_hf  # noqa: E402


def test_switches_are_the_off_flags_both_configs_declare():
    sub = types.SimpleNamespace(use_resampler=False, use_cache=True, use_bias=False, depth=2)
    parent = types.SimpleNamespace(use_resampler=False, use_cache=False)
    # use_cache is on in the sub-config; use_bias is not the parent's
    assert _shared_switches(sub, parent) == ["use_resampler"]


@pytest.mark.slow
def test_perceiver_resampler_is_audited_through_the_module_its_switch_adds():
    from attncheck.audit.checks import AuditContext, probe_layers

    m = build_hf("hf:idefics_perciever", "idefics_perciever", sdpa=False)[0]
    assert m.info["class"] == "IdeficsPerceiverResampler" and m.info["parent"] == "IdeficsForVisionText2Text"
    maps, _ = probe_layers(m, AuditContext())
    # latent queries attend to the image features and the latents: (n_latents, L + n_latents)
    assert maps and all(lm.probs.shape[-1] > lm.probs.shape[-2] for lm in maps)
