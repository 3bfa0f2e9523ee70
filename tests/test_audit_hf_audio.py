"""Audio and audio-token models in the transformers audit: codebook token layouts, spectrogram
widths from the feature extractor or the first layer.  A handful of tiny types."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

import transformers as tf  # noqa: E402

from attncheck.audit.hf import (  # noqa: E402
    CODEBOOK_FORMS,
    _extractor_feature_size,
    _input_layer_widths,
    build_hf,
    codebook_ids,
)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(1, 3), st.integers(1, 10), st.sampled_from(CODEBOOK_FORMS), st.data())
def test_codebook_ids_keep_each_frame_in_place_and_in_range(k, b, L, form, data):
    lo, hi = 4, 112
    x = torch.randint(lo, hi, (b, L), generator=torch.Generator().manual_seed(data.draw(st.integers(0, 99))))
    j = data.draw(st.integers(0, L - 1))
    y = x.clone()
    y[:, j] = lo + (y[:, j] - lo + 1) % (hi - lo)
    cx, cy = codebook_ids(x, k, form, lo, hi), codebook_ids(y, k, form, lo, hi)
    assert cx.min() >= lo and cx.max() < hi
    as_bkl = {"(B*K,L)": lambda c: c.reshape(b, k, L), "(B,K,L)": lambda c: c,
              "(B,L,K)": lambda c: c.transpose(1, 2)}[form]
    changed = (as_bkl(cx) != as_bkl(cy)).any(dim=(0, 1))
    assert changed.tolist() == [i == j for i in range(L)]
    assert len({tuple(r) for r in as_bkl(cx)[0].tolist()}) == k  # the codebooks differ


def test_codebook_decoder_gets_one_row_per_codebook_and_folded_logits():
    (m,) = build_hf("hf:musicgen_decoder", "musicgen_decoder", sdpa=False)
    k = m.module.config.num_codebooks
    assert m.info["input_layout"] == f"input_ids as {k} codebooks (B*K,L)"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape == (2, x.shape[1], k * m.module.config.vocab_size)
    # frame j of the output depends on frames ≤ j only (the model is causal over frames)
    y = x.clone()
    y[:, -1] = x[:, -1] % (m.token_range[1] - m.token_range[0]) + m.token_range[0]
    assert not torch.equal(x, y)
    torch.testing.assert_close(m.forward(y).out[:, :-1], out[:, :-1])


def test_mel_count_from_the_feature_extractor_when_the_config_names_none():
    assert _extractor_feature_size(tf.Gemma4AudioConfig()) == 128  # Gemma4AudioFeatureExtractor
    assert _extractor_feature_size(tf.LlamaConfig()) is None  # a text package: no extractor
    (m,) = build_hf("hf:gemma4_audio", "gemma4_audio", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert 128 in x.shape[1:]
    assert m.forward(x).out.shape[0] == 2


def test_spectrogram_as_wide_as_the_first_layer_of_a_frame_stacking_encoder():
    (m,) = build_hf("hf:granite_speech5_encoder", "granite_speech5_encoder", sdpa=False)
    width = _input_layer_widths(m.module)[0]
    assert width == 4 * m.module.config.num_mel_bins  # frames stacked with deltas before input_linear
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.shape[-1] == width and m.info["input_layout"].endswith(f"-{width}")
    assert m.forward(x).out.shape[0] == 2


def test_packed_audio_encoder_gets_concatenated_frames_with_their_lengths():
    from attncheck.audit.shrink import shrink_config

    default = tf.AutoConfig.for_model("qwen2_5_omni_audio_encoder")
    tiny = shrink_config(default, 0)
    # its position table still covers a whole chunk of 2·n_window frames
    assert tiny.max_source_positions >= 2 * tiny.n_window
    (m,) = build_hf("hf:qwen2_5_omni_audio_encoder", "qwen2_5_omni_audio_encoder", sdpa=False)
    assert m.info["input_layout"] == "audio-packed"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[0] == 2  # (ΣN, D) split back into the 2 samples
    alone = m.forward(x[:1]).out
    torch.testing.assert_close(out[:1], alone)


def test_lagged_forecaster_gets_its_horizon_covariates_and_lagged_past():
    from attncheck.audit.shrink import shrink_config

    default = tf.AutoConfig.for_model("time_series_transformer")
    assert default.prediction_length is None  # required by the model, no default
    tiny = shrink_config(default, 0)
    assert isinstance(tiny.prediction_length, int) and tiny.context_length == tiny.prediction_length
    (m,) = build_hf("hf:time_series_transformer", "time_series_transformer", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.shape == (2, tiny.context_length + max(tiny.lags_sequence))  # past_length
    assert m.forward(x).out.shape[0] == 2


def test_returned_autocorrelations_over_channels_are_not_attention_weights():
    from attncheck.audit.checks import AuditContext, check_batch, check_normalization

    (m,) = build_hf("hf:autoformer", "autoformer", sdpa=False)
    ctx = AuditContext()
    assert check_normalization(m, ctx).status == "skip"  # (B, H, L, head_dim) maps are not weights
    # the triaged defect: per-sample delays tiled over the (B·H) rows mix the samples
    assert check_batch(m, ctx).status == "fail"


def test_codec_decoder_output_folded_per_latent_frame_and_checked_causal():
    from attncheck.audit.checks import AuditContext, check_causality

    (m,) = build_hf("hf:mimi_decoder", "mimi_decoder", sdpa=False)  # its transformer stack builds the mask
    assert m.kind == "features" and m.causal is True
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[:2] == (2, x.shape[1])  # waveform (B, 1, r·L) → (B, L, r)
    assert check_causality(m, AuditContext()).status == "pass"


def test_required_sample_lengths_cover_the_whole_input():
    (m,) = build_hf("hf:dots3_note_audio_encoder", "dots3_note_audio_encoder", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    seen = {}
    h = m.module.register_forward_pre_hook(lambda mod, a, kw: seen.update(kw), with_kwargs=True)
    try:
        out = m.forward(x).out
    finally:
        h.remove()
    frames = seen["input_features"].shape[-1]
    assert seen["chunk_sample_lengths"].tolist() == [frames * m.module.config.hop_length] * 2
    assert out.shape[0] == 2



def test_waveform_padded_by_the_feature_extractor_to_the_multiple_the_model_checks():
    from attncheck.audit.hf import extractor_inputs

    config = tf.AutoConfig.for_model("muse_spark_audio")
    ext = extractor_inputs(config)
    hop = tf.MuseSparkFeatureExtractor().samples_per_token
    assert ext is not None and ext["input_values"].shape[-1] % hop == 0
    assert extractor_inputs(tf.LlamaConfig()) is None  # a text package: no extractor


def test_codec_encoder_returning_only_codes_is_checked_on_its_codes():
    (m,) = build_hf("hf:wavtokenizer_encoder", "wavtokenizer_encoder", sdpa=False)
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    codes = m.module(input_values=x).audio_codes
    assert not codes.is_floating_point()
    torch.testing.assert_close(out, codes.float())


def test_waveform_tower_whose_forward_names_its_input_hidden_states_gets_waveforms():
    (m,) = build_hf("hf:vibevoice_acoustic_tokenizer_encoder", "vibevoice_acoustic_tokenizer_encoder", sdpa=False)
    assert m.kind == "audio" and m.info["input"] == "hidden_states"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.dim() == 3 and x.shape[:2] == (2, 1)  # a mono waveform (B, 1, samples)
    assert m.forward(x).out.shape[0] == 2


def test_codec_concatenating_two_towers_keeps_its_projection_as_wide_as_both():
    from attncheck.audit.shrink import shrink_config

    default = tf.AutoConfig.for_model("xcodec2")
    assert default.quantization_dim == default.hidden_size + default.semantic_model_config.hidden_size
    tiny = shrink_config(default, 0)
    assert tiny.quantization_dim == tiny.hidden_size + tiny.semantic_model_config.hidden_size
    # the acoustic encoder doubles its base channels at each down-sampling stage
    assert tiny.encoder_hidden_size * 2 ** len(tiny.downsampling_ratios) <= 256


@pytest.mark.slow
def test_codec_with_acoustic_and_semantic_branches_gets_aligned_waveform_and_spectrogram():
    (m,) = build_hf("hf:xcodec2", "xcodec2", sdpa=False)
    cfg = m.module.config
    assert m.info["input_layout"].startswith("waveform+spectrogram")
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.shape[-1] % cfg.hop_length == 0  # whole frames of the acoustic encoder
    out = m.forward(x).out
    torch.testing.assert_close(m.forward(x[:1]).out, out[:1])  # the fixed spectrogram is per sample


@pytest.mark.slow
def test_audio_visual_encoder_gets_a_clip_beside_its_audio():
    pytest.importorskip("timm")
    (m,) = build_hf("hf:pe_audio_video_encoder", "pe_audio_video_encoder", sdpa=False)
    assert m.kind == "audio" and m.info["input_layout"].endswith("+clip")
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[0] == 2


def test_vocoder_input_width_keeps_the_mel_count_of_the_acoustic_model():
    from attncheck.audit.shrink import shrink_config

    default = tf.AutoConfig.for_model("fastspeech2_conformer_with_hifigan")
    assert default.vocoder_config.model_in_dim == default.model_config.num_mel_bins
    tiny = shrink_config(default, 0)
    assert tiny.vocoder_config.model_in_dim == tiny.model_config.num_mel_bins
    assert tiny.model_config.hidden_size < default.model_config.hidden_size  # the widths still shrink


def test_spectrogram_mask_that_marks_padding_is_all_false():
    from attncheck.audit.hf import _mask_marks_padding

    (m,) = build_hf("hf:gemma3n_audio", "gemma3n_audio", sdpa=False)
    assert m.kind == "audio" and m.info["input"] == "audio_mel"
    assert _mask_marks_padding(m.module, "audio_mel_mask")  # its layers take ~audio_mel_mask as the valid frames
    assert not _mask_marks_padding(m.module, "audio_mel")
    # its attention modules look back max_past_horizon frames and none ahead: causal, windowed
    assert m.causal and m.sliding_window == m.module.config.conf_attention_context_left
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[0] == 2 and torch.isfinite(out).all()
    torch.testing.assert_close(m.forward(x[1:]).out, out[1:])


def test_codebook_tower_whose_ids_argument_is_named_otherwise():
    (m,) = build_hf("hf:inkling_audio", "inkling_audio", sdpa=False)
    k = m.module.config.num_codebooks
    assert m.info["input_layout"] == f"audio_input_ids as {k} codebooks (B,L,K)"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert m.forward(x).out.shape[:2] == x.shape


def test_audio_decoder_cross_attending_to_fixed_encoder_states():
    (m,) = build_hf("hf:dia_decoder", "dia_decoder", sdpa=False)
    cfg = m.module.config
    assert m.info["input_layout"] == f"input_ids+encoder_hidden_states as {cfg.num_channels} codebooks (B,L,K)"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[:2] == x.shape
    y = x.clone()
    y[:, -1] = x[:, -1] % (m.token_range[1] - m.token_range[0]) + m.token_range[0]
    assert not torch.equal(x, y)
    torch.testing.assert_close(m.forward(y).out[:, :-1], out[:, :-1])  # causal over frames


def test_audio_frames_follow_the_token_count_when_added_per_position():
    (m,) = build_hf("hf:voxtral_realtime", "voxtral_realtime", sdpa=False)
    assert m.info["input_layout"] == "input_ids+input_features"
    assert "attention_mask" not in m.supports  # the audio beside each token cannot be padded with it
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape[:2] == x.shape
    torch.testing.assert_close(m.forward(x[:1]).out, out[:1])


def test_text_to_speech_encoder_decoder_gets_text_ids_and_decoder_codebooks():
    (m,) = build_hf("hf:dia", "dia", sdpa=False)
    k = m.module.config.decoder_config.num_channels
    assert m.kind == "seq2seq" and m.info["input_layout"] == f"input_ids decoder_input_ids as {k} codebooks (B,L,K)"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    out = m.forward(x).out
    assert out.shape == (2, x.shape[1], k * m.module.config.decoder_config.vocab_size)  # (B·K, L, V) folded
    torch.testing.assert_close(m.decode_fn(x, 4), out)  # step by step as in one pass
