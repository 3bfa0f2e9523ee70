"""Configs of the transformers audit: the config a model class is built from (a composite's
sub-config), attributes a parent config writes into its sub-configs, and inputs a forward needs
beside the checked one.  A handful of tiny types."""
import pytest
import torch

pytest.importorskip("transformers")

import transformers as tf  # noqa: E402

from attncheck.audit.hf import build_hf, config_for_class  # noqa: E402


def test_causal_lm_of_a_composite_is_built_from_its_text_config():
    composite = tf.AutoConfig.for_model("llama4")
    got = config_for_class(tf.Llama4ForCausalLM, composite)
    assert type(got) is tf.Llama4TextConfig and got is composite.text_config
    assert config_for_class(tf.Llama4ForConditionalGeneration, composite) is composite
    (m,) = build_hf("hf:emu3", "emu3", sdpa=False)  # Emu3ForCausalLM takes the Emu3TextConfig
    assert type(m.module).__name__ == "Emu3ForCausalLM" and type(m.module.config) is tf.Emu3TextConfig
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape
