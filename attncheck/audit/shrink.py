"""Shrink any transformers config to a tiny, consistent one (random weights, no downloads).

:func:`shrink_config` walks the fields of a ``PretrainedConfig`` (a dataclass in transformers ≥ 5)
and applies small per-key rules by the key's *role*, not per model family:

- widths (``hidden_size``, ``d_model``, ``n_embd``, ``embed_dim``, ``encoder_*``/``decoder_*``
  variants, …) → 64; lists of widths (``hidden_sizes``) scaled so their first entry is 64;
- query heads (``num_attention_heads``, ``num_heads``, ``n_head``, ``*_attention_heads``) → 4,
  per-stage head lists (Swin ``num_heads``) → 4 each; KV heads (``num_key_value_heads``,
  ``num_kv_heads``, …) → 4 when the original had as many KV heads as query heads (MHA), 1 for MQA,
  else 2 (GQA, 2 groups of 2);
- head dims (``head_dim``, ``d_kv``, ``v_head_dim``, …) → 16; rotary dims (``rotary_dim``,
  ``qk_rope_head_dim``) → 8 and ``qk_nope_head_dim`` → 8 (q·k width 16); low-rank projections
  (``kv_lora_rank``, ``q_lora_rank``) → 32; rope sections (``mrope_section``) summing to half the
  rotary dim (head dim × ``partial_rotary_factor``) rescaled to the same fraction of 16, and the
  sections the modeling code takes as literal defaults written into ``rope_parameters``;
- ``heads × head_dim`` kept equal to ``expand × width`` when it was (Mamba-2 SSM heads), SSM
  head groups dividing the heads;
- feed-forward sizes → 128; layer counts → 2 (or the number of distinct per-layer types, so every
  attention type is kept); per-layer lists (``layer_types``, ``block_types``, …, any list as long
  as the layer count) → one entry per distinct value, in first-seen order, and per-layer lists of
  source layer indices (``kv_source_layers``) → their first entries; GPT-Neo's nested
  ``attention_types = [[types, repeat]]`` → repeat 1; per-stage ``depths`` → at most 2;
- MoE: experts → 4, experts per token → 2, shared experts → 1, expert groups → 1; SSM state
  sizes (``mamba_d_state``, ``ssm_state_size``) → 16;
- vocab → 128, positions → 64, object queries (``num_queries``) → 8, sliding / local windows of text models → 4 (Longformer-style
  ``attention_window`` stays even); images → 4 patches per side (128 pixels without a
  ``patch_size``);
- fields of a known role that the defaults leave ``None`` (head dim, KV heads, MoE sizes) → the
  tiny value; sizes no rule names that equalled a shrunk width in the original (``adapter_input_size
  == hidden_size``, also across nested configs) → the same shrunk value; a width that was the sum
  of the config's and a nested config's ``hidden_size`` → the sum of the shrunk ones; an input
  width (``model_in_dim``) equal to a mel count of the config tree (``num_mel_bins``) → kept;
- special token ids (``*_token_id``, ``*_token_index``) that no longer fit the vocab are moved to
  the top of it (:data:`RESERVED_TOP` ids), so random inputs drawn below never hit them.

- heterogeneous configs (``per_layer_config``): the global values of per-layer attributes and the
  per-layer overrides shrunk alike; a cycled block pattern (``block_types``) keeps a layer of every
  kind it names, and the layers before the KV-shared ones one of every per-layer kind; per-layer
  kinds the class leaves unset come from the model's mask mapping (:func:`code_layer_kinds`).

Nested configs (``text_config``, ``vision_config``, ``audio_config``, ``encoder``/``decoder``)
are shrunk with the same rules.  Four levels, tried in order by the builder: ``0`` all rules,
``1`` all rules but the head dims (width = 4 × the original head dim: model code may assume the
head dim, e.g. rope sections set in code), ``2`` keep widths / heads / head dims (only depth,
vocab, positions, experts, lists), ``3`` layers only.  The config class re-derives its computed
attributes (``__post_init__``) from the shrunk fields, so derived values (Swin's ``hidden_size``,
DeepSeek's ``qk_head_dim``) stay consistent.  When the class's validators reject the shrunk values,
the shrinking is given back per field, not per level (:func:`_construct`).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable
from typing import Any

HIDDEN = 64
HEADS = 4
HEAD_DIM = 16
ROPE_DIM = 8
LORA_RANK = 32
FFN = 128
LAYERS = 2
VOCAB = 128
POSITIONS = 64
EXPERTS = 4
TOP_K = 2
WINDOW = 4
PATCHES_PER_SIDE = 4
#: total downsampling assumed for images of models without a ``patch_size`` (CNN / Hiera stages)
CNN_STRIDE = 32
#: width multiplier of a timm generator's stages (:func:`timm_model_args`)
TIMM_WIDTH_MULTIPLIER = 0.125
#: special token ids that do not fit the shrunk vocab are moved into ``[VOCAB - RESERVED_TOP, VOCAB)``
RESERVED_TOP = 16
LEVELS = (0, 1, 2, 3)

_WIDTH = re.compile(r"(^|_)(hidden_size|d_model|n_embd|n_embed|embed_dim|model_dim|hidden_dim|dim|"
                    r"embedding_size|embedding_dim|word_embed_proj_dim|projection_dim|proj_dim|d_embed|"
                    r"output_hidden_size|cross_attention_hidden_size|text_embed_dim|vision_embed_dim|"
                    r"d_latents?|latent_dim|encoder_hidden_size|mm_hidden_size|hidden_size_global|output_proj_dims)$")
_WIDTH_LIST = re.compile(r"(^|_)(hidden_sizes|embed_dims|dims|embed_dim|hidden_size|widths|"
                         r"neck_hidden_sizes|conv_dim)(_per_stage)?$")
_HEADS = re.compile(r"(^|_)(num_attention_heads|num_heads|n_heads?|attention_heads|num_attn_heads|"
                    r"num_head|heads)(_per_stage)?$")
_KV_HEADS = re.compile(r"(^|_)(num_key_value_heads|num_kv_heads|n_kv_heads?|kv_heads|"
                       r"num_key_heads|multi_query_group_num)$")
_HEAD_DIM = re.compile(r"(^|_)(head_dim|d_kv|d_head|dim_head|attention_head_dim|head_size|"
                       r"attention_head_size|kv_channels|v_head_dim|key_head_dim|value_head_dim)$")
_ROPE_DIM = re.compile(r"(^|_)(rotary_dim|rotary_emb_dim|rope_dim|qk_rope_head_dim|rope_head_dim)$")
_NOPE_DIM = re.compile(r"(^|_)qk_nope_head_dim$")
_LORA = re.compile(r"(^|_)(kv_lora_rank|q_lora_rank|o_lora_rank)$")
_FFN = re.compile(r"(^|_)(intermediate_size|ffn_dim|n_inner|d_ff|d_inner|ffn_hidden_size|mlp_dim|"
                  r"feed_forward_size|intermediate_dim|ffn_size|dim_feedforward|feedforward_dim|d_ssm)$")
#: SSM (Mamba) state sizes
_SSM_STATE = re.compile(r"(^|_)(d_state|state_size|ssm_state_size)$")
SSM_STATE = 16
_LAYERS = re.compile(r"(^|_)(num_hidden_layers|num_layers|n_layers?|layers|num_blocks|depth|"
                     r"num_decoder_layers|num_encoder_layers|num_self_attends_per_block)$")
#: per-stage block counts (``depths``; timm's ``layers = (3, 4, 6, 3)`` of a ResNet / FastViT)
_DEPTHS = re.compile(r"(^|_)(depths|num_layers_per_stage|layers_per_stage|block_sizes|block_repeats)$|^layers$")
_EXPERTS = re.compile(r"(^|_)(num_experts|num_local_experts|n_routed_experts|moe_num_experts|"
                      r"num_routed_experts|n_experts|num_expert)$")
_TOP_K = re.compile(r"(^|_)(num_experts_per_tok|num_experts_per_token|moe_topk|moe_k|top_k|top_k_experts|"
                    r"experts_per_token|num_selected_experts|router_topk)$")
_SHARED = re.compile(r"(^|_)(n_shared_experts|num_shared_experts|moe_num_shared_experts)$")
_GROUPS = re.compile(r"(^|_)(n_group|topk_group|num_expert_groups?|topk_groups?)$")
_VOCAB = re.compile(r"(^|_)vocab_size($|_)|_vocab$|(^|_)vocab_size_per")
_POSITIONS = re.compile(r"(^|_)(max_position_embeddings|n_positions|max_seq_len|max_sequence_length|"
                        r"n_ctx|max_target_positions|max_source_positions|max_length|seq_length)$")
_WINDOW = re.compile(r"(^|_)(sliding_window|sliding_window_size|attention_window|local_window_size|"
                     r"window_size|local_attention|attention_window_len|attention_chunk_size|chunk_size|block_size|canvas_length)$")
#: the forecast horizon of time-series transformers (``prediction_length``; the context length
#: defaults to it), left unset by their defaults
_HORIZON = re.compile(r"(^|_)prediction_length$")
HORIZON = 8
#: learned object queries of DETR-style detectors (the top-k of as many image positions)
_QUERIES = re.compile(r"(^|_)num_queries$")
QUERIES = 8
#: a count of the last layers that reuse earlier layers' keys / values (Gemma-3n)
_SHARED_LAYERS = re.compile(r"_shared_layers$")
#: names of a cycled block pattern (the kind of each layer, repeated over the layers)
_KIND_PATTERN = re.compile(r"(block|layer)s?_types?$")
_PERIOD = re.compile(r"layer_period$|_period$")
_OFFSET = re.compile(r"layer_offset$")
_TOKEN_ID = re.compile(r"_token_ids?$|_token_index$|_token_idx$")
_SECTION = re.compile(r"section$")
#: the role rules (a key matched by one is shrunk by it, not tied to another key's value)
_RULED = (_WIDTH, _WIDTH_LIST, _HEADS, _KV_HEADS, _HEAD_DIM, _ROPE_DIM, _NOPE_DIM, _LORA, _FFN, _LAYERS, _DEPTHS,
          _EXPERTS, _TOP_K, _SHARED, _GROUPS, _SSM_STATE, _VOCAB, _POSITIONS, _QUERIES, _WINDOW, _TOKEN_ID)


def config_fields(cls) -> list[str]:
    """The constructor fields of a config class (dataclass fields with ``init=True``)."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init]
    import inspect

    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "kwargs")]


def _is_config(v: Any) -> bool:
    try:
        from transformers import PretrainedConfig
    except Exception:  # pragma: no cover
        return False
    return isinstance(v, PretrainedConfig)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(_int(x) for x in v)


def _same_type(orig, new):
    return type(orig)(new) if isinstance(orig, tuple) else list(new)


def _compress(seq, n: int, repeat: int = 1) -> list:
    """``n`` entries of ``seq`` keeping every distinct value, in first-seen order, then cycling
    (``repeat`` > 1: the distinct values ``repeat`` times over, then cycling)."""
    firsts, seen = [], []
    for x in seq:
        key = repr(x)
        if key not in seen:
            seen.append(key)
            firsts.append(x)
    out = list(firsts) * max(repeat, 1)
    i = 0
    while len(out) < n:
        out.append(seq[i % len(seq)])
        i += 1
    return out[:max(n, len(firsts))]


def _distinct(seq) -> int:
    return len({repr(x) for x in seq})


def _rescale_sum(parts: list[int], total: int) -> list[int]:
    """Integers proportional to ``parts`` summing to ``total`` (each ≥ 1 when possible)."""
    s = sum(parts)
    out = [max(1, int(p * total / s)) for p in parts]
    out[-1] += total - sum(out)
    if out[-1] < 1:
        return parts
    return out


VISION_WINDOW = 2


def _windowed_side(v: dict[str, Any]) -> int:
    """Patches per image side for windowed vision models (Swin-style): the last stage, after
    halving the resolution at each of the ``len(depths) - 1`` merges, still holds one window."""
    w = v.get("window_size")
    if not _int(w):
        return PATCHES_PER_SIDE
    stages = len(v["depths"]) if _ints(v.get("depths")) else 1
    return max(PATCHES_PER_SIDE, min(w, VISION_WINDOW) * 2 ** (stages - 1))


def _image_side(v, patch, per_side: int = PATCHES_PER_SIDE) -> Any:
    p = patch if _int(patch) else (patch[0] if _ints(patch) else None)
    if p is None:
        return v
    side = p * per_side
    if _int(v):
        return min(v, side)
    if _ints(v):
        return _same_type(v, [min(x, side) for x in v])
    return v


def shrink_values(values: dict[str, Any], level: int = 0,
                  ties: dict[tuple[bool, int], set] | None = None, repeat: int = 1,
                  width: int = HIDDEN) -> dict[str, Any]:
    """Apply the shrink rules to a field → value mapping (one config level, no nesting).

    ``level`` 0: every rule; 1: every rule but the head dims; 2: keep widths / heads / head
    dims; 3: layer counts and per-layer lists only.  ``ties``: original → shrunk sizes of the
    whole config tree (see :func:`_tie_equal_dims`); ``repeat``: layers of each per-layer kind;
    ``width``: the tiny hidden width (:data:`HIDDEN`; see :func:`narrower_dims`).
    Returns a new dict; keys not matched by a rule are unchanged.
    """
    v = dict(values)
    out = dict(values)
    layer_keys = [k for k, x in v.items() if _LAYERS.search(k) and _int(x) and x > 0]
    orig_layers = {v[k] for k in layer_keys}
    # per-layer lists: shrink the layer count to the number of distinct types (at least 2)
    n_new = LAYERS
    per_layer = [k for k, x in v.items() if isinstance(x, (list, tuple)) and len(x) in orig_layers
                 and len(x) > LAYERS and not _DEPTHS.search(k)]
    for k in per_layer:
        if not _source_layers(v[k]):
            n_new = max(n_new, min(_distinct(v[k]), 4) * repeat)
    # a block pattern cycled over the layers (RecurrentGemma's ``block_types = (recurrent,
    # recurrent, attention)``): enough layers for every kind it names, the pattern compressed to
    # its distinct kinds when that takes more than 4 layers
    cycled = {}
    for k, x in v.items():
        if (_KIND_PATTERN.search(k) and isinstance(x, (list, tuple)) and 1 < len(x) < max(orig_layers, default=0)
                and all(isinstance(e, str) for e in x) and _distinct(x) > 1):
            firsts = [i for i, e in enumerate(x) if e not in x[:i]]
            cycled[k] = x if firsts[-1] < 4 else _same_type(x, _compress(x, 0))
            n_new = max(n_new, firsts[-1] + 1 if firsts[-1] < 4 else len(firsts))
    # a backbone's output layers (``out_indices``, 1-based stages: stage 0 is the embeddings) keep
    # their count: the neck that reads them has one entry per output (DPT's neck_hidden_sizes)
    outs = v.get("out_indices")
    backbone_outs = (_ints(outs) and orig_layers and len(set(outs)) == len(outs) <= 4
                     and all(1 <= e <= max(orig_layers) for e in outs))
    if backbone_outs:
        n_new = max(n_new, len(outs))
        ranks = sorted(outs)
        out["out_indices"] = _same_type(outs, [n_new - (len(outs) - 1 - ranks.index(e)) for e in outs])
        if isinstance(v.get("out_features"), (list, tuple)) and len(v["out_features"]) == len(outs):
            out["out_features"] = [f"stage{e}" for e in out["out_indices"]]
    # the last layers that reuse the keys / values of earlier layers (Gemma-3n's
    # ``num_kv_shared_layers``): the layers before them keep one of every per-layer kind
    kinds = max((_distinct(v[k]) for k in per_layer if not _source_layers(v[k])), default=1)
    total = max(orig_layers, default=0)
    partial = [k for k in layer_keys if kinds > 1 and 0 < v[k] < total and _SHARED_LAYERS.search(k)]
    if partial:
        n_new = max(n_new, kinds + 1)
    for k in layer_keys:
        out[k] = max(1, min(v[k], n_new - kinds)) if k in partial else min(v[k], n_new)
    out.update(cycled)
    for k in per_layer:  # layer-index lists keep their first entries (each still names an earlier layer)
        x = list(v[k])
        out[k] = _same_type(v[k], x[:n_new] if _source_layers(x) else _compress(x, n_new, repeat))
    for k, x in v.items():
        # GPT-Neo: attention_types = [[["global", "local"], 12]] → repeat once
        if (isinstance(x, (list, tuple)) and x and all(isinstance(e, (list, tuple)) and len(e) == 2
                                                        and isinstance(e[0], (list, tuple)) and _int(e[1])
                                                        for e in x)):
            out[k] = [[list(e[0]), 1] for e in x]
            total = sum(len(e[0]) for e in x)
            for lk in layer_keys:
                out[lk] = total
        # layer index lists (e.g. which layers use global attention): keep the ones that exist;
        # not indices into another list of the config (RT-DETR's ``encode_proj_layers`` pick
        # feature levels of ``encoder_in_channels``), which the layer count does not bound
        elif (_ints(x) and k not in per_layer and orig_layers and ("layer" in k or "idx" in k)
              and not (backbone_outs and k == "out_indices")
              and all(0 <= e < max(orig_layers) for e in x) and not _DEPTHS.search(k)
              and not _indexes_other_list(k, x, v, orig_layers)):
            keep = [e for e in x if e < n_new]
            out[k] = _same_type(x, keep or [min(x[0], n_new - 1)])
        elif _DEPTHS.search(k) and _ints(x):
            out[k] = _same_type(x, [min(e, 2) for e in x])
        elif _DEPTH_COEFFICIENT.search(k) and isinstance(x, float) and x > 1:
            out[k] = 1.0
        # layer schedules ("attention every 8 layers from layer 4"): every kind within 2 layers
        elif _PERIOD.search(k) and _int(x) and x > n_new and "layer" in k:
            out[k] = n_new
        elif _OFFSET.search(k) and _int(x) and x >= n_new:
            out[k] = n_new - 1
    if level >= 3:
        return out
    for k, x in v.items():
        if _VOCAB.search(k) and not k.startswith("type_") and (x is None or (_int(x) and x > VOCAB)):
            out[k] = VOCAB
            if x is None:  # defaults without a vocabulary (ESM) also leave the special ids unset
                for tk, tv in (("pad_token_id", 1), ("mask_token_id", 3)):
                    if tk in v and v[tk] is None:
                        out[tk] = tv
        elif _POSITIONS.search(k) and _int(x) and x > POSITIONS:
            # a chunked audio encoder's position table covers a whole chunk of 2·n_window frames
            chunk = 2 * v["n_window"] if _int(v.get("n_window")) else 0
            out[k] = min(x, max(POSITIONS, chunk))
        elif _QUERIES.search(k) and _int(x) and x > QUERIES:
            out[k] = QUERIES
        elif _EXPERTS.search(k) and _int(x) and x > EXPERTS:
            out[k] = EXPERTS
        elif _TOP_K.search(k) and _int(x) and x > TOP_K:
            out[k] = TOP_K
        elif _SHARED.search(k) and _int(x) and x > 1:
            out[k] = 1
        elif _GROUPS.search(k) and _int(x) and x > 1:
            out[k] = 1
        elif _SSM_STATE.search(k) and _int(x) and x > SSM_STATE:
            out[k] = SSM_STATE
    vision = any(k in v for k in ("image_size", "patch_size", "num_channels")) and "vocab_size" not in v
    # image sides: ``spec_size`` is the side of the square spectrogram image an audio Swin (CLAP's
    # HTSAT) folds its mel frames into
    side_key = next((k for k in ("image_size", "spec_size") if k in v), None)
    if vision and level == 0 and _int(v.get("window_size")) and side_key is not None:
        out["window_size"] = min(v["window_size"], VISION_WINDOW)
    if not vision:
        for k, x in v.items():
            if _WINDOW.search(k) and _int(x) and x > WINDOW:
                out[k] = WINDOW
            elif _WINDOW.search(k) and _ints(x) and k == "attention_window":
                out[k] = _same_type(x, [WINDOW] * len(x))
    # token ids that no longer fit the vocab move to the reserved top ids
    vocab = out.get("vocab_size") if _int(out.get("vocab_size")) else None
    if vocab:
        fit_token_ids(v, out, vocab)
    if level >= 2:
        if level == 2 and "image_size" in v and "patch_size" not in v:
            # a convolutional stem has no position table tied to the image side: like the
            # sequence positions, the image shrinks while the widths are kept
            out["image_size"] = _image_side(v["image_size"], CNN_STRIDE)
        return out
    orig_heads = next((x for k, x in v.items() if _HEADS.search(k) and _int(x)), None)
    orig_head_dim = next((x for k, x in v.items() if _HEAD_DIM.search(k) and _int(x)), None)
    orig_width = next((x for k, x in v.items() if _WIDTH.search(k) and _int(x)), None)
    if orig_head_dim is None and orig_width and orig_heads:
        orig_head_dim = orig_width // orig_heads
    # level 1 keeps the head dim (model code may assume it, e.g. rope sections set in code)
    keep_hd = level == 1 and bool(orig_head_dim)
    hidden = HEADS * orig_head_dim if keep_hd else width
    for k, x in v.items():
        if keep_hd and (_NOPE_DIM.search(k) or _ROPE_DIM.search(k) or _HEAD_DIM.search(k) or _LORA.search(k)):
            continue
        if _KV_HEADS.search(k) and _int(x):
            out[k] = HEADS if (orig_heads is None or x >= orig_heads) else (1 if x == 1 else 2)
        elif _HEADS.search(k) and _int(x):
            out[k] = HEADS if x > 1 else x
        elif _HEADS.search(k) and _ints(x):
            out[k] = _same_type(x, [HEADS for _ in out[k]])
        elif _NOPE_DIM.search(k) and _int(x):
            out[k] = HEAD_DIM - ROPE_DIM
        elif _ROPE_DIM.search(k) and _int(x):
            out[k] = ROPE_DIM
        elif _HEAD_DIM.search(k) and _int(x):
            out[k] = HEAD_DIM
        elif _LORA.search(k) and _int(x):
            out[k] = LORA_RANK
        elif _FFN.search(k) and _int(x) and x > FFN:
            out[k] = FFN
        elif _FFN.search(k) and _ints(x):
            out[k] = _same_type(x, [min(e, FFN) for e in out[k]])
        elif _WIDTH.search(k) and _int(x) and x > hidden:
            out[k] = hidden
        elif _WIDTH_LIST.search(k) and _ints(x) and x[0] > hidden // 2:
            f = (hidden // 2 if k.endswith("conv_dim") else hidden) / x[0]
            out[k] = _same_type(x, [max(HEADS * 4, int(round(e * f / 16)) * 16) for e in out[k]])
        elif (k == side_key or k == "img_size") and "patch_size" in v:  # img_size: timm's model_args
            out[k] = _image_side(x, v.get("patch_size"), _windowed_side(v))
        elif k == side_key and _ints(v.get("tubelet_size")) and len(v["tubelet_size"]) == 3:
            # a video patch (tubelet) of (frames, height, width) (ViViT, VideoPrism): its spatial side
            out[k] = _image_side(x, v["tubelet_size"][1], _windowed_side(v))
        elif k == "image_size":  # convolutional stems / strided stages: 4 × 4 after 32× downsampling
            out[k] = _image_side(x, CNN_STRIDE)
        elif _BASE_CHANNELS.search(k) and _int(x):
            out[k] = _base_channels(k, x, v)
        elif k.endswith("hidden_size") and _int(x) and x < hidden and any(
                _ints(e) and _STAGE_RATIOS.search(kk) for kk, e in v.items()):
            # a hidden size below the tiny width beside per-stage sampling ratios: the base
            # channel count of a convolutional codec encoder that doubles it at each stage
            # (X-Codec 2's ``encoder_hidden_size`` with its ``downsampling_ratios``)
            out[k] = _base_channels(k, x, v)
    # a width equal to the widest stage of a base channel count in the original (Emu3's VQ-VAE:
    # hidden_size = base_channels × the largest channel multiplier, the width of its attention
    # blocks) stays the widest stage's width
    mult = [max(e) for kk, e in v.items() if _ints(e) and kk.endswith("multiplier")]
    for bk, bx in v.items():
        if mult and _BASE_CHANNELS.search(bk) and _int(bx) and _int(out.get(bk)) and out[bk] != bx:
            for k, x in v.items():
                if _WIDTH.search(k) and _int(x) and x == bx * max(mult):
                    out[k] = out[bk] * max(mult)
    # MLA (DeepSeek-V3-style: separate no-rope and rope parts): a head dim equal to the rope
    # dim is the rotary embedding's width (LongCat-Flash's ``head_dim``), not the q·k width
    rope_key = next((k for k, x in v.items() if _ROPE_DIM.search(k) and _int(x)), None)
    if rope_key is not None and any(_NOPE_DIM.search(k) for k in v):
        for k, x in v.items():
            if _HEAD_DIM.search(k) and _int(x) and x == v[rope_key] and k != rope_key:
                out[k] = out[rope_key]
    _fill_unset(v, out)
    if level < 3:
        _last_feature_layers(v, out)
    _keep_head_products(v, out)
    _tie_equal_dims(v, out, ties)
    _keep_stage_doubling(v, out)
    if keep_hd:
        return out
    # rope sections (multimodal rope): parts of half the rotary dim
    for k, x in v.items():
        if isinstance(x, dict) and all(isinstance(e, str) for e in x):
            out[k] = _shrink_rope_dict(x, orig_head_dim or 0, _partial_rotary(v))
        elif _SECTION.search(k) and _ints(x):
            out[k] = _rescale_section(x, orig_head_dim or 0, _partial_rotary(v))
    return out


_BASE_CHANNELS = re.compile(r"(^|_)(base_channels|num_filters|n_filters|upsample_initial_channel)$")
#: compound-scaling factor of the depth (EfficientNet, Tan & Le 2019): 1 repeats each block as
#: the base network does (the width factor stays: model code derives sizes such as the final
#: ``hidden_dim`` from it)
_DEPTH_COEFFICIENT = re.compile(r"(^|_)depth_coefficient$")
_STAGE_RATIOS = re.compile(r"(sampling_ratios|_rates)$")
#: the widest convolution stage a base channel count may give
WIDEST_STAGE = 256


def _base_channels(k: str, x: int, v: dict[str, Any]) -> int:
    """A base channel count of a convolutional stack halved until its widest stage has at most
    :data:`WIDEST_STAGE` channels: the stages multiply it by ``channel_multiplier`` entries
    (VQGAN), or double it at each down-sampling ratio (SEANet-style codecs); an
    ``upsample_initial_channel`` (HiFi-GAN) is the widest and is halved at each up-sampling rate,
    so it stays divisible by ``2 ** len(upsample_rates)``."""
    stages = max((len(e) for kk, e in v.items() if _ints(e) and _STAGE_RATIOS.search(kk)), default=0)
    mult = [max(e) for kk, e in v.items() if _ints(e) and kk.endswith("multiplier")]
    step = 2 ** stages if k.endswith("upsample_initial_channel") else 1
    widest = x if step > 1 else x * (max(mult) if mult else 2 ** stages)
    while widest > WIDEST_STAGE and x % 2 == 0 and (x // 2) % step == 0:
        x, widest = x // 2, widest // 2
    return x


_FEATURE_LAYER = re.compile(r"(^|_)(feature_layers?|hook_ids)$")


def _last_feature_layers(v: dict[str, Any], out: dict[str, Any]) -> None:
    """Tower layers a projector reads (``vision_feature_layer``: indices into another config's
    layers, which shrink to a few) given as non-negative indices become the last layers counted
    from the end, deepest first (Molmo2's ``[24, 18]`` of 25 → ``[-1, -2]``, DepthPro's ``intermediate_hook_ids``);
    negative ones stay."""
    for k, x in v.items():
        if not _FEATURE_LAYER.search(k):
            continue
        xs = [x] if _int(x) else list(x) if _ints(x) else None
        if not xs or min(xs) < 0:
            continue
        rank = {e: -(i + 1) for i, e in enumerate(sorted(set(xs), reverse=True)[:LAYERS])}
        new = [rank.get(e, -LAYERS) for e in xs]
        out[k] = new[0] if _int(x) else _same_type(x, new)


def _source_layers(x) -> bool:
    """Whether a per-layer list names, for each layer ``i``, a layer ``≤ i`` (the layer whose
    keys / values it reuses: ``kv_source_layers = [0, 1, 2, …]``), and not binary flags."""
    return _ints(x) and all(0 <= e <= i for i, e in enumerate(x)) and max(x) > 1


def _indexes_other_list(k: str, x, v: dict[str, Any], layer_counts: set[int]) -> bool:
    """Whether the index list ``v[k] = x`` fits a list of the same config that is not per layer
    (its length no layer count): indices of feature levels or stages rather than of layers."""
    return any(isinstance(y, (list, tuple)) and j != k and max(x) < len(y) and len(y) not in layer_counts
               and len(y) > 1 for j, y in v.items())


def _fill_unset(v: dict[str, Any], out: dict[str, Any]) -> None:
    """Fields of a known role that the defaults leave ``None`` but the model code reads: a
    ``default_<option>`` as the first of the config's ``<option>s``, the head dim (width /
    heads), KV heads (= heads), and the MoE sizes of a config that declares experts (experts,
    experts per token, shared experts, expert groups, feed-forward sizes)."""
    heads = next((x for k, x in out.items() if _HEADS.search(k) and _int(x) and x > 0), None)
    width = next((x for k, x in out.items() if _WIDTH.search(k) and _int(x) and x > 0), None)
    moe = sum(1 for k in v if _EXPERTS.search(k) or _TOP_K.search(k)) >= 2
    for k, x in v.items():
        if x is not None:
            continue
        # a default choice among the config's options (X-MOD's ``default_language`` among its
        # ``languages``: its forward needs one when the input names none): the first option
        options = v.get(k[len("default_"):] + "s") if k.startswith("default_") else None
        if isinstance(options, (list, tuple)) and options and all(isinstance(e, str) for e in options):
            out[k] = options[0]
            continue
        if _HEAD_DIM.search(k) and heads and width and width % heads == 0 and k.endswith("head_dim"):
            out[k] = width // heads
        elif _KV_HEADS.search(k) and heads:
            out[k] = heads
        elif moe and _EXPERTS.search(k):
            out[k] = EXPERTS
        elif moe and _TOP_K.search(k):
            out[k] = TOP_K
        elif moe and (_SHARED.search(k) or _GROUPS.search(k)):
            out[k] = 1
        elif moe and _FFN.search(k):  # the experts' feed-forward size (moe_intermediate_size)
            out[k] = FFN
        elif _HORIZON.search(k):  # a forecaster's horizon, required by its model (no default)
            out[k] = HORIZON


def _role_prefix(k: str, rx: re.Pattern) -> str | None:
    m = rx.search(k)
    return k[:m.start()] if m else None


def _keep_head_products(v: dict[str, Any], out: dict[str, Any]) -> None:
    """Keep ``heads × head_dim`` equal to what it equalled in the original config, by adjusting
    the head count (else the head dim): ``expand × width`` (Mamba-2's SSM heads: ``num_heads ×
    head_dim = expand × hidden_size``, asserted by the config classes and the SSM kernels) or, for
    a prefixed pair, a single width / feed-forward size; and keep SSM head groups (``n_groups``)
    dividing the heads.  Head / head-dim pairs are matched by their common name prefix
    (``mamba_n_heads`` / ``mamba_d_head``)."""
    for hk, h in v.items():
        if not (_int(h) and _HEADS.search(hk) and _int(out.get(hk))):
            continue
        pre = _role_prefix(hk, _HEADS)
        for dk, d in v.items():
            if not (_int(d) and _HEAD_DIM.search(dk) and _role_prefix(dk, _HEAD_DIM) == pre and _int(out.get(dk))):
                continue
            prod, target = h * d, None
            expand = [ek for ek, e in v.items() if _int(e) and ek.startswith(pre) and ek.endswith("expand")]
            widths = [wk for wk, w in v.items() if _int(w) and _WIDTH.search(wk)]
            for ek in expand:
                for wk in widths:
                    if v[ek] * v[wk] == prod and _int(out.get(ek)) and _int(out.get(wk)):
                        target = out[ek] * out[wk]
            if target is None and pre:  # a prefixed pair (``ssm_num_heads``): its own width
                same = [k for k, x in v.items() if _int(x) and x == prod and k not in (hk, dk)
                        and (_WIDTH.search(k) or _FFN.search(k)) and _int(out.get(k))]
                target = out[same[0]] if same else None
            if target is None or out[hk] * out[dk] == target:
                continue
            if target % out[dk] == 0 and target // out[dk] >= 1:
                out[hk] = target // out[dk]
            elif target % out[hk] == 0:
                out[dk] = target // out[hk]
        for gk, g in v.items():  # SSM head groups divide the heads
            if (_int(g) and g > 1 and _SSM_GROUPS.search(gk) and _role_prefix(gk, _SSM_GROUPS) == pre
                    and out[hk] % out.get(gk, g)):
                out[gk] = math.gcd(out[hk], g)


_SSM_GROUPS = re.compile(r"n_groups$")
_POS_FEATS = re.compile(r"(^|_)num_pos_feats$")
_DIM_NAME = re.compile(r"dim|size|hidden|channel|groups|width|features")
_NOT_DIM = re.compile(r"image|patch|kernel|stride|length|rate|window|position|vocab|token|layer|seq|batch|chunk|"
                      r"codebook|bins")


def _size_map(v: dict[str, Any], out: dict[str, Any]) -> dict[tuple[bool, int], set]:
    """``(from a list, original) → shrunk values`` of the widths and feed-forward sizes
    (≥ :data:`HIDDEN`) a rule changed: scalars, and entries of per-stage lists."""
    mapped: dict[tuple[bool, int], set] = {}
    for k, x in v.items():
        y = out.get(k)
        if _int(x) and _int(y) and x >= HIDDEN and y != x and (_WIDTH.search(k) or _FFN.search(k)):
            mapped.setdefault((False, x), set()).add(y)
        elif _ints(x) and _ints(y) and len(x) == len(y) and _WIDTH_LIST.search(k):
            for a, b in zip(x, y):
                if a >= HIDDEN and a != b:
                    mapped.setdefault((True, a), set()).add(b)
    return mapped


def _list_factor(mapped: dict[tuple[bool, int], set]) -> float | None:
    """The one factor by which :func:`_size_map`'s per-stage list entries were all scaled (HGNet's
    ``hidden_sizes`` × 1/4), or None when they disagree or there are none."""
    ratios = {b / a for (in_list, a), got in mapped.items() if in_list for b in got}
    return ratios.pop() if len(ratios) == 1 else None


def _tie_equal_dims(v: dict[str, Any], out: dict[str, Any], ties: dict[tuple[bool, int], set] | None = None) -> None:
    """Dimensions no rule names that equalled a shrunk width or feed-forward size in the original
    config take the same new value (``adapter_input_size == hidden_size``, Mimi's
    ``upsample_groups == hidden_size``, SAM's vision ``output_channels`` == the prompt encoder's
    ``hidden_size``, DETR-style ``encoder_in_channels`` == the backbone's ``hidden_sizes``):
    model code wires them to each other.  A list entry is looked up among list entries first (a
    scalar among scalars), this config's own sizes before ``ties`` (the whole config tree's); an
    original value mapped to two different sizes is left alone.  A per-stage list entry no list
    names is scaled by the factor all shrunk per-stage widths share (HGNet's ``stage_out_channels``
    with its ``hidden_sizes``), so stage widths equal to each other stay equal.  Sine position
    features per axis (``num_pos_feats``, half a width: the x and y halves are concatenated) take
    half the tied width."""
    local = _size_map(v, out)

    def tie(x, in_list: bool):
        # a list entry from a list (a scalar from a scalar) first, then the same config before the tree
        for src in (in_list, not in_list):
            for m in (local, ties or {}):
                got = m.get((src, x), ())
                if got:
                    return next(iter(got)) if len(got) == 1 else None
        if in_list:  # a stage width no list names: scaled like every per-stage width, if they agree
            for m in (local, ties or {}):
                f = _list_factor(m)
                if f is not None:
                    return max(1, round(x * f))
        return None

    for k, x in v.items():
        # 2-D sine / Fourier position features: half the width per axis (x and y features concatenated)
        if _POS_FEATS.search(k) and _int(x) and out.get(k) == x and tie(2 * x, False) is not None:
            out[k] = tie(2 * x, False) // 2
            continue
        if not (_DIM_NAME.search(k) and not _NOT_DIM.search(k) and not any(rx.search(k) for rx in _RULED)):
            continue
        if _FEATURE_SIZES.search(k) and isinstance(x, (list, tuple)):  # feature-map sides follow the
            continue  # image (:func:`_tie_image_sides`)
        if _int(x) and out.get(k) == x and tie(x, False) is not None:
            out[k] = tie(x, False)
        elif _ints(x) and out.get(k) == x and all(e < HIDDEN or tie(e, True) is not None for e in x) \
                and any(e >= HIDDEN for e in x):
            out[k] = _same_type(x, [e if e < HIDDEN else tie(e, True) for e in x])


def _keep_stage_doubling(v: dict[str, Any], out: dict[str, Any]) -> None:
    """A width that was another width × 2^(S−1) in the original, S the stages of a per-stage
    ``depths`` list, keeps that ratio to the other's new value: the output width of a
    hierarchical encoder that doubles its channels at each of its S − 1 patch mergings (Swin,
    Liu et al. 2021; CLAP's HTSAT audio tower: ``hidden_size = patch_embeds_hidden_size × 8``)."""
    stages = next((len(x) for k, x in v.items() if _DEPTHS.search(k) and _ints(x) and len(x) > 1), None)
    if stages is None:
        return
    f = 2 ** (stages - 1)
    widths = {k: x for k, x in v.items() if _WIDTH.search(k) and _int(x) and x > 0 and _int(out.get(k))}
    for k, x in widths.items():
        src = next((k2 for k2, x2 in widths.items() if k2 != k and x2 * f == x), None)
        if src is not None:
            out[k] = out[src] * f


def _tree_ties(config, level: int, width: int = HIDDEN) -> dict[tuple[bool, int], set]:
    """:func:`_size_map` over a config and its nested configs (a first pass of the shrinker)."""
    vals = _values_of(config)
    flat = {k: x for k, x in vals.items() if not _is_config(x)}
    mapped = _size_map(flat, shrink_values(flat, level, width=width))
    for x in vals.values():
        if _is_config(x):
            for a, b in _tree_ties(x, level, width).items():
                mapped.setdefault(a, set()).update(b)
    return mapped


#: spatial sizes of feature maps (``backbone_feature_sizes``: side per feature level; SAM 2 video's
#: ``memory_attention_rope_feat_sizes``: the side of the last level, where memory attention runs)
_FEATURE_SIZES = re.compile(r"(^|_)(feature_sizes?|feat_sizes)$")


def _side_of(x) -> int | None:
    """The first side of an image size (an int, or an ``[height, width]`` list)."""
    return x if _int(x) else (x[0] if _ints(x) else None)


#: mel bins per spectrogram frame: kept by every rule
_MELS = re.compile(r"(^|_)(num_mel_bins|n_mels|mel_bins)$")
#: the width of a model's input features (a vocoder's ``model_in_dim``)
_INPUT_WIDTH = re.compile(r"(^|_)in(put)?_(dim|size|channels)$")


def _tree_mel_counts(config) -> frozenset[int]:
    """The mel counts (:data:`_MELS` fields) of a config and its nested configs."""
    vals = _values_of(config)
    found = {x for k, x in vals.items() if _MELS.search(k) and _int(x)}
    for x in vals.values():
        if _is_config(x):
            found |= _tree_mel_counts(x)
    return frozenset(found)


def _tree_image_sides(config, level: int) -> dict[int, int]:
    """Original → shrunk image side over a config and its nested configs (a first pass of the
    shrinker); the largest when nested configs of the same original side shrink differently."""
    sides: dict[int, int] = {}

    def walk(c):
        vals = _values_of(c)
        flat = {k: x for k, x in vals.items() if not _is_config(x)}
        a = _side_of(flat.get("image_size"))
        b = _side_of(shrink_values(flat, level).get("image_size")) if a else None
        if a and b and b != a:
            sides[a] = max(sides.get(a, 0), b)
        for x in vals.values():
            if _is_config(x):
                walk(x)

    walk(config)
    return sides


def _tie_image_sides(v: dict[str, Any], out: dict[str, Any], sides: dict[int, int]) -> None:
    """Image sizes and feature-map sizes tied across nested configs: an ``image_size`` equal to
    another nested config's in the original takes the same shrunk side (SAM 2's prompt encoder
    places points on the image its Hiera backbone sees: the prompt grid ``image_size /
    patch_size`` is the side of the last feature map); ``*feature_sizes`` (the side of each
    feature level, ``backbone_feature_sizes``) scale with the image side when every entry stays
    an integer."""
    a = _side_of(v.get("image_size"))
    if a in sides and _side_of(out.get("image_size")) != sides[a]:
        x = v["image_size"]
        out["image_size"] = sides[a] if _int(x) else _same_type(x, [sides[a]] * len(x))
    for k, x in v.items():
        if not (_FEATURE_SIZES.search(k) and out.get(k) == x):
            continue
        flat = [e for e in (x if isinstance(x, (list, tuple)) else [x]) for e in (e if isinstance(e, (list, tuple)) else [e])]
        if not (flat and all(_int(e) and e > 0 for e in flat)):
            continue
        for orig, new in sides.items():
            if all(e * new % orig == 0 for e in flat):
                scale = lambda e, orig=orig, new=new: e * new // orig  # noqa: E731
                out[k] = (scale(x) if _int(x) else
                          _same_type(x, [_same_type(e, [scale(i) for i in e]) if isinstance(e, (list, tuple))
                                         else scale(e) for e in x]))
                break


def _tie_nested_image_side(vals: dict[str, Any], new: dict[str, Any]) -> None:
    """A field of a composite config that no rule changed and that equals, in the original, the
    ``image_size`` of every nested config declaring one takes their shrunk side when they all
    shrink to the same one (DepthPro's ``patch_size``: the side of the tiles its two DINOv2
    encoders see, which its validator requires to equal their ``image_size``)."""
    nested = [(x, new[k]) for k, x in vals.items() if _is_config(x) and _is_config(new.get(k))]
    pairs = [(getattr(o, "image_size", None), getattr(n, "image_size", None)) for o, n in nested]
    pairs = [(a, b) for a, b in pairs if a is not None]
    if not pairs or not all(_int(a) and _int(b) for a, b in pairs) or len(set(pairs)) != 1:
        return  # no tower, sides given as lists, or towers of different sides
    (a, b), = set(pairs)
    for k, x in vals.items():
        if k != "image_size" and _int(x) and x == a != b and _same_value(new.get(k), x):
            new[k] = b


def _partial_rotary(v: dict[str, Any]) -> float:
    rope = v.get("rope_parameters")
    f = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    f = f if f is not None else v.get("partial_rotary_factor")
    return float(f) if isinstance(f, (int, float)) and 0 < f <= 1 else 1.0


def _rescale_section(x, orig_head_dim: int, partial: float):
    """Rope sections (multimodal rope: parts of the rotary frequencies) rescaled with the head dim:
    a section list summing to ``head_dim × partial_rotary_factor / 2`` (or ``head_dim / 2``) in
    the original sums to the same fraction of :data:`HEAD_DIM`.  Other lists are unchanged."""
    if not (_ints(x) and orig_head_dim):
        return x
    for frac in (partial, 1.0):
        half, target = int(orig_head_dim * frac) // 2, int(HEAD_DIM * frac) // 2
        if half and sum(x) == half and target >= len(x):
            return _same_type(x, _rescale_sum(list(x), target))
    return x


#: placeholder tokens that mark where a multimodal model scatters image / video / audio features
#: into the text embeddings (``input_ids == config.image_token_id``)
_PLACEHOLDER_ID = re.compile(r"(^|_)(image|video|audio|img|vision|speech)_token_(id|index|idx)$")


def fit_token_ids(v: dict[str, Any], out: dict[str, Any], vocab: int) -> None:
    """Move special token ids (``*_token_id``, ``*_token_index``) ≥ ``vocab`` into the top
    :data:`RESERVED_TOP` ids (distinct ids stay distinct), writing into ``out``.  A modality
    placeholder id the defaults leave ``None`` (BLIP-2's ``image_token_index``: the checkpoint's
    processor adds the token) gets a reserved id of its own too: the model compares ids with it,
    and random inputs drawn below the reserved ids hold no placeholder (the text runs alone)."""
    moved: dict[Any, int] = {}

    def fit(t):
        if not _int(t) or t < vocab:
            return t
        if t not in moved:
            moved[t] = vocab - 1 - (len(moved) % RESERVED_TOP)
        return moved[t]

    for k, x in v.items():
        if _TOKEN_ID.search(k):
            if _int(x):
                out[k] = fit(x)
            elif _ints(x):
                out[k] = _same_type(x, [fit(e) for e in x])
    used = {t for k, t in out.items() if _TOKEN_ID.search(k) and _int(t)}
    free = [t for t in range(vocab - 1, max(vocab - 1 - RESERVED_TOP, -1), -1) if t not in used]
    for k, x in v.items():
        if x is None and _PLACEHOLDER_ID.search(k) and out.get(k) is None and free:
            out[k] = free.pop(0)


def _shrink_rope_dict(d: dict, orig_head_dim: int, partial: float = 1.0) -> dict:
    out = dict(d)
    half = orig_head_dim // 2
    for k, x in d.items():
        if not isinstance(k, str):
            continue
        if _SECTION.search(k) and _ints(x):
            out[k] = list(_rescale_section(x, orig_head_dim, partial))
        elif isinstance(x, list) and half and len(x) == half and all(isinstance(e, float) for e in x):
            out[k] = x[:HEAD_DIM // 2]
        elif k == "original_max_position_embeddings" and _int(x) and x > POSITIONS:
            out[k] = POSITIONS
    return out


def _values_of(config) -> dict[str, Any]:
    cls = type(config)
    vals = {}
    for name in config_fields(cls):
        if name.startswith("_") and isinstance(getattr(cls, name[1:], None), property) and name[1:].startswith("out_"):
            # a backbone's outputs (``out_indices`` / ``out_features``): stored privately, set by
            # their public names (BackboneConfigMixin)
            vals[name[1:]] = getattr(config, name[1:])
            continue
        if name.startswith("_") or name in ("id2label", "label2id", "transformers_version"):
            continue
        try:
            vals[name] = getattr(config, name)
        except Exception:  # noqa: BLE001 - a heterogeneous config refuses global reads of per-layer attributes
            try:  # the global value, which the layers without an override use
                vals[name] = config._getattr_without_heterogeneous_validation(name)
            except Exception:  # noqa: BLE001
                continue
    # a settable property that the instance also stores under its own name (SAM 3 tracker video's
    # ``image_size``: the setter writes it into the sub-configs, and the constructor sets it from
    # its keyword, else from a default): passed back, or the constructor resets it
    for name in vars(config):
        prop = getattr(cls, name, None)
        if name not in vals and isinstance(prop, property) and prop.fset is not None:
            vals[name] = getattr(config, name)
    # backbone configs take the stages they output as constructor keywords, not fields; kept when
    # the stages are not the layers (ViT backbones: one stage per layer, shrunk with the layers)
    stages = getattr(config, "stage_names", None)
    if (callable(getattr(config, "set_output_features_output_indices", None)) and _ints(getattr(config, "out_indices", None))
            and isinstance(stages, (list, tuple))
            and not any(_LAYERS.search(k) and x == len(stages) - 1 for k, x in vals.items())):
        vals.setdefault("out_indices", list(config.out_indices))
    return vals


def shrink_config(config, level: int = 0, overrides: dict[str, Any] | None = None, *, repeat: int = 1,
                  width: int = HIDDEN, _ties: dict[tuple[bool, int], set] | None = None,
                  _sides: dict[int, int] | None = None,
                  _mels: frozenset[int] | None = None):
    """A tiny config of the same class as ``config`` (see the module docstring).

    Args:
        config: a ``PretrainedConfig`` (usually ``AutoConfig.for_model(model_type)``).
        level: 0 to 3 (how much to shrink; see :func:`shrink_values`).
        overrides: field values set last (attribute aliases such as ``num_attention_heads`` →
            ``num_heads`` follow the class's ``attribute_map``).
        repeat: layers of each per-layer kind kept (2: two of every kind, for models that tie
            the weights of one kind's layers to another layer of that kind).
        width: the tiny hidden width (:data:`HIDDEN`; wider for :func:`narrower_dims`).

    Returns:
        A new config instance; nested configs are shrunk the same way.

    Raises:
        whatever the config class raises for inconsistent values (the caller tries the next level).
    """
    cls = type(config)
    vals = _values_of(config)
    if _ties is None and level < 2:
        _ties = _tree_ties(config, level, width)
    if _sides is None:
        _sides = _tree_image_sides(config, level)
    if _mels is None:
        _mels = _tree_mel_counts(config)
    given = vals  # what the validators may get back
    vals = _with_code_sections(cls, vals) if level == 0 else vals
    flat = {k: x for k, x in vals.items() if not _is_config(x)}
    new = shrink_values(flat, level, _ties, repeat, width)
    _tie_image_sides(flat, new, _sides)
    vocab_kept = {}  # nested configs shrunk but for their vocab, for parents whose validators tie
    for k, x in vals.items():  # token ranges to it (codebook offsets into the text vocab)
        if _is_config(x):
            new[k] = shrink_config(x, level, repeat=repeat, width=width, _ties=_ties, _sides=_sides, _mels=_mels)
            vocab = {f: v for f, v in _values_of(x).items() if _VOCAB.search(f) and _int(v) and v > VOCAB}
            if vocab and level < 3:  # built only when the parent rejects the shrunk values
                vocab_kept[k] = functools.partial(shrink_config, x, level, vocab, _ties=_ties, _sides=_sides,
                                                _mels=_mels)
    _tie_nested_image_side(vals, new)
    _fill_documented_layer_types(cls, vals, new, overrides or {})
    if isinstance(vals.get("architecture"), str) and "model_args" in vals:  # a timm model (TimmWrapperConfig)
        args = timm_model_args(vals["architecture"], vals.get("model_args"), level)
        if args:
            new["model_args"] = args
    if "vocab_size" not in vals and level < 3:  # a composite: its token ids index the text vocab
        sub_vocab = [getattr(c, "vocab_size", None) for c in new.values() if _is_config(c)]
        sub_vocab = [n for n in sub_vocab if _int(n)]
        if sub_vocab:
            fit_token_ids(vals, new, min(sub_vocab))
    # a uniform per-layer list the class derives itself (default None) is left to the class, so
    # overrides that feed the derivation (Qwen2's max_window_layers) take effect
    defaults = {f.name: f.default for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
    layer_counts = {x for k, x in vals.items() if _LAYERS.search(k) and _int(x)}
    for k, x in vals.items():
        if (isinstance(x, (list, tuple)) and len(x) in layer_counts and _distinct(x) == 1 and k in defaults
                and defaults[k] is None and isinstance(new.get(k), (list, tuple)) and k not in (overrides or {})
                and not _FEATURE_SIZES.search(k)):  # a (height, width) pair, not one entry per layer
            new.pop(k)
    # a width the class derives itself (default None: Zamba's ``attention_hidden_size = 2 ×
    # hidden_size``) is left to the class, so it follows the shrunk widths it is derived from
    for k, x in vals.items():
        if (defaults.get(k, 0) is None and _int(x) and _WIDTH.search(k) and k in new and new[k] != x
                and not any(rx.search(k) for rx in _RULED if rx not in (_WIDTH, _WIDTH_LIST))  # a width only
                and k not in (overrides or {}) and level < 2):
            new.pop(k)
    _tie_concatenated_widths(vals, new)
    for k, x in flat.items():  # an input width equal to a mel count of the tree is the spectrogram's
        if _INPUT_WIDTH.search(k) and _int(x) and x in _mels and new.get(k) != x:
            new[k] = x  # (a vocoder's model_in_dim, fed the mels its acoustic model predicts)
    if overrides:
        amap = getattr(cls, "attribute_map", {}) or {}
        for k, x in overrides.items():
            new[amap.get(k, k)] = x
    made = _construct(cls, given, new, overrides or {}, vocab_kept)
    kinds = code_layer_kinds(cls.__module__) if "layer_types" in vals and vals["layer_types"] is None else ()
    uniform = vals.get("layer_types") if "layer_types" in vals and "layer_types" not in new else None
    if uniform and uniform[0] != "full_attention" and "layer_types" not in (overrides or {}):
        # a class that derives one kind for every layer by default, none of them full attention
        # (GraniteMoeHybrid: all Mamba), while its modeling code builds full-attention masks: a
        # layer of each kind the code names, so the attention layers are built too
        more = code_layer_kinds(cls.__module__)
        if "full_attention" in more and uniform[0] in more:
            kinds = more
    derived = getattr(made, "layer_types", None)
    if (kinds and (derived is None or (uniform and set(derived) == set(uniform)))
            and "layer_types" not in (overrides or {})):
        # per-layer kinds the class leaves unset but its model indexes: one layer of each kind the
        # modeling code builds masks for
        layers = {k: max(x, len(kinds)) for k, x in new.items() if _LAYERS.search(k) and _int(x) and x > 0}
        try:
            made = _construct(cls, given, {**new, **layers, "layer_types": list(kinds)}, overrides or {})
        except Exception:  # noqa: BLE001 - the class rejects them: keep its own (unset) value
            pass
    per_layer = _shrunk_per_layer_config(made, level, _ties)
    if per_layer is not None and "per_layer_config" not in (overrides or {}):
        try:
            made = _construct(cls, given, {**new, "per_layer_config": per_layer}, overrides or {})
        except Exception:  # noqa: BLE001 - the class rejects the shrunk overrides: keep them as derived
            pass
    made.use_cache = getattr(made, "use_cache", True)
    _carry_extra_attributes(config, made, _sides)
    return made


def narrower_dims(config) -> list[str]:
    """The dimension fields of a config tree that no shrink rule names and that equal the tiny
    width :data:`HIDDEN` while the tree has a width above it: shrunk, that width becomes
    :data:`HIDDEN` too, and a dimension the original kept narrower than the hidden width (SAM 2
    video's ``memory_encoder_output_channels = 64`` beside ``hidden_size = 256``, the memory
    channels its tracker splits each object pointer into: ``hidden_size // mem_dim`` tokens)
    would equal it.  A shrink with a wider ``width`` keeps them narrower.  Returns the fields
    (``"Sam3TrackerVideoConfig.memory_encoder_output_channels = 64"``); empty when none."""
    tree = _config_tree(config)
    wider = any(_WIDTH.search(k) and _int(x) and x > HIDDEN for c in tree for k, x in _values_of(c).items())
    if not wider:
        return []
    return [f"{type(c).__name__}.{k} = {x}" for c in tree for k, x in _values_of(c).items()
            if _int(x) and x == HIDDEN and _DIM_NAME.search(k) and not _NOT_DIM.search(k)
            and not any(rx.search(k) for rx in _RULED)]


def _tie_concatenated_widths(vals: dict[str, Any], new: dict[str, Any]) -> None:
    """A width field that equalled the config's own ``hidden_size`` plus a nested config's
    ``hidden_size`` (NeuCodec's ``quantization_dim``: the features of its acoustic encoder and
    of its semantic encoder concatenated, then projected) becomes the sum of the two shrunk
    widths, as the model concatenates the two towers' outputs before a layer of that width.
    ``new`` holds the shrunk values (nested configs already shrunk); changed in place."""
    own, own_new = vals.get("hidden_size"), new.get("hidden_size")
    if not (_int(own) and _int(own_new)):
        return
    parts = {}
    for k, x in vals.items():
        if _is_config(x) and _int(getattr(x, "hidden_size", None)) and _is_config(new.get(k)):
            parts.setdefault(own + x.hidden_size, set()).add(own_new + new[k].hidden_size)
    for k, x in vals.items():
        if (k != "hidden_size" and _WIDTH.search(k) and _int(x) and x in parts and len(parts[x]) == 1
                and x != own and new.get(k) != x):
            new[k] = next(iter(parts[x]))


def _carry_extra_attributes(config, made, sides: dict[int, int] | None = None) -> None:
    """Set on ``made``, in place, the boolean flags ``config`` holds that are no constructor field
    of its class and that ``made`` lacks altogether: keywords a parent config passes to a
    sub-config (CHMv2's DINOv3 ``backbone_config`` gets ``return_class_token=True``, which its
    backbone reads with ``getattr(config, "return_class_token", False)``); and an image side
    (``img_size``: the keyword a parent hands a timm backbone, OmDet-Turbo's Swin) that ``sides``
    (original → shrunk sides of the tree) maps, as the shrunk side.  Other sizes (a timm tower's
    ``num_classes``) would need shrinking rules of their own."""
    for k, x in vars(config).items():
        if k in ("img_size", "image_size") and _int(x) and x in (sides or {}) and not hasattr(made, k):
            x = sides[x]
        elif k.startswith("_") or not isinstance(x, bool):
            continue
        try:
            if hasattr(made, k):
                continue
        except Exception:  # noqa: BLE001 - a heterogeneous config refuses global reads of per-layer attributes
            continue
        try:
            setattr(made, k, x)
        except Exception:  # noqa: BLE001 - a config that refuses the attribute keeps its own
            continue


def _shrunk_per_layer_config(config, level: int, ties) -> dict[int, dict[str, Any]] | None:
    """The per-layer overrides of a heterogeneous config (transformers' ``per_layer_config``:
    ``{layer index: {attribute: value}}``, e.g. the other head count and MLA ranks of
    Dots3's sliding-window layers) shrunk by the same rules, or None when the config has none or
    the rules change nothing.  Layer indices are those of ``config`` (already shrunk: its
    ``__post_init__`` derived the overrides from its own per-layer types)."""
    spec = vars(config).get("_heterogeneity_spec")
    overrides = getattr(spec, "per_layer_overrides", None)
    if not isinstance(overrides, dict) or not overrides:
        return None
    shrunk = {i: shrink_values(dict(d), level, ties) for i, d in overrides.items()}
    return shrunk if shrunk != overrides else None
def documented_values(cls, field: str) -> list[str]:
    """The string values the config class's docstring quotes for ``field`` (``mlp_layer_types
    (`list[str]`, *optional*): MLP type (`"dense"` or `"sparse"`) for each decoder layer`` →
    ``["dense", "sparse"]``), in order, without repeats; ``[]`` when it quotes none."""
    return list(dict.fromkeys(re.findall(r'`"([^"`]+)"`', _doc_section(cls, field))))


def _doc_section(cls, field: str) -> str:
    """The text the config class's docstring gives ``field`` (up to the next documented field)."""
    doc = cls.__doc__ or ""
    m = re.search(rf"(?m)^(\s*){re.escape(field)} \(`", doc)
    if m is None:
        return ""
    rest = doc[m.end():]
    nxt = re.search(rf"(?m)^{m.group(1)}\w+ \(`", rest)  # the next documented field
    return rest[: nxt.start() if nxt else None]


_SUPPORTED = re.compile(r"(?i)supported values are ([-\d.,\s]*(?:and|or)?\s*[-\d.]+)")


def documented_list_entries(config) -> dict[str, list[float]]:
    """For the fields a config leaves an empty list whose docstring names the supported values
    (LW-DETR's ``projector_scale_factors``: "Supported values are 0.5, 1.0, and 2.0", default
    ``[]``, which gives its detector no feature level at all): one entry, 1 (no rescaling) when
    supported, else the first value named.  ``{field: [value]}``; empty when there is none."""
    out = {}
    for k, x in _values_of(config).items():
        if not (isinstance(x, (list, tuple)) and not x):
            continue
        m = _SUPPORTED.search(_doc_section(type(config), k))
        vals = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", m.group(1))] if m else []
        if vals:
            out[k] = [1.0 if 1.0 in vals else vals[0]]
    return out


def _fill_documented_layer_types(cls, vals: dict[str, Any], new: dict[str, Any], overrides: dict[str, Any]) -> None:
    """A per-layer type list (``*layer_types``) that the defaults leave ``None`` while the model
    indexes it per layer (DeepSeek-OCR-2's ``mlp_layer_types``): one entry per layer, cycling
    through the values the config's docstring names, the layer count raised to hold each once."""
    layer_key = next((k for k, x in new.items() if _LAYERS.search(k) and _int(x) and k == "num_hidden_layers"), None)
    for k, x in vals.items():
        if x is not None or not k.endswith("layer_types") or k in overrides or new.get(k) is not None:
            continue
        kinds = documented_values(cls, k)
        if not kinds or layer_key is None:
            continue
        new[layer_key] = max(new[layer_key], len(kinds))
        new[k] = [kinds[i % len(kinds)] for i in range(new[layer_key])]


class _Captured(Exception):
    """Raised by the stand-in of timm's ``build_model_with_cfg``: the arguments were recorded."""


def timm_architecture_args(architecture: str) -> dict[str, Any]:
    """The constructor arguments of timm model ``architecture``: the ``__init__`` defaults of the
    class its registered entry point builds, updated with the keyword arguments the entry point
    passes to timm's ``build_model_with_cfg`` (recorded by a stand-in that builds nothing).  Only
    plain values (numbers, strings, tuples / lists of them) are kept.  ``{}`` when timm is not
    installed or does not register ``architecture``."""
    import importlib.util
    import inspect
    import sys

    if importlib.util.find_spec("timm") is None:
        return {}
    try:
        import timm
        from timm.models import _builder

        entry = timm.models.model_entrypoint(architecture.split("/")[-1].split(".")[0])
    except Exception:  # noqa: BLE001 - an unknown name, or a timm that does not import
        return {}
    got: dict[str, Any] = {}
    gen_args: dict[str, Any] = {}
    entry_code = getattr(entry, "__code__", None)

    def stand_in(model_cls, variant, pretrained, *args, **kwargs):
        got.update(kwargs, _class=model_cls)
        # the parameters of the generator functions between the entry point and the builder
        # (``_gen_mobilenet_v5(variant, channel_multiplier=1.0, …)``): keywords the entry point
        # passes on, which the model class never sees
        frame = inspect.currentframe().f_back
        while frame is not None and frame.f_code is not entry_code:
            code = frame.f_code
            for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
                if n not in ("variant", "pretrained") and n in frame.f_locals:
                    gen_args.setdefault(n, frame.f_locals[n])
            frame = frame.f_back
        raise _Captured

    original = _builder.build_model_with_cfg
    patched = [m for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("timm.")
               and getattr(m, "build_model_with_cfg", None) is original]
    for m in patched:
        m.build_model_with_cfg = stand_in
    try:
        entry(pretrained=False)
    except _Captured:
        pass
    except Exception:  # noqa: BLE001 - an entry point that needs more than its defaults
        return {}
    finally:
        for m in patched:
            m.build_model_with_cfg = original
    cls = got.pop("_class", None)
    if cls is None:
        return {}
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        params = ()
    out = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    out.update(gen_args)
    out.update(got)

    def plain(x):
        return (isinstance(x, (int, float, str)) or x is None
                or (isinstance(x, (list, tuple)) and all(isinstance(e, (int, float, str)) for e in x)))

    return {k: x for k, x in out.items() if plain(x)}


def timm_model_args(architecture: str, given: dict[str, Any] | None, level: int) -> dict[str, Any]:
    """``model_args`` for a tiny timm ``architecture`` (as transformers' own tests shrink a
    ``TimmWrapperConfig``: ``embed_dim``, ``depth``, ``img_size`` …): its constructor arguments
    (:func:`timm_architecture_args`, with the ``given`` ones over them) shrunk by the same rules
    as config fields; only the arguments the rules change are returned, over ``given``."""
    given = dict(given or {})
    full = {**timm_architecture_args(architecture), **given}
    if not full:
        return given
    small = shrink_values(full, level)
    # stage widths already below the tiny width stay (RepViT-M1's ``embed_dim = (48, 96, 192,
    # 384)``): scaled up, they would no longer match the channel counts that the model around the
    # backbone declares for its features (EdgeTAM's ``backbone_channel_list``)
    for k, x in full.items():
        y = small.get(k)
        if _ints(x) and _ints(y) and len(x) == len(y) and any(b > a for a, b in zip(x, y)):
            small[k] = x
    # the width multiplier of a timm generator (MobileNet's α, Howard et al. 2017): the channels
    # of every stage, which the generator writes into the block definitions it passes the class
    for k, x in full.items():
        if level < 2 and k == "channel_multiplier" and isinstance(x, float) and x > TIMM_WIDTH_MULTIPLIER:
            small[k] = TIMM_WIDTH_MULTIPLIER
    return {**given, **{k: x for k, x in small.items() if k in given or not _same_value(x, full.get(k))}}


#: multimodal RoPE sections (temporal, height, width) of Qwen2-VL's released checkpoints (Wang et
#: al. 2024, "Qwen2-VL"): the split given to a section the modeling code reads without a default
M_ROPE_SECTION = (16, 24, 24)


@functools.lru_cache(maxsize=None)
def code_section_defaults(config_module: str) -> dict[str, tuple[int, ...]]:
    """Rope sections the modeling code takes as literal defaults when the config has none:
    ``config.rope_parameters.get("mrope_section", [8, 12, 12])`` in GLM-4V; a section it reads
    without a default (``rope_parameters.get("mrope_section")``, then ``len()`` of it) gets
    :data:`M_ROPE_SECTION`.  Read from the source of the ``modeling_*`` module next to
    ``config_module`` (parsed, not imported)."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec(config_module.replace(".configuration_", ".modeling_"))
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except Exception:  # noqa: BLE001 - no modeling module beside the config: nothing to read
        return {}
    found: dict[str, tuple[int, ...]] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 1 and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and _SECTION.search(node.args[0].value)):
            # read without a default (HunYuanVL's rotary embedding takes len() of it in every
            # forward): three axes in Qwen2-VL's proportions
            found.setdefault(node.args[0].value, M_ROPE_SECTION)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and _SECTION.search(node.args[0].value)
                and isinstance(node.args[1], (ast.List, ast.Tuple))):
            try:
                parts = ast.literal_eval(node.args[1])
            except ValueError:
                continue
            if _ints(list(parts)):
                found.setdefault(node.args[0].value, tuple(parts))
    return found


@functools.lru_cache(maxsize=None)
def code_layer_kinds(config_module: str) -> tuple[str, ...]:
    """The per-layer kinds (``layer_types`` values) the modeling code next to ``config_module``
    builds attention masks for: the string keys of its mask mapping, a dict literal with a
    ``"full_attention"`` key (``{"full_attention": create_causal_mask(…), "conv": …}`` in
    LFM2-MoE), in source order; empty when there is none.  Parsed, not imported."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec(config_module.replace(".configuration_", ".modeling_"))
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except Exception:  # noqa: BLE001 - no modeling module beside the config: nothing to read
        return ()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and len(node.keys) > 1 and all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            keys = tuple(k.value for k in node.keys)
            if "full_attention" in keys:
                return keys
    return ()


def _with_code_sections(cls, vals: dict[str, Any]) -> dict[str, Any]:
    """``vals`` with the code's default rope sections (:func:`code_section_defaults`) written into
    ``rope_parameters``, rescaled to the shrunk rotary dim (:data:`HEAD_DIM` × the partial rotary
    factor): the literal fits the released checkpoints' head dim, not the tiny one."""
    rope = vals.get("rope_parameters")
    if not isinstance(rope, dict) or not all(isinstance(k, str) for k in rope):
        return vals
    missing = {k: d for k, d in code_section_defaults(cls.__module__).items() if k not in rope}
    if not missing:
        return vals
    half = int(HEAD_DIM * _partial_rotary(vals)) // 2
    missing = {k: parts for k, parts in missing.items() if half >= len(parts)}  # one frequency each at least
    if not missing:
        return vals
    rope = dict(rope)
    for k, parts in missing.items():
        rope[k] = _rescale_sum(list(parts), half)
    return {**vals, "rope_parameters": rope}


def _same_value(a, b) -> bool:
    try:
        return bool(a == b) if not (_is_config(a) or _is_config(b)) else a is b
    except Exception:  # noqa: BLE001 - values without a boolean equality (tensors)
        return a is b


def _revert_order(k: str, x) -> int:
    """Which shrunk fields to give back first when the config class rejects the shrunk values:
    the cheap ones (windows, positions, token ids, lists, counts) before widths / heads / layers /
    vocab, and nested configs last."""
    if _is_config(x):
        return 3
    if any(rx.search(k) for rx in (_WIDTH, _WIDTH_LIST, _FFN, _HEADS, _KV_HEADS, _HEAD_DIM, _VOCAB)):
        return 2
    if _LAYERS.search(k) or isinstance(x, (list, tuple)):
        return 1
    return 0


def _construct(cls, vals: dict[str, Any], new: dict[str, Any], overrides: dict[str, Any],
               partial: dict[str, Callable[[], Any]] | None = None):
    """``cls(**new)``; when the class's validators reject the shrunk values, the shrinking is
    given back per field instead of per level: first each nested config in ``partial`` at its
    partly shrunk value (made by the callable: all but its vocab), then each shrunk field alone at its original
    value (cheapest first), then greedily: all shrunk fields at their original values, each
    shrink re-applied when the class still accepts it.

    Raises:
        the class's own error when not even the original values are accepted.
    """
    try:
        return cls(**new)
    except Exception as first:  # noqa: BLE001
        error = first
    amap = getattr(cls, "attribute_map", {}) or {}
    fixed = {amap.get(k, k) for k in overrides}
    changed = sorted((k for k in new if k in vals and k not in fixed and not _same_value(new[k], vals[k])),
                     key=lambda k: _revert_order(k, vals[k]))

    def attempt(values):
        try:
            return cls(**values)
        except Exception:  # noqa: BLE001
            return None

    for k, make in (partial or {}).items():
        try:
            made = attempt({**new, k: make()})
        except Exception:  # noqa: BLE001 - the nested config cannot be built so
            made = None
        if made is not None:
            return made
    for k in changed:
        made = attempt({**new, k: vals[k]})
        if made is not None:
            return made
    base = {**new, **{k: vals[k] for k in changed}}
    made = attempt(base)
    if made is None:
        raise error
    for k in sorted(changed, key=lambda k: -_revert_order(k, vals[k])):
        trial = {**base, k: new[k]}
        m = attempt(trial)
        if m is not None:
            base, made = trial, m
    return made


_MISSING_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def _config_tree(config) -> list[Any]:
    """``config`` and its nested configs, breadth first."""
    out, queue = [], [config]
    while queue:
        c = queue.pop(0)
        if any(c is o for o in out):
            continue
        out.append(c)
        queue += [x for x in vars(c).values() if _is_config(x)]
    return out


def fill_missing_attribute(config, exc: BaseException) -> str | None:
    """Repair a config tree that a model reads an attribute from which the config lacks
    (``AttributeError: 'T5Gemma2TextConfig' object has no attribute 'dropout_rate'``): a parent
    config's ``__post_init__`` writes such attributes into its sub-configs, so a sub-config built
    on its own, or a composite whose defaults skip it, lacks them.  The value is the one another
    config of the tree holds (what the parent would have written), else the default of the
    same-named field of another config class of the model's package (parents, which declare
    ``sub_configs``, first), shrunk by the same rules (the parent class's ``dropout_rate``), else the entry of that name in a ``rope_parameters``
    dict of the tree (DBRX's ``rope_theta``), else, for a feed-forward size (:data:`_FFN`), the
    tiny one.  The attribute is set on every
    config of the tree of the named class; returns ``"Class.attribute"``, or None when the error
    is not a missing config attribute or no value is found."""
    import importlib
    import sys

    m = _MISSING_ATTRIBUTE.search(str(exc))
    if not isinstance(exc, AttributeError) or m is None:
        return None
    cname, attr = m.groups()
    tree = _config_tree(config)
    targets = [c for c in tree if type(c).__name__ == cname and not hasattr(c, attr)]
    if not targets:
        return None
    value, found = None, False
    for c in tree:  # the (shrunk) value another config of the tree holds
        if type(c).__name__ != cname and attr in vars(c):
            value, found = vars(c)[attr], True
            break
    mod_name = type(targets[0]).__module__
    try:
        mod = sys.modules.get(mod_name) or importlib.import_module(mod_name)
    except Exception:  # noqa: BLE001
        mod = None
    classes = list(vars(mod).values()) if mod is not None and not found else []
    classes.sort(key=lambda o: not getattr(o, "sub_configs", None))  # parent configs first
    for obj in classes:
        if (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == mod_name
                and obj is not type(targets[0])):
            fld = next((f for f in dataclasses.fields(obj) if f.name == attr), None)
            if fld is not None and fld.default is not dataclasses.MISSING:
                value, found = shrink_values({attr: fld.default})[attr], True
                break
    if not found:
        for c in tree:
            rope = getattr(c, "rope_parameters", None)
            if isinstance(rope, dict) and attr in rope:
                value, found = rope[attr], True
                break
    if not found and _FFN.search(attr):
        # a feed-forward size the model reads that no config of its package declares (a config
        # that lost the field its modeling code still reads): the tiny feed-forward size
        value, found = FFN, True
    if not found:
        return None
    for c in targets:
        setattr(c, attr, value)
    return f"{cname}.{attr}"


def repair_misspelled_fields(config) -> list[str]:
    """Move, in place, the values a config tree holds under a misspelled field name to the field
    the class declares (EdgeTAM's default backbone ``TimmWrapperConfig(archirecture="repvit_m1")``
    leaves ``architecture`` at its default, ``resnet50``, whose channels its neck does not take):
    an attribute the class does not declare whose name is a close match of exactly one declared
    field (``difflib`` ratio ≥ 0.9: one letter off in a long name), that field still holding the
    class's default and the stray value of the same type but different.  Returns the repairs
    (``"TimmWrapperConfig.archirecture → architecture"``)."""
    import difflib

    done = []
    for c in _config_tree(config):
        cls = type(c)
        if not dataclasses.is_dataclass(cls):
            continue
        defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        for k, x in list(vars(c).items()):
            if k.startswith("_") or k in defaults or hasattr(cls, k) or _is_config(x):
                continue
            near = difflib.get_close_matches(k, list(defaults), n=2, cutoff=0.9)
            if len(near) != 1:
                continue
            f = near[0]
            cur = getattr(c, f, None)
            if cur == defaults[f] and x != cur and type(x) is type(cur):
                setattr(c, f, x)
                done.append(f"{cls.__name__}.{k} → {f}")
    return done


def fill_unset_windows(config, overrides: dict[str, Any] | None = None) -> list[str]:
    """Set, in place, the attention window fields (``sliding_window``, ``attention_chunk_size``,
    …) that a config tree leaves ``None`` to :data:`WINDOW`, for models whose forward needs a
    window even when the defaults declare none (a decoder that builds its sliding-window mask for
    every forward).  Fields named in ``overrides`` are left alone.  Returns the fields set
    (``"TextConfig.sliding_window = 4"``); empty when there is none."""
    return _fill_unset_named(config, _WINDOW, WINDOW, overrides)


def _fill_unset_named(config, pattern: re.Pattern, value: Any, overrides: dict[str, Any] | None) -> list[str]:
    """Set, in place, every field of the config tree that is ``None`` and whose name matches
    ``pattern`` to ``value`` (fields named in ``overrides`` left alone); the fields set, as
    ``"ClassName.field = value"``."""
    done = []
    for c in _config_tree(config):
        for k, x in _values_of(c).items():
            if x is None and pattern.search(k) and k not in (overrides or {}):
                setattr(c, k, value)
                done.append(f"{type(c).__name__}.{k} = {value}")
    return done


#: clipping bounds of q / k / v activations (``clip_qkv``: OLMo, DBRX)
_CLIP = re.compile(r"(^|_)clip(_qkv|_value)?$")
#: the bound set where a forward clips with a bound its defaults leave unset (DBRX's released
#: checkpoints use 8); the tiny model's activations stay well inside it
CLIP = 8.0


def fill_unset_bounds(config, overrides: dict[str, Any] | None = None) -> list[str]:
    """Set, in place, the clipping bounds (``clip_qkv``) that a config tree leaves ``None`` to
    :data:`CLIP`, for models whose forward clips unconditionally (``x.clamp(min=-clip,
    max=clip)`` with both ``None`` raises).  Fields named in ``overrides`` are left alone.
    Returns the fields set (``"DbrxAttentionConfig.clip_qkv = 8.0"``); empty when there is none."""
    return _fill_unset_named(config, _CLIP, CLIP, overrides)


def _optional_of(tp, kinds: tuple[type, ...]) -> bool:
    """Whether a dataclass field type is ``None`` or one of ``kinds`` (``int | None``, ``list |
    None``; not a union with other types), given as a type or as its string."""
    import typing

    names = {k.__name__ for k in kinds}
    if isinstance(tp, str):
        parts = {t.strip().split("[")[0] for t in tp.split("|")}
        return "None" in parts and bool(parts - {"None"}) and parts - {"None"} <= names
    args = typing.get_args(tp)
    rest = [typing.get_origin(a) or a for a in args if a is not type(None)]
    return len(args) > len(rest) and bool(rest) and all(a in kinds for a in rest)


def _field_types(c) -> dict[str, Any]:
    return {f.name: f.type for f in dataclasses.fields(type(c))} if dataclasses.is_dataclass(type(c)) else {}


def example_arguments(cls) -> dict[str, Any]:
    """The literal arguments the config class's docstring example constructs it with
    (``>>> configuration = TimmBackboneConfig("resnet50")`` → ``{"backbone": "resnet50"}``),
    positional ones named by the fields the class itself declares, in order (transformers'
    configs take keywords only: the example's positional argument means the class's first own
    field); ``{}`` when the example passes none or passes anything but literals."""
    import ast

    out: dict[str, Any] = {}
    fields = [k for k in vars(cls).get("__annotations__", {}) if not k.startswith("_")]
    for m in re.finditer(rf">>> .*?\b{re.escape(cls.__name__)}(\(.*\))\s*$", cls.__doc__ or "", re.M):
        try:
            call = ast.parse(f"f{m.group(1)}", mode="eval").body
            args = [ast.literal_eval(a) for a in call.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        except (SyntaxError, ValueError, TypeError):
            continue
        out.update({**dict(zip(fields, args)), **kwargs})
    return out


def fill_unset_documented(config, overrides: dict[str, Any] | None = None) -> list[str]:
    """Set, in place, the fields that a config tree leaves ``None`` although its model reads them
    unconditionally, to what the config class documents: a field its docstring example sets
    (:func:`example_arguments`: TimmBackbone's ``backbone``, the timm model name, set to
    ``"resnet50"`` by ``TimmBackboneConfig("resnet50")``) → that value; a field whose docstring quotes values
    (Granite 4 Vision's ``downsample_rate``: "e.g. `"1/4"` or `"3/8"`") → the first quoted value
    (:func:`documented_values`); a plain ``list | None`` field whose docstring quotes none (its
    ``deepstack_layer_map`` of optional ``[vision_layer, llm_layer]`` pairs) → an empty list, none
    of the optional entries.  Fields named in ``overrides`` are left alone.  Returns the fields set
    (``'Granite4VisionConfig.downsample_rate = "1/4"'``); empty when there is none."""
    done = []
    for c in _config_tree(config):
        types = _field_types(c)
        own = vars(type(c)).get("__annotations__", {})  # not the fields every PretrainedConfig has
        examples = None  # the docstring example's arguments, read once per config class
        for k, x in _values_of(c).items():
            if x is not None or k not in types or k not in own or k in (overrides or {}) or k.startswith("rope_"):
                continue
            if examples is None:
                examples = example_arguments(type(c))
            quoted = documented_values(type(c), k)
            example = examples.get(k)
            if example is not None:
                setattr(c, k, example)
                done.append(f"{type(c).__name__}.{k} = {example!r} (the docstring example's)")
            elif quoted and _optional_of(types[k], (str,)):
                setattr(c, k, quoted[0])
                done.append(f'{type(c).__name__}.{k} = "{quoted[0]}"')
            elif not quoted and _optional_of(types[k], (list,)):
                setattr(c, k, [])
                done.append(f"{type(c).__name__}.{k} = []")
    return done


#: the size given to an unset integer field of an optional module that no role rule names (an
#: indexer's block length): the smallest that is not degenerate
UNSET_SIZE = 2
#: a token budget of a sparse-attention indexer (how many keys each query keeps): every position
#: the tiny model holds (:data:`POSITIONS`), so the selection keeps every visible key and the
#: attention stays the dense causal one the checks expect — as DeepSeek-V3.2's released
#: ``index_topk = 2048`` does on any short input
_BUDGET = re.compile(r"(^|_)(budget|index_topk|topk_tokens)$")


def fill_unset_sizes(config, overrides: dict[str, Any] | None = None) -> list[str]:
    """Set, in place, the sizes of an optional attention module that a config tree leaves all
    ``None`` while a layer kind its defaults declare builds the module (Qwen4-Exp's QSA token
    indexer: ``indexer_n_heads``, ``indexer_kv_heads``, ``indexer_head_dim``, ``indexer_budget``,
    ``indexer_compress_ratio``, every one ``int | None = None``, for ``"indexed_attention"``
    layers).  A group is the ``int | None`` fields sharing a name prefix, all unset, at least one
    of them heads or a head dim: heads → :data:`HEADS`, KV heads → 1 (one head shared by all,
    which every head count admits), head dims → :data:`HEAD_DIM`, token budgets → :data:`POSITIONS`
    (every key kept: see :data:`_BUDGET`), other sizes → :data:`UNSET_SIZE`.  A group the config class's validators then reject is unset again, as is
    one with a field named in ``overrides``.  Returns the fields set
    (``"Qwen4ExpTextConfig.indexer_n_heads = 4"``); empty when there is none."""
    done = []
    for c in _config_tree(config):
        types, vals = _field_types(c), _values_of(c)
        groups: dict[str, list[str]] = {}
        for k, x in vals.items():
            if k in types and "_" in k and _optional_of(types[k], (int,)):
                groups.setdefault(k.split("_")[0], []).append(k)
        for keys in groups.values():
            if (len(keys) < 2 or any(vals[k] is not None or k in (overrides or {}) for k in keys)
                    or not any(_HEADS.search(k) or _HEAD_DIM.search(k) for k in keys)):
                continue
            for k in keys:
                setattr(c, k, 1 if _KV_HEADS.search(k) else HEADS if _HEADS.search(k)
                        else HEAD_DIM if _HEAD_DIM.search(k) else POSITIONS if _BUDGET.search(k) else UNSET_SIZE)
            try:
                if callable(getattr(c, "validate", None)):
                    c.validate()
            except Exception:  # noqa: BLE001 - the class's validators reject these sizes: unset again
                for k in keys:
                    setattr(c, k, None)
                continue
            done += [f"{type(c).__name__}.{k} = {getattr(c, k)}" for k in keys]
    return done


def fill_all_backbone_stages(config, overrides: dict[str, Any] | None = None) -> list[str]:
    """Set, in place, every backbone config of a tree (transformers' ``BackboneConfigMixin``:
    ``stage_names`` and ``out_features``) that returns one of several stages to return every
    stage after the stem, for models whose neck or head consumes all of them while the backbone's
    defaults return only its last (``out_features`` unset → ``[stage_names[-1]]``; UVDoc's head
    concatenates its six bridge stages).  Left alone when ``out_features`` or ``out_indices`` is
    overridden.  Returns the fields set (``"UVDocBackboneConfig.out_features = [...]"``)."""
    if {"out_features", "out_indices"} & set(overrides or {}):
        return []
    done = []
    for c in _config_tree(config):
        names, out = getattr(c, "stage_names", None), getattr(c, "out_features", None)
        if not isinstance(names, (list, tuple)) or len(names) < 2 or not isinstance(out, list):
            continue
        every = list(names[1:])
        if len(out) == 1 < len(every):  # the default of an unset out_features: the last stage alone
            c.out_features = every
            done.append(f"{type(c).__name__}.out_features = {every}")
    return done


def declared_sub_configs(config):
    """``config`` rebuilt with each sub-config whose model type differs from the one its class
    declares for it (``sub_configs_defaults``: a ``SubConfigSpec`` of a model type and init
    kwargs) built from that declaration instead: PP-OCRv6-small-det declares a PP-LCNetV3
    backbone returning four stages, while its ``__post_init__`` builds a default PP-LCNetV4
    (a text-recognition backbone) when none is given.  Returns ``(config, changes)``; the
    config itself and ``[]`` when none differs or the rebuilt config cannot be made."""
    import transformers as tf

    specs = getattr(type(config), "sub_configs_defaults", None) or {}
    subs, changes = {}, []
    for k, spec in specs.items():
        want, have = getattr(spec, "model_type", None), getattr(getattr(config, k, None), "model_type", None)
        if isinstance(want, str) and want and have is not None and have != want:
            try:
                subs[k] = tf.AutoConfig.for_model(want, **(getattr(spec, "init_kwargs", None) or {}))
            except Exception:  # noqa: BLE001 - the declared sub-config cannot be built
                continue
            changes.append(f"{type(config).__name__}.{k} = {type(subs[k]).__name__} (declared; default {have})")
    if not subs:
        return config, []
    try:
        return type(config)(**{**_values_of(config), **subs}), changes
    except Exception:  # noqa: BLE001
        return config, []


_CHANNELS = re.compile(r"channels$")


def tie_stage_channels(config, channels: list[int]) -> list[str]:
    """Set, in place, the per-stage channel lists of a composite config (PP-OCRv6's
    ``layer_list_out_channels``: the widths its neck expects of each backbone stage) to the
    ``channels`` its backbone returns (``BackboneMixin.channels``, one per returned stage), where a
    list has one entry per returned stage but other widths.  Backbone configs (``stage_names``)
    are left alone.  Returns the fields set; empty when there is none."""
    done = []
    for c in _config_tree(config):
        if getattr(c, "stage_names", None) is not None:
            continue
        for k, x in _values_of(c).items():
            if (_CHANNELS.search(k) and isinstance(x, (list, tuple)) and len(x) == len(channels) > 1
                    and _ints(x) and list(x) != list(channels)):
                setattr(c, k, _same_type(x, list(channels)))
                done.append(f"{type(c).__name__}.{k} = {list(channels)}")
    return done


def _plain_dict_field(tp) -> bool:
    """Whether a dataclass field type is a plain mapping or ``None`` (``dict | None``; a config or
    a union with other types is not)."""
    import typing

    if isinstance(tp, str):
        parts = {t.strip() for t in tp.split("|")}
        return "None" in parts and bool(parts - {"None"}) and all(t == "dict" or t.startswith("dict[")
                                                                 for t in parts - {"None"})
    args = typing.get_args(tp)
    rest = [a for a in args if a is not type(None)]
    return len(args) > len(rest) and bool(rest) and all(a is dict or typing.get_origin(a) is dict for a in rest)


def fill_unset_mappings(config, overrides: dict[str, Any] | None = None) -> list[str]:
    """Set, in place, the plain ``dict | None`` fields that a config tree leaves ``None`` (not
    ``rope_parameters``) to an empty dict, for models that look entries up in them unconditionally
    (Chameleon: ``vocabulary_map.get("<image>")``, the tokenizer's vocabulary, for its image
    tokens; a text-only forward needs none).  Fields named in ``overrides`` are left alone.
    Returns the fields set (``"ChameleonConfig.vocabulary_map = {}"``); empty when there is none."""
    done = []
    for c in _config_tree(config):
        types = {f.name: f.type for f in dataclasses.fields(type(c))} if dataclasses.is_dataclass(type(c)) else {}
        for k, x in _values_of(c).items():
            if (x is None and k in types and _plain_dict_field(types[k]) and not k.startswith("rope_")
                    and k not in (overrides or {})):
                setattr(c, k, {})
                done.append(f"{type(c).__name__}.{k} = {{}}")
    return done


def keep_widths_distinct(original, config, overrides: dict[str, Any] | None = None) -> list[str]:
    """Set, in place, the widths and feed-forward sizes of the shrunk ``config`` tree that the
    shrink made equal though they differ in ``original`` (the same tree at full size) to the
    shrunk value × their original ratio to the smallest of them, when that ratio is an integer:
    a model may branch on two sizes being equal (OmDet-Turbo builds its ``task_project`` only
    when ``class_embed_dim != decoder_hidden_dim``, and reads it always), a path the original
    never takes.  Equal originals keep equal values, so the tree's ties hold.  Fields named in
    ``overrides`` are left alone.  Returns the fields set (``"OmDetTurboConfig.class_embed_dim:
    64 → 128"``); empty when no shrunk sizes collide."""
    pairs = []  # (shrunk config, field, original value, shrunk value)

    def walk(o, c):
        for k, x in _values_of(o).items():
            y = getattr(c, k, None)
            if _is_config(x) and _is_config(y):
                walk(x, y)
            elif (_int(x) and _int(y) and x >= HIDDEN and (_WIDTH.search(k) or _FFN.search(k))
                    and k not in (overrides or {})):
                pairs.append((c, k, x, y))

    walk(original, config)
    groups: dict[int, set[int]] = {}
    for _, _, x, y in pairs:
        groups.setdefault(y, set()).add(x)
    done = []
    for c, k, x, y in pairs:
        low = min(groups[y])
        if len(groups[y]) > 1 and x != low and x % low == 0:
            setattr(c, k, y * (x // low))
            done.append(f"{type(c).__name__}.{k}: {y} → {y * (x // low)}")
    return done


_MATMUL_WIDTHS = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_CAT_WIDTHS = re.compile(r"Sizes of tensors must match except in dimension \d+\. "
                         r"Expected size (\d+) but got size (\d+)")


def fill_fed_width(config, exc: BaseException | None, overrides: dict[str, Any] | None = None) -> list[str]:
    """Repair, in place, a config tree whose own defaults disagree on a width, from the error of
    the forward they give:

    - a linear layer sized by a config field is fed rows of another width (``mat1 and mat2 shapes
      cannot be multiplied (8x256 and 128x64)``: Llama 4's vision defaults give ``hidden_size``
      768, whose pixel shuffle by 0.5 makes 4 × 768 = 3072 channels, but ``intermediate_size``
      5632 sizes the projector that reads them): the field holding the layer's input width takes
      the width that reaches it;
    - two tensors concatenated along the sequence differ in width (``Sizes of tensors must match
      except in dimension 1. Expected size 896 but got size 64``: DeepSeek-OCR 2's SAM neck ends
      at 896 channels, ``downsample_channels[-1]``, but its default encoder is 4096 wide): the
      field holding the first tensor's width takes the second's.

    The field (a width, feed-forward size or channel count of at least :data:`HIDDEN`, or an entry
    of such a list; not in ``overrides``) must be the only one of the tree holding that value; when it is not, the only
    field holding the other width takes the first (Unlimited-OCR's SAM neck, left at 1024
    channels, feeds its shrunk 64-wide CLIP encoder).  Returns the field set
    (``"Llama4VisionConfig.intermediate_size: 128 → 256"``); empty when the error is no such
    mismatch or the field is not unique."""
    m = _MATMUL_WIDTHS.search(str(exc)) if isinstance(exc, RuntimeError) else None
    if m is not None:
        fed, want = int(m.group(2)), int(m.group(3))
    elif isinstance(exc, RuntimeError) and (m := _CAT_WIDTHS.search(str(exc))) is not None:
        want, fed = int(m.group(1)), int(m.group(2))
    else:
        return []
    if fed == want or fed <= 0:
        return []

    def sized(k: str) -> bool:
        return bool(_WIDTH.search(k) or _FFN.search(k) or _WIDTH_LIST.search(k)
                    or (_DIM_NAME.search(k) and not _NOT_DIM.search(k)))

    def holders(v: int) -> list[tuple[Any, str, int | None]]:
        if v < HIDDEN:  # an input's channel count (3 colours), not a width
            return []
        return [(c, k, i) for c in _config_tree(config) for k, x in _values_of(c).items()
                if sized(k) and k not in (overrides or {})
                for i in ([None] if _int(x) and x == v else
                          [j for j, e in enumerate(x) if e == v] if _ints(x) else [])]

    hits = holders(want)
    if len(hits) != 1:  # else the one field sizing the other side (a tower left at full width)
        hits, want, fed = holders(fed), fed, want
        if len(hits) != 1:
            return []
    c, k, i = hits[0]
    if i is None:
        setattr(c, k, fed)
        return [f"{type(c).__name__}.{k}: {want} → {fed}"]
    x = list(getattr(c, k))
    x[i] = fed
    setattr(c, k, _same_type(getattr(c, k), x))
    return [f"{type(c).__name__}.{k}[{i}]: {want} → {fed}"]


#: the rotary base of RoPE (Su et al. 2021, "RoFormer"), for a layer type a config gives no parameters
ROPE_THETA = 10000.0


def fill_missing_layer_rope(config, exc: BaseException) -> str | None:
    """Repair a config tree whose model looks up per-layer-type rotary parameters
    (``config.rope_parameters[layer_type]``) that its defaults leave out (``KeyError:
    'full_attention'``: an empty ``rope_parameters`` the checkpoint fills): the layer type gets
    default RoPE with the base of another entry of the dict, else :data:`ROPE_THETA`.  Returns
    ``"Class.rope_parameters[type]"``, or None when the error is not such a lookup."""
    if not isinstance(exc, KeyError) or len(exc.args) != 1 or not isinstance(exc.args[0], str):
        return None
    key = exc.args[0]
    for c in _config_tree(config):
        rope, types = getattr(c, "rope_parameters", None), getattr(c, "layer_types", None)
        if isinstance(rope, dict) and isinstance(types, (list, tuple)) and key in types and key not in rope:
            theta = next((d["rope_theta"] for d in rope.values() if isinstance(d, dict)
                          and isinstance(d.get("rope_theta"), (int, float))), ROPE_THETA)
            rope[key] = {"rope_type": "default", "rope_theta": float(theta)}
            return f"{type(c).__name__}.rope_parameters[{key!r}]"
    return None


def consistent(config) -> list[str]:
    """Problems of a (shrunk) config: query heads not dividing the width, KV heads not dividing
    the query heads, a rotary dim larger than the head dim.  Empty when consistent."""
    vals = _values_of(config)
    probs = []
    heads = next((x for k, x in vals.items() if _HEADS.search(k) and _int(x) and x > 0), None)
    kv = next((x for k, x in vals.items() if _KV_HEADS.search(k) and _int(x) and x > 0), None)
    width = next((x for k, x in vals.items() if _WIDTH.search(k) and _int(x) and x > 0), None)
    head_dim = next((x for k, x in vals.items() if _HEAD_DIM.search(k) and _int(x) and x > 0), None)
    rope = next((x for k, x in vals.items() if _ROPE_DIM.search(k) and _int(x) and x > 0), None)
    if heads and kv and heads % kv:
        probs.append(f"{kv} KV heads do not divide {heads} heads")
    if heads and width and head_dim is None and width % heads:
        probs.append(f"{heads} heads do not divide width {width}")
    if rope and head_dim and rope > head_dim and not any(_NOPE_DIM.search(k) for k in vals):
        probs.append(f"rotary dim {rope} > head dim {head_dim}")
    for k, x in vals.items():
        if _is_config(x):
            probs += [f"{k}.{p}" for p in consistent(x)]
    return probs


__all__ = ["LEVELS", "RESERVED_TOP", "VOCAB", "consistent", "config_fields", "declared_sub_configs",
           "documented_list_entries", "fill_all_backbone_stages", "fill_fed_width", "fill_missing_attribute",
           "fill_missing_layer_rope", "fill_unset_bounds", "fill_unset_documented", "fill_unset_mappings",
           "fill_unset_sizes", "fill_unset_windows", "keep_widths_distinct", "shrink_config", "tie_stage_channels",
           "shrink_values"]
