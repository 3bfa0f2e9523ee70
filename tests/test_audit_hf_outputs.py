"""Outputs of the transformers audit that are not one ``(B, L, …)`` row per token: the tokens'
rows inside a longer sequence (tokens beside image patches or a class token), per-sample outputs
(pooled vectors, Perceiver decoder queries), and which checks still apply to them."""
import pytest
import torch

pytest.importorskip("transformers")

from attncheck.audit.checks import AuditContext, check_causality, check_padding  # noqa: E402
from attncheck.audit.hf import build_hf, locate_token_rows  # noqa: E402

LO, HI = 4, 100


def _ids(B=2, L=6):
    return torch.randint(LO, HI, (B, L), generator=torch.Generator().manual_seed(0))


def _toy(extra_before: int, extra_after: int, D: int = 8):
    """A residual-stream toy: each token's embedding plus a small mix of all tokens, between
    ``extra_before`` and ``extra_after`` fixed rows, and beside it a batch-mixing similarity."""
    g = torch.Generator().manual_seed(1)
    emb = torch.randn(HI, D, generator=g)
    before, after = torch.randn(extra_before, D, generator=g), torch.randn(extra_after, D, generator=g)

    def run(x):
        h = emb[x]
        h = h + 0.1 * h.mean(1, keepdim=True)
        B = x.shape[0]
        seq = torch.cat([before.expand(B, -1, -1), h, after.expand(B, -1, -1)], dim=1)
        pooled = h.mean(1)
        return {"logits_per_text": pooled @ pooled.T, "last_hidden_state": seq, "pooler_output": pooled}
    return run


@pytest.mark.parametrize("before,after", [(0, 1), (3, 0), (2, 5)])
def test_tokens_found_at_their_offset_in_a_longer_sequence(before, after):
    found = locate_token_rows(_toy(before, after), _ids(), LO, HI)
    assert found["path"] == ("last_hidden_state",) and found["offset"] == before


def test_output_without_token_rows_is_per_sample_and_not_batch_mixing():
    def run(x):  # latent queries that read the tokens through a mean: no row follows a token
        r = _toy(0, 0)(x)
        lat = r["last_hidden_state"].mean(1, keepdim=True).expand(-1, 9, -1) * torch.arange(1, 10.)[:, None]
        return {"logits_per_text": r["logits_per_text"], "latents": lat}
    found = locate_token_rows(run, _ids(), LO, HI)
    # the (B, B) similarity mixes the samples; the latents are per sample
    assert found["path"] == ("latents",) and found["offset"] is None


def test_output_that_ignores_the_ids_is_not_located():
    def run(x):
        return {"image_embeds": torch.ones(x.shape[0], 4, 3)}
    assert locate_token_rows(run, _ids(), LO, HI) == {}


@pytest.mark.slow
def test_text_tower_with_an_appended_class_token_is_checked_on_the_token_rows():
    # VideoPrism's text tower returns (B, L + 1, D): the class token last
    m = build_hf("hf:videoprism_text_model", "videoprism_text_model", sdpa=False)[0]
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.per_position and m.info["output"].startswith("last_hidden_state: rows 0")
    assert m.forward(x).out.shape[:2] == (2, m.seq_len)


@pytest.mark.slow
def test_joint_model_output_with_image_rows_is_checked_on_the_text_rows():
    # ViLT: (B, L + 1 + patches, D), the text first
    m = build_hf("hf:vilt", "vilt", sdpa=False)[0]
    assert m.per_position and "rows 0" in m.info["output"]
    ctx = AuditContext()
    assert check_padding(m, ctx).status == "pass"


def test_perceiver_decoder_queries_are_a_per_sample_output():
    m = build_hf("hf:perceiver", "perceiver", sdpa=False)[0]
    assert not m.per_position and "per sample" in m.info["output"]
    ctx = AuditContext()
    assert check_causality(m, ctx).status == "skip" and check_padding(m, ctx).status == "skip"
    out = m.forward(m.make_inputs(2, generator=torch.Generator().manual_seed(0))).out
    assert out.shape[0] == 2 and out.shape[1] != m.seq_len


class _Inserts(torch.nn.Module):
    def forward(self, input_ids=None, image_embeds=None, image_embeds_position_mask=None, text_position_mask=None):
        r"""
        image_embeds (`torch.Tensor` of shape `(batch_size, latent_query_num, hidden_size)`, *optional*):
            image features.
        """


def test_feature_slots_read_from_the_documented_feature_count():
    from attncheck.audit.hf import _feature_slots

    class Config:
        latent_query_num = 5
    # text_position_mask has no `text` argument beside it
    assert _feature_slots(_Inserts(), Config()) == ("image_embeds_position_mask", 5)
    assert _feature_slots(_Inserts(), object()) is None  # the count is not a config field


@pytest.mark.slow
def test_model_inserting_image_features_at_marked_positions_gets_placeholders_before_the_ids():
    m = build_hf("hf:kosmos-2", "kosmos-2", sdpa=False)[0]
    n = m.module.config.latent_query_num
    assert f"after {n} image placeholders" in m.info["input_layout"]
    assert m.info["output"].startswith(f"logits: rows {n}")
    assert check_causality(m, AuditContext()).status == "pass"
