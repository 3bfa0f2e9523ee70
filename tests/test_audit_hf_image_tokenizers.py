"""Image tokenizers (VQ-VAEs) of the transformers audit run through ``encode``: a tokenizer whose
``encode`` takes image latents rather than pixels, and one whose forward also decodes to a latent
grid its config fixes."""
import pytest
import torch

pytest.importorskip("transformers")

from attncheck.audit.checks import AuditContext, probe_layers  # noqa: E402
from attncheck.audit.hf import attention_modules, build_hf, choose_class, encodes_images_only  # noqa: E402


def test_quantizer_of_image_latents_runs_on_a_latent_map():
    # GlmImageVQVAE: no forward; encode(hidden_states) quantizes the latents (B, C, H, W) of
    # GLM-Image's vision encoder with a 1×1 convolution and a codebook: no attention
    import transformers as tf

    kind, cls = choose_class("glm_image_vqmodel", tf.AutoConfig.for_model("glm_image_vqmodel"))
    assert (kind, cls.__name__) == ("vision", "GlmImageVQVAE") and encodes_images_only(cls)
    (m,) = build_hf("hf:glm_image_vqmodel", "glm_image_vqmodel", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    conv = next(c for c in m.module.modules() if isinstance(c, torch.nn.Conv2d))
    assert x.shape[1] == conv.in_channels and m.info["method"] == "encode"
    assert not attention_modules(m.module)
    assert m.forward(x).out.shape[0] == 2


@pytest.mark.slow
def test_tokenizer_whose_forward_decodes_to_a_fixed_grid_is_audited_through_encode():
    # JanusVQVAE.forward decodes num_patches² codes (32² by default), more than the audit's image
    # gives: its encoder (with its VQGAN attention blocks) is audited through encode
    (m,) = build_hf("hf:janus_vqgan", "janus_vqgan", sdpa=False)
    assert m.info["method"] == "encode" and "JanusVQVAE.encode" in m.info["audited_submodule"]
    maps, _ = probe_layers(m, AuditContext())  # the encoder's attention blocks are seen
    assert maps and all(lm.probs.shape[-1] == lm.probs.shape[-2] for lm in maps)
    x = m.make_inputs(3, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(m.forward(x).out[:1], m.forward(x[:1]).out, atol=1e-4, rtol=1e-4)
