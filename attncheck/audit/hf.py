"""transformers models for the audit: the right class, inputs and expectations for any model type.

:func:`build_hf` builds a tiny random-weight model of any transformers model type (or model class)
from its own default config, shrunk by :func:`attncheck.audit.shrink.shrink_config`, and wraps it
in an :class:`~attncheck.audit.model.AuditModel`:

- the class comes from transformers' own auto mappings: encoder-decoder models from
  ``MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING`` (text) or ``MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING``
  (speech); masked LMs from ``MODEL_FOR_MASKED_LM_MAPPING`` (bidirectional); decoders from
  ``MODEL_FOR_CAUSAL_LM_MAPPING``; multimodal LMs from ``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING`` /
  ``MODEL_FOR_MULTIMODAL_LM_MAPPING`` (run on text); everything else from ``MODEL_MAPPING``;
  types outside the mappings (sub-config towers) get the model of their own package built from
  their config type (:func:`config_module_classes`);
- the inputs follow the forward signature and the config: ``input_ids`` (tokens), images, clips
  and ``grid_thw`` patch sequences (:func:`_dense_variants`), waveforms and spectrograms
  (:func:`_audio_candidates`), time series (``past_values``); each layout is tried until a forward
  accepts it; a joint model that also needs images (CLIP, BLIP) gets a fixed image next to the
  checked ``input_ids``, layout models boxes per token (:func:`token_boxes`); encoder-decoder
  models check the decoder sequence (``decoder_input_ids``) with a fixed encoder input (tokens,
  tokens with boxes, an image, or audio for speech models);
- a shrunk config that cannot be built or run is retried with less shrinking
  (:data:`~attncheck.audit.shrink.LEVELS`); a type that still fails is :class:`Unsupported`,
  with the reason.

Expectations are read from the model, not from tables: the expected softmax scale of each
attention map is the ``scaling`` / ``scale`` / ``softmax_scale`` attribute of the attention module
that made the call (else ``1/√d`` with d the observed q·k width), heads / KV heads per module, the
position-id convention from the model's own default (:func:`own_position_ids`), sliding windows
and per-layer types from the config.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
import re
from collections.abc import Callable
from typing import Any

import torch

from attncheck.audit.model import AuditModel, Forward
from attncheck.audit.shrink import (HIDDEN, LEVELS, RESERVED_TOP, declared_sub_configs, documented_list_entries,
                                    fill_all_backbone_stages, fill_fed_width, fill_missing_attribute,
                                    fill_missing_layer_rope, fill_unset_bounds, fill_unset_documented,
                                    fill_unset_mappings, fill_unset_sizes, fill_unset_windows, keep_widths_distinct,
                                    narrower_dims, repair_misspelled_fields, shrink_config, tie_stage_channels)

SEQ_LEN = 12
ENC_LEN = 7
#: a shrunk model larger than this is not built (the next level, or unsupported)
MAX_PARAMS = 40_000_000
#: ids below this are left to special tokens (pad / bos / eos); random inputs are drawn above
LOW_IDS = 4
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16}


class Unsupported(RuntimeError):
    """The model type cannot be built tiny or run with the inputs the audit knows (the reason)."""


class NeedsParent(Unsupported):
    """A config that only configures submodules of a parent model (``classes``: the ``nn.Module``
    classes built from it, outermost first)."""

    def __init__(self, reason: str, classes: list[type]) -> None:
        super().__init__(reason)
        self.classes = classes


# ------------------------------------------------------------------------------------------------
# choosing the class
# ------------------------------------------------------------------------------------------------
def _mapping(name: str) -> dict:
    from transformers.models.auto import modeling_auto as ma

    return getattr(ma, name, {}) or {}


def _auto_class(mapping_name: str, config):
    """The model class registered for ``type(config)`` in transformers' ``mapping_name``."""
    import transformers as tf

    from transformers.models.auto import modeling_auto as ma

    lazy = getattr(ma, mapping_name.replace("_NAMES", ""), None)
    if lazy is None:
        return None
    try:
        return lazy[type(config)]
    except (KeyError, ValueError):  # ValueError: a class registered by name that the package does not export
        names = getattr(ma, mapping_name, {}).get(config.model_type)
        if isinstance(names, (list, tuple)):
            names = names[0]
        if not isinstance(names, str):
            return None
        return getattr(tf, names, None) or _modeling_class(config, names)


def _modeling_class(config, name: str):
    """The class ``name`` of the config's own modeling module (``configuration_x`` → ``modeling_x``),
    where transformers registers a class its package leaves out of ``__all__``
    (``VoxtralRealtimeTextModel``, which ``VoxtralRealtimeModel`` builds); None when absent."""
    import importlib

    try:
        return getattr(importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_")),
                       name, None)
    except Exception:  # noqa: BLE001 - a modeling module that cannot be imported
        return None


def _model_class_of(config):
    """transformers' naming convention for towers not in the auto mappings (``CLIPTextConfig`` →
    ``CLIPTextModel``), looked up in the config's own modeling module, then the top level."""
    import transformers as tf

    name = type(config).__name__
    if not name.endswith("Config"):
        return None
    target = name[: -len("Config")] + "Model"
    cls = _modeling_class(config, target) or getattr(tf, target, None)
    if cls is None:
        # a config with no model class of its own: the class its docstring's example builds from
        # it (``model = VisionEncoderDecoderModel(config=config)`` in NougatConfig's)
        m = re.search(r"=\s*(\w+)\(\s*(?:config\s*=\s*)?config(?:uration)?\s*\)", type(config).__doc__ or "")
        cls = getattr(tf, m.group(1), None) if m else None
        own = getattr(cls, "config_class", None)
        if (isinstance(own, type) and not isinstance(config, own)
                and own.__module__.rpartition(".")[0] == type(config).__module__.rpartition(".")[0]):
            # the example builds a model of a sibling config of the same package (a text tower's
            # docstring copied from its parent: Qwen2.5-Omni's text config names the Thinker)
            cls = None
    usable = isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.forward is not torch.nn.Module.forward
    return cls if usable else None


def default_config(model_type: str):
    """``AutoConfig.for_model(model_type)``; where the class names a sub-config by a model type
    transformers registers under another spelling (NougatConfig's ``"donut_swin"`` for the
    registered ``"donut-swin"``), those sub-configs are built from the registered type and passed in.

    Raises:
        whatever the config class raises when that does not apply or does not help.
    """
    import transformers as tf
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    try:
        return tf.AutoConfig.for_model(model_type)
    except ValueError as exc:
        m = re.search(r"Unrecognized model type for subconfig: ([\w-]+)", str(exc))
        if m is None:
            raise
        norm = {t.replace("-", "_"): t for t in CONFIG_MAPPING_NAMES}
        known = norm.get(m.group(1).replace("-", "_"))
        if known is None:
            raise
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        cls = CONFIG_MAPPING[model_type]
        specs = getattr(cls, "sub_configs_defaults", None) or {}
        subs = {k: tf.AutoConfig.for_model(known) for k, spec in specs.items()
                if getattr(spec, "model_type", None) == m.group(1)}
        if not subs:
            raise
        return cls(**subs)


#: forward arguments the audit can make as the checked input (see :func:`_adapter`)
MAIN_INPUTS = ("input_ids", "pixel_values", "input_features", "input_values")


def _package_modules(config) -> list[Any]:
    """The modules of the config's model package that may define model classes (``modeling_*``
    and other code files; configuration, processing and tokenization modules are skipped)."""
    import importlib
    import pkgutil

    pkg_name = type(config).__module__.rpartition(".")[0]
    try:
        pkg = importlib.import_module(pkg_name)
    except Exception:  # noqa: BLE001
        return []
    skip = ("configuration_", "processing_", "tokenization_", "image_processing", "video_processing",
            "feature_extraction_", "convert_", "modular_")
    names = sorted((m.name for m in pkgutil.iter_modules(getattr(pkg, "__path__", []))),
                   key=lambda n: (not n.startswith("modeling_"), n))
    mods = []
    for n in names:
        if n.startswith(skip):
            continue
        try:
            mods.append(importlib.import_module(f"{pkg_name}.{n}"))
        except Exception:  # noqa: BLE001 - a module needing an optional library
            continue
    return mods


def _takes_config(cls, config_cls) -> bool:
    """Whether ``cls.__init__`` declares a ``config`` argument of type ``config_cls`` (also inside
    a union annotation, or a string annotation naming it)."""
    import typing

    try:
        p = inspect.signature(cls.__init__).parameters.get("config")
    except (TypeError, ValueError):
        return False
    if p is None:
        return False
    ann = p.annotation
    if isinstance(ann, str):
        return config_cls.__name__ in ann.replace("|", " ").replace(",", " ").split()
    return ann is config_cls or config_cls in typing.get_args(ann)


def _contains(outer, inner) -> bool:
    """Whether ``outer.__init__`` builds ``inner`` (its source names the class)."""
    import re

    try:
        src = inspect.getsource(outer.__init__)
    except (OSError, TypeError):
        return False
    return re.search(rf"\b{re.escape(inner.__name__)}\b", src) is not None


def _outermost_first(cands: list[type]) -> list[type]:
    """Candidates without the abstract bases of others, the ones that build most of the other
    candidates (directly or through one another: ``XForCausalLM`` ⊃ ``XModel`` ⊃ ``XDecoder``)
    first, then definition order."""
    cands = [c for c in cands if not any(o is not c and issubclass(o, c) for o in cands)]
    direct = {c: {o for o in cands if o is not c and _contains(c, o)} for c in cands}
    reach = {c: set(direct[c]) for c in cands}
    for _ in cands:  # transitive closure (a handful of classes)
        for c in cands:
            reach[c] |= {x for o in reach[c] for x in reach[o]} - {c}
    return sorted(cands, key=lambda c: -len(reach[c]))


def _required_inputs(cls) -> list[str]:
    """Forward arguments without a default (of a class or a built model)."""
    return [n for n, p in _params(cls).items() if n != "self"
            and p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def config_module_classes(config) -> tuple[list[type], list[type]]:
    """``(models, submodules)``: the classes of the config's model package built from this config
    type — ``PreTrainedModel`` subclasses whose ``config_class`` is ``type(config)``, and plain
    ``nn.Module`` classes whose ``__init__`` takes a ``config`` of that type — each list
    outermost first (:func:`_outermost_first`), those that take an input the audit can make
    (:data:`MAIN_INPUTS`) before the others.  Classes without a ``forward`` of their own are
    left out."""
    from transformers import PreTrainedModel

    ccls = type(config)
    models, subs, seen = [], [], set()
    for mod in _package_modules(config):
        for obj in vars(mod).values():
            if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)) or obj in seen:
                continue
            if not obj.__module__.startswith(ccls.__module__.rpartition(".")[0] + "."):
                continue
            seen.add(obj)
            if obj.forward is torch.nn.Module.forward and not encodes_images_only(obj):
                continue  # no forward of its own (a tokenizer exposing an ``encode`` of codes only)
            if issubclass(obj, PreTrainedModel):
                if getattr(obj, "config_class", None) is ccls:
                    models.append(obj)
            elif _takes_config(obj, ccls):
                subs.append(obj)

    def usable_first(cands):
        ordered = _outermost_first(cands)
        return sorted(ordered, key=lambda c: not any(k in _params(c) for k in MAIN_INPUTS))

    return usable_first(models), usable_first(subs)


def _class_from_config_module(model_type: str, config):
    """The model class for a type without an auto-mapping entry (:func:`config_module_classes`).

    Raises:
        Unsupported: the package defines no ``PreTrainedModel`` for the config (the reason names
            the ``nn.Module`` that takes it and the inputs its forward needs, if any).
    """
    models, subs = config_module_classes(config)
    own = [m for m in models if not encodes_images_only(m)]
    if own:
        return own[0]
    cname = type(config).__name__
    if subs and any(k in _params(subs[0]) for k in MAIN_INPUTS):
        return subs[0]  # a tower built as a plain nn.Module from its config (no PreTrainedModel)
    if models:
        return models[0]  # an image tokenizer run through encode (no tower of its own takes the config)
    if subs:
        c = subs[0]
        need = _required_inputs(c)
        raise NeedsParent(f"no model class for {model_type!r}: {cname} configures {c.__name__}, a submodule "
                          f"(not a PreTrainedModel) whose forward needs {', '.join(need) or 'no tensor input'}"
                          " — inputs made by its parent model", subs)
    raise NeedsParent(f"no model class for {model_type!r}: not in transformers' auto mappings and no class of "
                      f"its package is built from a {cname} alone", [])


def choose_class(model_type: str, config, cls=None) -> tuple[str, Any]:
    """``(kind, model class)`` for a model type, from transformers' auto mappings.

    kind: ``"seq2seq"``, ``"speech-seq2seq"``, ``"encoder"`` (bidirectional by design: masked
    LM), ``"decoder"`` (causal LM), ``"vision"``, ``"audio"``, ``"series"`` (time series:
    ``past_values``), ``"text"`` (a base model whose
    causality is not declared by a mapping).
    """
    order = [("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
             ("seq2seq", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
             ("encoder", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
             ("decoder", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
             ("decoder", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
             ("decoder", "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES")]
    enc_dec = bool(getattr(config, "is_encoder_decoder", False)
                   or getattr(_text_config(config), "is_encoder_decoder", False))
    if cls is None:
        for kind, mname in order:
            if kind.endswith("seq2seq") and not enc_dec:
                continue
            if model_type in _mapping(mname):
                c = _auto_class(mname, config)
                if c is not None and kind == "decoder" and enc_dec and "decoder_input_ids" in _params(c):
                    return "seq2seq", c  # a multimodal model around an encoder-decoder (Florence-2)
                if c is not None:
                    return kind, c
        cls = (_auto_class("MODEL_MAPPING_NAMES", config) or _model_class_of(config)
               or _class_from_config_module(model_type, config))
    if encodes_images_only(cls):  # run through ``encode`` on an image (or image latents)
        return "vision", cls
    main = getattr(cls, "main_input_name", "input_ids")
    if isinstance(main, (list, tuple)):  # several main inputs (OneFormer): the first
        main = main[0] if main else "input_ids"
    n = cls.__name__
    params = _params(cls)
    # images, or clips (pixel_values_videos); a tower whose first required argument is the image
    pixels = (any(k.startswith("pixel_values") for k in params) or "flattened_patches" in params
              or _required_inputs(cls)[:1] in (["image"], ["images"]))
    # a main_input_name inherited from the package's image model does not make a text tower
    # (its forward takes input_ids and no pixels) a vision model
    inherited = main == "pixel_values" and "input_ids" in params and not pixels
    # an audio-visual tower that declares its audio input main (PE audio-video) is an audio model,
    # as is one whose declared main input is a mel spectrogram under another name (``audio_mel``)
    audio_main = (main in ("input_features", "input_values") or re.search(r"(^|_)mel($|_)", main)) and main in params
    if audio_main and "input_ids" not in params and main not in ("input_features", "input_values"):
        return "audio", cls
    if (main == "pixel_values" and not inherited) or ("input_ids" not in params and not audio_main
                                                       and (pixels or _grid_param(params) is not None)):
        return "vision", cls
    if "past_values" in params and "input_ids" not in params:
        return "series", cls
    if main in ("input_features", "input_values") and any(k in params for k in ("input_features", "input_values")):
        if enc_dec and "decoder_input_ids" in params:
            return "speech-seq2seq", cls
        return "audio", cls
    if enc_dec and "decoder_input_ids" in params:
        return "seq2seq", cls
    if "CausalLM" in n or "LMHeadModel" in n:
        return "decoder", cls
    if "MaskedLM" in n:
        return "encoder", cls
    return "text", cls


def _audio_tensor_argument(model: torch.nn.Module) -> str | None:
    """The forward argument that takes a mono waveform ``(B, 1, samples)`` in a built model whose
    declared main input is audio (``main_input_name`` ``input_values`` / ``input_features``) but
    whose forward takes neither name (VibeVoice's acoustic tokenizer encoder names its waveform
    ``hidden_states``): its only required argument, naming no ids, embeddings or mask, when the
    model's first layer with weights is a 1-d convolution over one input channel.  None otherwise
    (the decoder of the same tokenizer inherits the main input name but takes latents)."""
    main = getattr(model, "main_input_name", None)
    params = _params(model)
    req = _required_inputs(model)
    if (main not in ("input_features", "input_values") or main in params or "input_ids" in params
            or len(req) != 1 or re.search(r"(ids|embeds|mask)$", req[0])):
        return None
    first = next((m for m in model.modules() if isinstance(m, (torch.nn.Conv1d, torch.nn.Linear, torch.nn.Embedding,
                                                                torch.nn.Conv2d))), None)
    return req[0] if isinstance(first, torch.nn.Conv1d) and first.in_channels == 1 else None


def _first_embedding_rows(model: torch.nn.Module) -> int | None:
    """Rows of the model's first ``nn.Embedding`` (its token table, built first), for a token
    model whose config names no vocab: Canine embeds Unicode code points through hash-bucket
    tables (Clark et al. 2022), so any id below a table's size is a valid input.  None when the
    model has no embedding."""
    emb = next((m for m in model.modules() if isinstance(m, torch.nn.Embedding)), None)
    return int(emb.num_embeddings) if emb is not None else None


def _params(cls_or_model) -> dict:
    """Forward arguments of a class or a built model (``encode``'s for an image tokenizer
    without a forward, :func:`encodes_images_only`)."""
    try:
        fn = cls_or_model.encode if encodes_images_only(cls_or_model) else cls_or_model.forward
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


def encodes_images_only(cls_or_model) -> bool:
    """Whether a model class (or model) has no ``forward`` of its own but an ``encode`` that takes
    ``pixel_values`` (a VQ-VAE image tokenizer of a multimodal LM: Chameleon's, Emu3's), or
    image latents ``hidden_states`` as its only argument (GLM-Image's quantizer of its encoder's
    latents: :func:`encodes_latents`)."""
    t = cls_or_model if isinstance(cls_or_model, type) else type(cls_or_model)
    enc = getattr(t, "encode", None)
    if not (isinstance(t, type) and issubclass(t, torch.nn.Module) and t.forward is torch.nn.Module.forward
            and callable(enc)):
        return False
    try:
        params = list(inspect.signature(enc).parameters)
    except (TypeError, ValueError):
        return False
    return "pixel_values" in params or params[1:] == ["hidden_states"]


def encodes_latents(model: torch.nn.Module) -> int | None:
    """For an image tokenizer run through ``encode(hidden_states)`` (:func:`encodes_images_only`):
    the channels of the latent map ``(B, C, H, W)`` it takes, the ``in_channels`` of its first
    ``nn.Conv2d``; None for one that takes ``pixel_values`` (or without a convolution)."""
    inner = model.model if isinstance(model, ImageEncoding) else model
    try:
        if "pixel_values" in inspect.signature(type(inner).encode).parameters:
            return None
    except (TypeError, ValueError, AttributeError):
        return None
    conv = next((m for m in inner.modules() if isinstance(m, torch.nn.Conv2d)), None)
    return int(conv.in_channels) if conv is not None else None


class ImageEncoding(torch.nn.Module):
    """An image tokenizer without a forward of its own run through its ``encode(pixel_values)``
    (:func:`encodes_images_only`); an ``image_sizes`` argument gets each image's ``(H, W)``, the
    size of the unpadded image as transformers' image processors report it."""

    main_input_name = "pixel_values"

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.config = model, model.config
        params = inspect.signature(model.encode).parameters.values()
        if not any(p.kind == p.VAR_KEYWORD or p.name == "use_cache" for p in params):
            # transformers' ``merge_with_config_defaults`` passes the config's ``use_cache`` (which
            # the shrunk config always sets) to an ``encode`` that takes no such argument
            model.config.use_cache = None

    def forward(self, pixel_values: torch.Tensor, **kwargs):
        if "image_sizes" in inspect.signature(self.model.encode).parameters and "image_sizes" not in kwargs:
            kwargs["image_sizes"] = torch.tensor([list(pixel_values.shape[-2:])] * pixel_values.shape[0])
        return self.model.encode(pixel_values, **kwargs)


def session_class(cls) -> type | None:
    """The class of the forward's first required argument when it is a class of the model's own
    package that is neither a tensor nor a module (a video tracker's ``inference_session``:
    ``Sam2VideoModel.forward(inference_session: Sam2VideoInferenceSession, frame_idx)``), else
    None."""
    req = _required_inputs(cls)
    ann = _params(cls)[req[0]].annotation if req else None
    if not isinstance(ann, type) or issubclass(ann, (torch.Tensor, torch.nn.Module)):
        return None
    pkg, own = cls.__module__.rpartition(".")[0], ann.__module__.rpartition(".")[0]
    return ann if own == pkg or (pkg and own.startswith(pkg + ".")) else None


class SessionTracked(torch.nn.Module):
    """A video tracker whose forward takes an inference session of its own class instead of
    tensors (SAM 2 video: ``forward(inference_session, frame_idx)``, the session holding the
    frames, the prompts and the memory of earlier frames), run on clips ``(B, T, C, H, W)`` of
    frames at the model's resolution (as its video processor hands them over).

    Each clip gets a fresh session built from the frames (the session constructor's ``video``,
    ``video_height``, ``video_width``, ``dtype`` and ``inference_device`` arguments, those it
    takes); one object is prompted on frame 0 by a mask, through the session's own
    ``obj_id_to_idx`` and ``add_mask_inputs(obj_idx, frame_idx, mask)`` (the mask a processor
    adds: ``(1, 1, H, W)``, here the centred square of half the side) and marked as having new
    inputs (``obj_with_new_inputs``); the model then tracks it frame by frame, frames ``t ≥ 1``
    through its memory of the earlier ones.  ``forward`` returns the per-frame outputs (every
    float tensor of a frame's output flattened and concatenated: mask logits, object scores)
    stacked ``(B, T, N)``.

    Raises (in ``forward``):
        ValueError: ``pixel_values`` is not a clip of at least 2 frames (frame 0 holds the prompt,
            the later frames are tracked through the memory), or the session class has no
            ``add_mask_inputs`` / ``obj_id_to_idx``.
    """

    main_input_name = "pixel_values"

    def __init__(self, model: torch.nn.Module, session_cls: type) -> None:
        super().__init__()
        self.model, self.session_cls = model, session_cls
        self.arg = _required_inputs(type(model))[0]
        if hasattr(model, "config"):
            self.config = model.config

    def _session(self, clip: torch.Tensor):
        S = self.session_cls
        if not (callable(getattr(S, "add_mask_inputs", None)) and callable(getattr(S, "obj_id_to_idx", None))):
            raise ValueError(f"{S.__name__} has no add_mask_inputs / obj_id_to_idx: no prompt to track")
        T, _, H, W = clip.shape
        given = {"video": clip, "video_height": H, "video_width": W, "dtype": clip.dtype,
                 "inference_device": clip.device, "inference_state_device": clip.device,
                 "video_storage_device": clip.device}
        takes = inspect.signature(S).parameters
        session = S(**{k: v for k, v in given.items() if k in takes})
        if self._add_text_prompt(session):  # a detector finds (and then tracks) the objects itself
            return session
        mask = torch.zeros(1, 1, H, W, dtype=clip.dtype, device=clip.device)
        mask[..., H // 4:H - H // 4, W // 4:W - W // 4] = 1
        obj_id = 1
        session.add_mask_inputs(session.obj_id_to_idx(obj_id), 0, mask)
        if isinstance(getattr(session, "obj_with_new_inputs", None), list):
            session.obj_with_new_inputs = [obj_id]
        return session

    def _add_text_prompt(self, session) -> bool:
        """A detecting tracker's session also takes text prompts (SAM 3 video: ``add_prompt(text)``
        → prompt id, its tokens in ``prompt_input_ids`` / ``prompt_attention_masks``, as its
        processor's ``add_text_prompt`` writes them): one prompt of fixed random ids of the text
        vocab, every position real.  False (nothing added) for a session without them."""
        ids, masks = getattr(session, "prompt_input_ids", None), getattr(session, "prompt_attention_masks", None)
        config = getattr(self, "config", None)  # the text vocab, of a nested detector config too
        vocab = _nearest_field(config, ("vocab_size",), lambda v: isinstance(v, int)) if config is not None else None
        if not (callable(getattr(session, "add_prompt", None)) and isinstance(ids, dict) and isinstance(masks, dict)
                and isinstance(vocab, int) and vocab > LOW_IDS + RESERVED_TOP):
            return False
        pid = session.add_prompt("object")
        g = torch.Generator().manual_seed(1234)
        ids[pid] = torch.randint(LOW_IDS, vocab - RESERVED_TOP, (1, ENC_LEN), generator=g)
        masks[pid] = torch.ones(1, ENC_LEN, dtype=torch.long)
        return True

    def forward(self, pixel_values: torch.Tensor, output_attentions: bool = False) -> torch.Tensor:
        if pixel_values.dim() != 5 or pixel_values.shape[1] < 2:  # frame 0 is the prompt, later ones are tracked
            raise ValueError(f"{type(self.model).__name__} tracks clips (B, T ≥ 2, C, H, W), got {tuple(pixel_values.shape)}")
        clips = []
        for clip in pixel_values:
            session = self._session(clip)
            frames = []
            for t in range(clip.shape[0]):
                out = self.model(**{self.arg: session}, frame_idx=t)
                # every float output of the frame, flattened: the mask logits alone can be a
                # constant (SAM 2 writes -1024 where its object score says "no object"), the
                # object score beside them still carries what the frame's attention computed
                floats = [f.flatten() for f in _floats(out)]
                if not floats:  # a detecting tracker that found no object to track
                    raise ValueError(f"{type(self.model).__name__} gave no float output on frame {t}: "
                                     "no object tracked (none detected above its score thresholds)")
                frames.append(torch.cat(floats))
            clips.append(torch.stack(frames))
        return torch.stack(clips)


# ------------------------------------------------------------------------------------------------
# inputs
# ------------------------------------------------------------------------------------------------
def _text_config(config):
    try:
        return config.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001
        return config


def _vision_config(config):
    """The config's image tower config (``vision_config`` / ``image_config`` /
    ``vision_encoder_config``, else a sub-config with an ``image_size``), else the config."""
    for name in ("vision_config", "image_config", "vision_encoder_config"):
        sub = getattr(config, name, None)
        if sub is not None:
            return sub
    if getattr(config, "image_size", None) is None:
        from transformers import PretrainedConfig

        subs = [sub for sub in vars(config).values() if isinstance(sub, PretrainedConfig)]
        for sub in subs:
            if getattr(sub, "image_size", None) is not None:
                return sub
        for sub in subs:  # a video tower around an image tower (PE-Video's video_config.vision_config)
            inner = _vision_config(sub)
            if inner is not sub:
                return inner
    return config


def _side(v, default=32) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    if isinstance(v, (list, tuple)) and len(v) >= 2 and all(isinstance(e, int) for e in v[:2]):
        return int(v[0]), int(v[1])
    return default, default


def image_shape(config) -> tuple[int, int, int]:
    """``(C, H, W)`` of the images a (vision) config expects (the image tower's, or its
    backbone's when the tower config leaves the size to it: SAM 2's Hiera ``backbone_config``)."""
    vc = _vision_config(config)
    if vc is not config and getattr(vc, "image_size", None) is None:
        vc = _vision_config(vc)
    timm_args = getattr(vc, "model_args", None)  # a timm model's constructor arguments (TimmWrapperConfig)
    timm_side = timm_args.get("img_size") if isinstance(timm_args, dict) else None
    side = getattr(vc, "image_size", None) or getattr(vc, "img_size", None) or timm_side
    if side is None and vc is not config:
        # an image tower that leaves the side to the model around it: the side another sub-config
        # declares (EdgeTAM's ``prompt_encoder_config.image_size``, the input image its prompt
        # coordinates and feature sizes are scaled to)
        from transformers import PretrainedConfig

        side = next((s.image_size for s in vars(config).values() if isinstance(s, PretrainedConfig)
                     and isinstance(getattr(s, "image_size", None), int)), None)
    h, w = _side(side)
    c = getattr(vc, "num_channels", None) or getattr(vc, "in_channels", None) or 3
    return int(c), h, w


#: errors of a convolution, pooling or padding layer given a feature map smaller than its window
_MAP_TOO_SMALL = re.compile(r"Output size is too small|Kernel size can't be greater than actual input size"
                            r"|Padding size should be less than|[Ii]mage size .* is too small")
#: a forward's refusal of the image size it got (after combining its inputs) against its own
#: (ViT-style patch embeddings: ``Input image size (128*64) doesn't match model (64*64).``)
_SIZE_REFUSED = re.compile(r"[Ii]mage size \((\d+)\s*\*\s*(\d+)\)\s*doesn't match model \((\d+)\s*\*\s*(\d+)\)")
#: the largest image side tried for a model whose config declares none (:func:`_first_accepted_layout`)
MAX_GROWN_SIDE = 512


def model_image_shape(model, config) -> tuple[int, int, int]:
    """:func:`image_shape` of ``config``, with the side the audit grew for ``model`` (an
    ``attncheck_image_side`` attribute: :func:`_first_accepted_layout`) when it has one."""
    c, h, w = image_shape(config)
    side = getattr(model, "attncheck_image_side", None)
    if isinstance(side, tuple):  # (height, width): an image the forward stacks with another
        return (c, *side)
    return (c, side, side) if isinstance(side, int) else (c, h, w)


_MEL_FIELDS = ("num_mel_bins", "feature_size", "input_feat_per_channel", "n_mels", "feature_projection_input_dim")


def _nearest_field(config, names: tuple[str, ...], ok: Callable[[Any], bool]) -> Any:
    """The first value ``ok`` accepts among the ``names`` fields of ``config``, else of its nested
    configs (breadth first: the audio encoder config of an ASR model); None when none has one."""
    from transformers import PretrainedConfig

    level = [config]
    while level:
        for c in level:
            v = next((v for f in names if ok(v := getattr(c, f, None))), None)
            if v is not None:
                return v
        level = [sub for c in level for sub in vars(c).values() if isinstance(sub, PretrainedConfig)]
    return None


def _audio_feature_size(config) -> int | None:
    """Features per spectrogram frame (mel bins, or stacked mel frames) that ``config`` or its
    nearest nested config declares, else the default ``feature_size`` / ``num_mel_bins`` of the
    feature extractor of the config's package (:func:`_extractor_feature_size`); None when neither
    names it."""
    n = _nearest_field(config, _MEL_FIELDS, lambda v: isinstance(v, int) and v > 0)
    return int(n) if n is not None else _extractor_feature_size(config)


def _extractor_classes(config) -> list[type]:
    """The feature extractor classes defined in the transformers package of ``config`` (a config
    or its class: the ``feature_extraction_*`` modules next to its ``configuration_*``), in module
    order; a module that needs a missing optional library is left out."""
    import importlib
    import pkgutil

    pkg_name = (config if isinstance(config, type) else type(config)).__module__.rpartition(".")[0]
    try:
        pkg = importlib.import_module(pkg_name)
    except Exception:  # noqa: BLE001
        return []
    out = []
    for m in pkgutil.iter_modules(getattr(pkg, "__path__", [])):
        if not m.name.startswith("feature_extraction_"):
            continue
        try:
            mod = importlib.import_module(f"{pkg_name}.{m.name}")
        except Exception:  # noqa: BLE001 - an extractor needing an optional library
            continue
        out += [obj for obj in vars(mod).values() if isinstance(obj, type) and obj.__module__ == mod.__name__]
    return out


def _extractor_feature_size(config) -> int | None:
    """The default features per frame (``feature_size``, ``num_mel_bins`` or ``n_mels`` argument)
    of the feature extractor defined in the config's transformers package
    (:func:`_extractor_classes`), or None (also for a waveform extractor's ``feature_size = 1``)."""
    for obj in _extractor_classes(config):
        try:
            params = inspect.signature(obj.__init__).parameters
        except (TypeError, ValueError):
            continue
        for f in ("feature_size", "num_mel_bins", "n_mels"):
            d = params[f].default if f in params else None
            if isinstance(d, int) and not isinstance(d, bool) and d > 1:  # 1: a waveform extractor
                return d
    return None


def extractor_inputs(config, seconds: float = 1.0) -> dict[str, torch.Tensor] | None:
    """Batch-1 model inputs made by the feature extractor of the config's package
    (:func:`_extractor_classes`, built with its default arguments) from ``seconds`` of seeded
    Gaussian noise at the extractor's ``sampling_rate``: the waveform, padded as the model needs
    it (to a multiple of its hop), beside the spectrogram and masks the same extractor computes
    (a codec with an acoustic and a semantic branch takes both).  None when the package defines
    no extractor that builds and runs so.

    Shapes: as the extractor returns them with batch 1 (``input_values`` ``(1[, 1], samples)``,
    ``input_features`` ``(1, mels, frames)`` or ``(1, frames, mels)``, masks ``(1, …)``)."""
    return _package_extractor_inputs(type(config), seconds)


@functools.lru_cache(maxsize=8)
def _package_extractor_inputs(config_cls: type, seconds: float) -> dict[str, torch.Tensor] | None:
    """:func:`extractor_inputs` for a config class (cached: the inputs depend on the package only)."""
    import numpy as np

    for cls in _extractor_classes(config_cls):
        if not hasattr(cls, "model_input_names"):
            continue
        try:
            fe = cls()
            rate = int(getattr(fe, "sampling_rate", None) or 16000)
            audio = np.random.default_rng(0).standard_normal(int(rate * seconds)).astype(np.float32)
            out = fe(audio, sampling_rate=rate, return_tensors="pt")
        except Exception:  # noqa: BLE001 - an extractor needing an optional library, or other inputs
            continue
        tensors = {k: v for k, v in dict(out).items() if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == 1}
        if tensors:
            return tensors
    return None


def _input_layer_widths(model: torch.nn.Module) -> list[int]:
    """Input widths of the model's first linear layer (``in_features``) and first 1-d convolution
    (``in_channels``, when more than one), in module order: the width of the spectrogram frames
    a model takes when it stacks or expands them before its first layer (stacked frames with
    deltas), which no config field names."""
    lin = next((m.in_features for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
    conv = next((m.in_channels for m in model.modules() if isinstance(m, torch.nn.Conv1d)), None)
    return [w for w in (lin, conv) if isinstance(w, int) and 1 < w <= 4096]


def _frames(x: torch.Tensor, mels: int) -> int:
    """Frames of a spectrogram batch ``(B, mels, frames)`` / ``(B, frames, mels)`` /
    ``(B, 1, frames, mels)``: the last axis after the batch that is neither the mel axis nor a
    channel axis of size 1 (samples of a waveform ``(B[, 1], samples)``)."""
    rest = [n for n in x.shape[1:] if n not in (1, mels)]
    return int(rest[-1]) if rest else int(x.shape[-1])


def _audio_candidates(config, main: str, mels: int | None = None,
                      spectrograms_only: bool = False) -> list[Callable[[int, torch.Generator], torch.Tensor]]:
    """Audio input makers to try, in order (the first the model accepts wins): waveforms
    ``(B, samples)`` / ``(B, 1, samples)`` for ``input_values``, or for a generic input name when a
    (nested) config declares a conv feature encoder (a whole number of its total stride);
    spectrograms ``(B, mels, frames)`` / ``(B, frames, mels)`` / ``(B, 1, frames, mels)`` (mels:
    :func:`_audio_feature_size` unless given; frames from ``max_source_positions`` /
    ``max_length``); only the spectrograms when ``spectrograms_only``."""
    mels = mels or _audio_feature_size(config) or 80
    src = getattr(config, "max_source_positions", None)
    longest = getattr(config, "max_length", None)
    frames = 2 * int(src) if isinstance(src, int) else (int(longest) if isinstance(longest, int) else 64)
    window = getattr(config, "n_window", None)  # chunked encoders take whole chunks of 2·n_window frames
    if isinstance(window, int) and window > 0:
        frames = -(-frames // (2 * window)) * 2 * window
    spectrograms = [lambda b, g: torch.randn(b, mels, frames, generator=g),
                    lambda b, g: torch.randn(b, frames, mels, generator=g),
                    lambda b, g: torch.randn(b, 1, frames, mels, generator=g),
                    lambda b, g: torch.randn(b, 3000 if frames < 3000 else frames, mels, generator=g)]
    # waveforms for ``input_values``, or a generic input name (``inputs``) of a model whose
    # (nested) encoder config declares a convolutional feature encoder (wav2vec2's conv_stride)
    strides = _nearest_field(config, ("conv_stride",), lambda v: isinstance(v, (list, tuple)) and len(v) > 0)
    if not spectrograms_only and (main == "input_values" or (main != "input_features" and strides is not None)):
        stride = 1
        for s in strides or ():
            stride *= int(s)
        n = max(stride, 1) * 24 if stride > 1 else 4000
        waves = [lambda b, g, n=n: torch.randn(b, n, generator=g),
                 lambda b, g, n=n: torch.randn(b, 1, n, generator=g),
                 lambda b, g: torch.randn(b, 16000, generator=g)]
        return waves + spectrograms
    return spectrograms


FRAMES = 16  # spectrogram frames of a paired waveform + spectrogram input (:func:`_paired_audio_variants`)


def _mask_marks_padding(model: torch.nn.Module, name: str) -> bool:
    """Whether the mask argument ``name`` is True at padded positions: the ``forward`` of the
    model or of one of its submodules negates it (``~audio_mel_mask``: the valid frames are its
    complement, Gemma 3n's audio encoder)."""
    rx = re.compile(rf"~\s*{re.escape(name)}\b|\b{re.escape(name)}\.logical_not\(")
    for cls in dict.fromkeys(type(m) for m in model.modules()):
        try:
            if rx.search(inspect.getsource(cls.forward)):
                return True
        except (OSError, TypeError):
            continue
    return False


def _paired_audio_variants(model, config, main: str, split, role: str | None = None
                           ) -> list[tuple[str, Callable, Callable, Callable]]:
    """Audio layouts whose other inputs are held fixed beside the checked ``x``:

    - ``extractor``: what the package's feature extractor makes of one second of noise
      (:func:`extractor_inputs`): ``x`` has the shape of its ``main`` input (a waveform padded to
      the multiple of the hop the model checks; ``role``: the extractor's name for it, when the
      forward calls it ``main``), every other output the forward accepts is fixed;
    - ``waveform+spectrogram``: a codec whose forward requires both the waveform
      (``input_values``, its acoustic branch) and a spectrogram (``input_features``, its semantic
      branch) of the same audio: :data:`FRAMES` frames, ``(B, mels, frames)`` or ``(B, frames,
      mels)``, beside ``(B[, 1], FRAMES × stride)`` samples (the waveform encoder's total stride:
      one frame per spectrogram frame, as the two branches' features are concatenated per
      frame), with masks of ones;
    - ``audio+clip``: the first two waveforms / spectrograms of :func:`_audio_candidates` beside
      a fixed clip ``(B, T, C, H, W)`` for each ``pixel_values*`` argument (an audio-visual
      encoder that fuses the two streams).

    The fixed inputs are batch 1, expanded to the batch of ``x``."""
    params = _params(model)
    g = torch.Generator().manual_seed(1234)
    fixed_sets: list[tuple[str, Callable, dict[str, torch.Tensor]]] = []
    ext = extractor_inputs(config)
    role = role or main  # the extractor's name of the input the forward calls ``main``
    if ext is not None and role in ext:
        shape = tuple(ext[role].shape[1:])
        others = {k: v for k, v in ext.items() if k not in (main, role) and k in params}
        fixed_sets.append(("extractor", lambda b, g, shape=shape: torch.randn(b, *shape, generator=g), others))
    other = next((n for n in _required_inputs(model) if n != main and n in ("input_values", "input_features")), None)
    if other is not None:
        # as many spectrogram frames as the waveform encoder makes of the samples: ``FRAMES`` ×
        # its total stride (the product of its per-stage downsampling ratios, else its hop)
        ratios = _nearest_field(config, ("downsampling_ratios", "conv_stride"),
                                lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(r, int) for r in v))
        hop = math.prod(ratios) if ratios else _nearest_field(config, ("hop_length",), lambda v: isinstance(v, int) and v > 0) or 1
        mels = _audio_feature_size(config) or 80
        n = FRAMES * hop
        waves = [lambda b, g, n=n: torch.randn(b, n, generator=g), lambda b, g, n=n: torch.randn(b, 1, n, generator=g)]
        specs = [lambda b, g: torch.randn(b, mels, FRAMES, generator=g), lambda b, g: torch.randn(b, FRAMES, mels, generator=g)]
        pairs = [(w, s) for w in waves for s in specs]
        for i, (w, s) in enumerate(pairs):
            wave_mk, spec_mk = (w, s) if main == "input_values" else (s, w)
            fixed = {other: (spec_mk if main == "input_values" else wave_mk)(1, g)}
            mask = f"{other}_mask"
            if mask in params:
                v = fixed[other]
                mels = _audio_feature_size(config) or 80
                fixed[mask] = torch.ones(1, _frames(v, mels), dtype=torch.long)
            fixed_sets.append((f"waveform+spectrogram{i}", wave_mk if main == "input_values" else spec_mk, fixed))

    # an audio-visual encoder (PE audio-video) that fuses the audio with a clip it requires
    clips = {n: v[0] for n in params if n.startswith("pixel_values") and (v := _modality_inputs(n, config, g))}
    if clips:
        for i, mk in enumerate(_audio_candidates(config, role)[:2]):
            fixed_sets.append((f"audio{i}+clip", mk, clips))

    def kwargs(x, fixed):
        return {main: x, **{k: v.expand(x.shape[0], *v.shape[1:]).contiguous() for k, v in fixed.items()}}

    return [(name, mk, lambda x, fixed=fixed: kwargs(x, fixed), split) for name, mk, fixed in fixed_sets]


def _merge_size(config) -> int:
    m = (getattr(config, "spatial_merge_size", None) or getattr(config, "merge_kernel_size", None)
         or getattr(config, "pooling_kernel_size", None) or 1)
    return int(m[0] if isinstance(m, (list, tuple)) else m)


def _grid_param(params: dict) -> str | None:
    """The forward argument that takes per-image ``(t, h, w)`` patch grids (``grid_thw``,
    ``image_grid_thw``), or None."""
    return next((n for n in params if n.endswith("grid_thw")), None)


def _series_variants(model, config) -> list[tuple[str, Callable, Callable, Callable]]:
    """Input layouts of a time-series model (``past_values``, as transformers' PatchTST tests
    build them): ``(B, context_length, num_input_channels)`` values, or ``(B, context_length)``
    for univariate models; other required arguments named ``*mask`` are all ones (every value
    observed), ``*_padding`` all zeros (none padded), any other a per-sample category ``(B, 1)``
    of index 0 (TimesFM's ``freq``)."""
    ctx = getattr(config, "context_length", None)
    patch = getattr(config, "patch_length", None) or 8
    L = int(ctx) if isinstance(ctx, int) and 0 < ctx <= 128 else 4 * int(patch)
    lags = getattr(config, "lags_sequence", None)
    if isinstance(lags, (list, tuple)) and lags and all(isinstance(v, int) for v in lags):
        L += max(lags)  # lagged models read max(lags) values before the context (past_length)
    ch = getattr(config, "num_input_channels", None)
    shape = (L, int(ch)) if isinstance(ch, int) and ch > 0 else (L,)
    others = [n for n in _required_inputs(model) if n != "past_values"]

    def kwargs(x):
        kw = {"past_values": x}
        for n in others:
            if n.endswith("_padding"):
                kw[n] = torch.zeros(x.shape[:2], dtype=x.dtype)
            elif n.endswith("mask"):
                kw[n] = torch.ones(x.shape, dtype=x.dtype)
            elif n.startswith("past_") and n.endswith("_features"):
                # covariates per past step (B, L, num_time_features): a fixed ramp over the steps
                w = getattr(config, "num_" + n[len("past_"):], None)
                w = w if isinstance(w, int) and w >= 0 else 1
                ramp = torch.linspace(-1, 1, x.shape[1], dtype=x.dtype)
                kw[n] = ramp[None, :, None].expand(x.shape[0], -1, w).contiguous()
            else:  # a per-sample category (TimesFM's frequency bucket ``freq``): the first one
                kw[n] = torch.zeros(x.shape[0], 1, dtype=torch.long)
        return kw

    return [("series", lambda b, g: torch.randn(b, *shape, generator=g), kwargs, lambda out, B: out)]


def _dense_variants(model, config, main: str, kind: str) -> list[tuple[str, Callable, Callable, Callable]]:
    """Input layouts to try for a vision / audio model, in order: ``(name, maker(b, g) -> x,
    kwargs(x) -> forward arguments, batched(out, B) -> (B, L, ...))``.

    - images ``(B, C, H, W)`` and clips ``(B, T, C, H, W)`` (``num_frames`` frames), then flattened
      patches ``(B, N, C·p²)`` (a tower whose processor patchifies);
    - patch sequences for models that take ``grid_thw`` (Qwen2-VL style, as transformers'
      tests build them) or ``spatial_shapes`` (SigLIP2): ``x`` is ``(B, N, D)`` with ``N = h·w`` patches of
      ``D = C·temporal_patch_size·patch_size²`` values, ``h = w = 2·spatial_merge_size``; the
      model gets the ``B·N`` patches flattened (or batched) with one ``(1, h, w)`` grid row per
      sample, and its flat output is split back into the ``B`` samples;
    - audio: :func:`_audio_candidates`.
    """
    params = _params(model)
    vc = _vision_config(config)

    def keep(out, B):
        return out

    def split(out, B):  # (B·N, ...) → (B, N, ...)
        if out is not None and out.dim() >= 1 and out.shape[0] % B == 0 and out.shape[0] != B:
            return out.reshape(B, out.shape[0] // B, *out.shape[1:])
        return out

    if kind == "audio":
        # the feature extractor's mask of the main input (``input_features_mask``): every frame real
        mask = f"{main}_mask" if f"{main}_mask" in params else None
        mels = _audio_feature_size(config) or 80

        # required per-sample lengths (B,): the whole input real — frames, or waveform samples
        # (``chunk_sample_lengths``: frames × the config's ``hop_length``)
        lengths = [n for n in _required_inputs(model) if re.search(r"_(lens|lengths)$", n)]
        hop = _nearest_field(config, ("hop_length",), lambda v: isinstance(v, int) and v > 0) or 1

        padding = mask is not None and _mask_marks_padding(model, mask)

        def audio_kw(x, mels=mels):
            kw = {main: x}
            if padding:  # True marks a padded frame: none is
                kw[mask] = torch.zeros(x.shape[0], _frames(x, mels), dtype=torch.bool)
            elif mask is not None:
                kw[mask] = torch.ones(x.shape[0], _frames(x, mels), dtype=torch.long)
            for n in lengths:
                kw[n] = torch.full((x.shape[0],), _frames(x, mels) * (hop if "sample" in n else 1))
            return kw

        # packed encoders (chunks of all samples in one sequence) return (B·N, ...): split back
        # what the input is (a waveform: ``input_values``) by the model's declared main input,
        # when its forward names the argument otherwise (:func:`_audio_tensor_argument`)
        role = main if main in ("input_values", "input_features") else getattr(model, "main_input_name", main)
        out = [(f"audio{i}", mk, audio_kw, split) for i, mk in enumerate(_audio_candidates(config, role))]
        lens = next((n for n in params if re.search(r"(^|_)feature_(lens|lengths)$", n)), None)
        if lens is not None:  # the samples' frames concatenated (mels, ΣT) with their lengths (B,)
            def packed_kw(x):
                B, _, T = x.shape
                return {main: x.transpose(0, 1).reshape(x.shape[1], B * T), lens: torch.full((B,), T)}

            out.insert(0, ("audio-packed", _audio_candidates(config, main)[0], packed_kw, split))
        # then spectrograms as wide as the model's first layer takes (frames stacked with deltas)
        for w in _input_layer_widths(model) if main != "input_values" else ():
            if w != mels:
                out += [(f"audio{i}-{w}", mk, lambda x, w=w: audio_kw(x, w), split)
                        for i, mk in enumerate(_audio_candidates(config, main, w, spectrograms_only=True)[:2])]
        return out + _paired_audio_variants(model, config, main, split, role)
    if kind == "series":
        return _series_variants(model, config)
    grid = _grid_param(params)
    shapes = "spatial_shapes" if "spatial_shapes" in params else None
    # per-patch (x, y) positions (B, N, 2) beside the patches (Gemma 4's pixel_position_ids)
    patch_pos = next((k for k in _required_inputs(model) if k != main and k.endswith("position_ids")), None)
    if grid is not None or shapes is not None or patch_pos is not None:
        p = int(getattr(vc, "patch_size", None) or 14)
        tp = int(getattr(vc, "temporal_patch_size", None) or 1)
        c = int(getattr(vc, "in_channels", None) or getattr(vc, "num_channels", None) or 3)
        m = _merge_size(vc)
        h = w = 2 * m
        n = h * w
        merge_arg = next((k for k in params if k.endswith("merge_sizes")), None)

        masks = [k for k in _required_inputs(model) if k.endswith("attention_mask")]

        def grid_kw(B):
            kw = {grid: torch.tensor([[1, h, w]] * B)} if grid is not None else {}
            if shapes is not None:  # NaFlex-style (SigLIP2): per-image patch grid, all patches real
                kw[shapes] = torch.tensor([[h, w]] * B)
            if merge_arg is not None:
                kw[merge_arg] = torch.tensor([m] * B)
            for k in masks:
                kw[k] = torch.ones(B, n, dtype=torch.long)
            if patch_pos is not None:  # row-major patches: x = column, y = row
                xy = torch.stack([torch.arange(n) % w, torch.arange(n) // w], dim=-1)
                kw[patch_pos] = xy.expand(B, n, 2).contiguous()
            return kw

        out = []
        for tpx in dict.fromkeys((tp, 1, 2)):
            d = c * tpx * p * p
            out.append((f"patches{tpx}", lambda b, g, d=d: torch.randn(b, n, d, generator=g),
                        lambda x: {main: x.reshape(-1, x.shape[-1]), **grid_kw(x.shape[0])}, split))
            out.append((f"patches{tpx}-batched", lambda b, g, d=d: torch.randn(b, n, d, generator=g),
                        lambda x: {main: x, **grid_kw(x.shape[0])}, split))
        # rows of the shape the forward's docstring gives (Inkling 2's ``(num_image_tokens, patch_size *
        # spatial_merge_size, patch_size * spatial_merge_size, num_channels)``: one merged block per
        # token), ``n`` per sample
        row = _documented_row(model, main, vc)
        if row is not None:
            out.append(("patch-rows-documented", lambda b, g, row=row: torch.randn(b, n, *row, generator=g),
                        lambda x: {main: x.reshape(-1, *x.shape[2:]), **grid_kw(x.shape[0])}, split))
        if m > 1:  # patches merged m × m before the model (Gemma 4 unified's encoder-free embedder)
            d = c * (m * p) ** 2
            out.append(("merged-patches-batched", lambda b, g, d=d: torch.randn(b, n, d, generator=g),
                        lambda x: {main: x, **grid_kw(x.shape[0])}, split))
        out.append(("patch-pixels", lambda b, g: torch.randn(b, n, c, p, p, generator=g),
                    lambda x: {main: x.reshape(-1, *x.shape[2:]), **grid_kw(x.shape[0])}, split))
        out.append(("patch-pixels-batched", lambda b, g: torch.randn(b, n, c, p, p, generator=g),
                    lambda x: {main: x, **grid_kw(x.shape[0])}, keep))
        return out
    if "target_sizes" in params and main == "pixel_values":
        return _navit_packed_variants(vc, main)
    if main == "flattened_patches":
        return [_flattened_patches_variant(vc)]
    shape = model_image_shape(model, config)
    if (latent := encodes_latents(model)) is not None:  # an image latent map, not pixels
        shape = (latent, *shape[1:])
    frames = getattr(vc, "num_frames", None) or getattr(config, "num_frames", None)
    frames = int(frames) if isinstance(frames, int) and frames > 0 else 2
    # a detector grounded on text (Grounding DINO) also requires ids: a fixed prompt per image
    vocab = getattr(_text_config(config), "vocab_size", None)
    prompt = {}
    g = torch.Generator().manual_seed(1234)
    if isinstance(vocab, int) and vocab > LOW_IDS + RESERVED_TOP:
        prompt = {n: v for n in _required_inputs(model) if n != main and n.endswith("input_ids")
                  and (v := _fixed_input(n, config, LOW_IDS, vocab - RESERVED_TOP, g)) is not None}
    prompt.update(flattened_prompt_inputs(model, prompt))
    # other required inputs (SegGPT's prompt image and mask): made from their documented shapes
    for n in _required_inputs(model):
        if n != main and n not in prompt and (v := documented_input(model, n, config, g)) is not None:
            prompt[n] = v

    # a detector that needs a text prompt without declaring it required (SAM 3: "exactly one of
    # input_ids or text_embeds"): tried after the layouts without it
    optional = {}
    if isinstance(vocab, int) and vocab > LOW_IDS + RESERVED_TOP:
        optional = {n: v for n in params if n != main and n.endswith("input_ids") and n not in prompt
                    and (v := _fixed_input(n, config, LOW_IDS, vocab - RESERVED_TOP, g)) is not None}

    def with_prompt(x, prompt=prompt):
        return {main: x, **{n: v.expand(x.shape[0], *v.shape[1:]).contiguous() for n, v in prompt.items()}}

    def frames_flat(x):  # a frame tower (X-CLIP's vision model): the B·T frames of B clips
        return with_prompt(x.reshape(-1, *x.shape[2:]))

    out = [("image", lambda b, g: torch.randn(b, *shape, generator=g), with_prompt, keep),
           ("clip", lambda b, g: torch.randn(b, frames, *shape, generator=g), with_prompt, keep),
           ("image-list", lambda b, g: torch.randn(b, 1, *shape, generator=g), with_prompt, keep),
           ("clip-frames", lambda b, g: torch.randn(b, frames, *shape, generator=g), frames_flat, split)]
    # tiled images (Mllama's (B, images, tiles, C, H, W), the processor's tiles of each image): the
    # dims the forward unpacks, sized by :func:`_counted_dim`
    dims = unpacked_input_dims(model, main) or []
    if len(dims) > 5 and dims[-3:] == ["num_channels", "height", "width"]:
        counts = [_counted_dim(d, vc) or _counted_dim(d, config) for d in dims[1:-3]]
        if None not in counts:
            out.append(("image-tiles", lambda b, g, counts=counts: torch.randn(b, *counts, *shape, generator=g),
                        with_prompt, keep))
    if optional:
        out.append(("image-text", lambda b, g: torch.randn(b, *shape, generator=g),
                    lambda x: with_prompt(x, {**prompt, **optional}), keep))
    # a ViT whose processor patchifies (Molmo2's tower embeds flattened patches with a Linear):
    # (B, N, C·p²), N the config's position count, else the image's patches
    p = getattr(vc, "patch_size", None)
    if isinstance(p, int) and not isinstance(p, bool) and p > 0:
        npos = getattr(vc, "num_position_embeddings", None)
        n = npos if isinstance(npos, int) and npos > 0 else (shape[1] // p) * (shape[2] // p)
        out.append(("patch-sequence", lambda b, g, n=n, d=shape[0] * p * p: torch.randn(b, n, d, generator=g),
                    with_prompt, keep))
    # one video patch per sample (a tubelet of temporal_patch_size frames of patch_size², Inkling's
    # tower of space-to-depth folds), channels first, then last (its (N, T, H, W, C) patches)
    tp = getattr(vc, "temporal_patch_size", None)
    if isinstance(p, int) and isinstance(tp, int) and not isinstance(tp, bool) and p > 0 and tp > 0:
        c = shape[0]
        out += [(name, lambda b, g, t=t: torch.randn(b, *t, generator=g), with_prompt, keep)
                for name, t in (("patch-tubelet", (c, tp, p, p)), ("patch-tubelet-last", (tp, p, p, c)))]
    if isinstance(model, SessionTracked):  # a tracker takes clips only: tried first, its error the one reported
        out.insert(0, out.pop(1))
    return out


_DOC_SHAPE = r"`?\(`(?P<type>torch\.\w+)` of shape `\((?P<dims>[^`]*)\)`"


def documented_input(model, name: str, config, g: torch.Generator, prompts: bool = False) -> torch.Tensor | None:
    """A batch-1 value for the forward argument ``name`` built from the shape its docstring
    documents (transformers' convention: ``name (`torch.FloatTensor` of shape `(batch_size,
    num_channels, height, width)`)``): ``batch_size`` → 1, ``num_channels`` / ``height`` /
    ``width`` → the config's image (:func:`image_shape`), ``sequence_length`` → the config's
    ``<prefix>_seq_len`` for an argument ``<prefix>_…`` (OneFormer's ``task_seq_len``), else ``ENC_LEN``;
    a ``*mask*`` argument is all ones (every position real), a ``Long`` tensor (or a plain
    ``torch.Tensor`` named ``*ids`` / ``*inputs``: OneFormer's task tokens) random ids of the
    text vocab, a float one random.  None when the docstring documents no shape, or a
    dimension it names is none of those.  With ``prompts``, also prompt arguments: a count
    ``num_…`` → 1, a literal dimension as written, and boxes (``…boxes``, last dim 4) the box
    ``(0.25, 0.25, 0.75, 0.75)``, a valid normalized box read as corners or as centre and size.

    Shapes: the result has the documented dims with batch 1; dtype ``long`` for ``LongTensor``,
    ``bool`` for ``BoolTensor``, else float32."""
    doc = getattr(type(model).forward, "__doc__", None) or ""
    m = re.search(rf"(?m)^\s*{re.escape(name)} {_DOC_SHAPE}", doc)
    if m is None:
        return None
    c, h, w = model_image_shape(model, config)
    # a sequence the config sizes for this argument (OneFormer's task_inputs: task_seq_len)
    prefix = name.split("_")[0]
    seq = next((v for k in (f"{prefix}_seq_len", f"{prefix}_seq_length", f"{prefix}_sequence_length")
                if isinstance(v := getattr(config, k, None), int) and v > 0), ENC_LEN)
    sizes = {"batch_size": 1, "num_channels": c, "channels": c, "height": h, "width": w,
             "image_size": h, "sequence_length": seq}
    dims = [d.strip() for d in m.group("dims").split(",") if d.strip()]
    if prompts:
        sizes.update({d: int(d) if d.isdigit() else 1 for d in dims if d.isdigit() or d.startswith("num_")})
    shape = [sizes[d] if d in sizes else _counted_dim(d, config) for d in dims]
    if not dims or None in shape:
        return None
    kind = m.group("type")
    if prompts and name.endswith("boxes") and shape[-1] == 4 and "Long" not in kind:
        return torch.tensor([0.25, 0.25, 0.75, 0.75]).expand(shape).clone()
    if "mask" in name:
        return torch.ones(shape, dtype=torch.bool if "Bool" in kind else (torch.long if "Long" in kind else torch.float32))
    if "Long" in kind or (kind == "torch.Tensor" and re.search(r"(ids|inputs)$", name)):  # token ids
        vocab = getattr(_text_config(config), "vocab_size", None)
        hi = vocab - RESERVED_TOP if isinstance(vocab, int) and vocab > LOW_IDS + RESERVED_TOP else LOW_IDS + 1
        return torch.randint(LOW_IDS, hi, shape, generator=g)
    if "Bool" in kind:
        return torch.ones(shape, dtype=torch.bool)
    return torch.randn(shape, generator=g)


_DOC_ARG = re.compile(rf"(?m)^\s*(?P<name>\w+) {_DOC_SHAPE}")


def _documented_dims(model, name: str) -> list[str] | None:
    """The dims the forward's docstring gives argument ``name`` (``classes_input_ids
    (`torch.LongTensor` of shape `(total_classes (>= batch_size), sequence_length)`)``, the type
    quoted or not), or None when it documents no shape."""
    doc = getattr(type(model).forward, "__doc__", None) or ""
    m = re.search(rf"(?m)^\s*{re.escape(name)} `?\(`?torch\.\w+`? of shape `\((?P<dims>[^`]*)\)`", doc)
    return [d.strip() for d in m.group("dims").split(",") if d.strip()] if m else None


def _documented_row(model, name: str, config) -> tuple[int, ...] | None:
    """The shape of one row of an input the forward's docstring documents as rows of all samples
    flattened (``(num_image_tokens, patch_size * spatial_merge_size, …, num_channels)``): the
    dims after the first, each a product of config fields, or None when the first dim is the
    batch or a dim names anything else."""
    dims = _documented_dims(model, name)
    if not dims or len(dims) < 2 or dims[0] == "batch_size":
        return None
    row = []
    for d in dims[1:]:
        v = 1
        for f in (t.strip() for t in d.split("*")):
            x = int(f) if f.isdigit() else getattr(config, f, None)
            if not (isinstance(x, int) and not isinstance(x, bool) and x > 0):
                return None
            v *= x
        row.append(v)
    return tuple(row)


def flattened_prompt_inputs(model, prompt: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inputs that go with a prompt flattened over the items of all samples (OmDet-Turbo's
    ``classes_input_ids`` of shape ``(total_classes (>= batch_size), sequence_length)``: the class
    names of every sample, one row each), with one item per sample (the ``(1, L)`` row of
    ``prompt``, expanded to the batch): the required arguments of the same prefix, its mask
    (``classes_attention_mask``) all ones like the ids, and a per-sample count documented
    ``(batch_size)`` (``classes_structure``: the items of each sample) 1.

    Shapes: batch-1 tensors, ``long``; empty when no ids of ``prompt`` are documented flattened."""
    out: dict[str, torch.Tensor] = {}
    req = _required_inputs(model)
    for ids, v in prompt.items():
        dims = _documented_dims(model, ids)
        if not (ids.endswith("input_ids") and dims and dims[0] != "batch_size"):
            continue
        pre = ids[:-len("input_ids")]
        for n in req:
            if not pre or not n.startswith(pre) or n in prompt:
                continue
            if n.endswith("attention_mask"):
                out[n] = torch.ones_like(v)
            elif _documented_dims(model, n) == ["batch_size"]:
                out[n] = torch.ones(1, dtype=torch.long)
    return out


#: a dimension counting the images (media) of one sample: the audit sends one
_IMAGE_COUNT = re.compile(r"(^|_)num_(images|media|concurrent_media)$")


def _counted_dim(name: str, config) -> int | None:
    """The size of a named input dimension beyond batch / channels / sides: the config's field of
    that name, or of ``max_`` and that name (``num_tiles`` → Mllama's ``max_num_tiles``: the tiles
    an image is cut into), 1 for a count of images per sample (``max_num_images``,
    ``num_concurrent_media``); None for any other name."""
    for k in (name, f"max_{name}"):
        v = getattr(config, k, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 1 if _IMAGE_COUNT.search(name) else None


def unpacked_input_dims(model, name: str) -> list[str] | None:
    """The names a model's forward unpacks its input ``name``'s shape into (``batch_size,
    num_concurrent_media, num_tiles, num_channels, height, width = pixel_values.shape``), or None
    when its source has no such line."""
    try:
        src = inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        return None
    m = re.search(rf"(?m)^\s*(\w+(?:\s*,\s*\w+)+)\s*=\s*{re.escape(name)}\.shape\s*$", src)
    return [d.strip() for d in m.group(1).split(",")] if m else None


def documented_steps(model, config) -> tuple[str, int, dict[str, int | None]] | None:
    """A model fed several per-step sequences (a Decision Transformer's states, actions and
    returns, Chen et al. 2021), read from its forward's docstring (transformers' convention:
    ``states (`torch.FloatTensor` of shape `(batch_size, episode_length, state_dim)`)``):
    ``(checked argument, its width D, {other argument: width, or None for an integer per step})``.
    The checked argument is the first float one documented ``(batch_size, S, D)``; the others are
    the arguments documented with the same step axis ``S``: float ``(batch_size, S, d)`` and
    integer ``(batch_size, S)`` (a timestep); widths are numbers or config fields of that name.
    ``*mask*`` arguments are left to the checks.  None when no argument is documented so."""
    doc = getattr(type(model).forward, "__doc__", None) or ""
    params = _params(model)
    found = []
    for m in _DOC_ARG.finditer(doc):
        name, dims = m.group("name"), [d.strip() for d in m.group("dims").split(",") if d.strip()]
        if name not in params or "mask" in name or len(dims) not in (2, 3) or dims[0] != "batch_size":
            continue
        if len(dims) == 3:
            w = int(dims[2]) if dims[2].isdigit() else getattr(config, dims[2], None)
            if not (isinstance(w, int) and not isinstance(w, bool) and w > 0):
                continue
            found.append((name, dims[1], w, "Long" not in m.group("type")))
        elif "Long" in m.group("type"):
            found.append((name, dims[1], None, False))
    checked = next((f for f in found if f[3]), None)
    if checked is None:
        return None
    others = {n: (w if is_float else None) for n, axis, w, is_float in found
              if n != checked[0] and axis == checked[1] and (is_float or w is None)}
    return checked[0], checked[2], others


#: integer per-step inputs (timesteps) are drawn in ``[0, STEP_IDS)``
STEP_IDS = 8


def _steps_adapter(model, steps, facts, supports, cast, info, common) -> AuditModel:
    """A per-step model (:func:`documented_steps`) checked on its first float sequence ``x``
    ``(B, L, D)``: every other per-step argument is a fixed function of the same step of ``x``
    (a fixed random projection for a float one, an integer in ``[0, STEP_IDS)`` read from the
    step's values for a timestep), so that a step keeps all its inputs wherever padding moves it
    and a change of step ``j`` changes only step ``j``'s inputs.  The output is the first
    ``(B, L, …)`` tensor (the per-step predictions).

    Raises:
        Unsupported: the model returns no ``(B, L, …)`` output."""
    arg, D, others = steps
    g = torch.Generator().manual_seed(4321)
    proj = {n: torch.randn(D, w, generator=g) / math.sqrt(D) for n, w in others.items() if w is not None}

    def fwd_steps(x, attention_mask=None, position_ids=None, output_attentions=False):
        kw = {"output_attentions": True} if output_attentions else {}
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask
        for n, w in others.items():
            if w is None:
                kw[n] = (x.detach().abs().sum(-1) * 1000).long() % STEP_IDS
            else:
                kw[n] = cast(x @ proj[n].to(x.dtype))
        o = model(**{arg: cast(x)}, **kw)
        out = _find_seq(o, x.shape[0], x.shape[1])
        if out is None:
            raise Unsupported(f"{type(model).__name__} returns no per-step output of shape (B, L, …)")
        return Forward(out, _attentions(o) if output_attentions else None)

    declared = {f["is_causal"] for f in facts}
    causal = True if declared == {True} else False if declared == {False} else None
    if causal and not _builds_own_mask(model):
        raise Unsupported(f"{type(model).__name__}: its attention modules are causal but its forward builds no mask: "
                          "the causal mask comes from its parent model")
    info["input"] = arg
    info["input_layout"] = f"{arg}(B, L, {D})" + "".join(f"+{n}" for n in others) + " (per step, from the checked step)"
    return AuditModel(kind="features", causal=causal, input_kind="features", feature_dim=D, forward_fn=fwd_steps,
                      supports=frozenset(set(supports) - {"cache", "position_ids"}), **common)


def _navit_packed_variants(vc, main: str) -> list[tuple[str, Callable, Callable, Callable]]:
    """NaViT-packed images (MiniCPM-V's tower, as transformers' tests build them): all patches of
    the ``B`` images side by side in one ``(1, C, p, B·h·w·p)`` strip, with ``target_sizes``
    ``[[h, w]] * B`` (``h = w`` = the config's patches per side); the checked ``x`` is the patch
    pixels ``(B, h·w, C, p, p)``, and the packed ``(1, B·L, …)`` output is split back per image."""
    p = int(getattr(vc, "patch_size", None) or 14)
    c = int(getattr(vc, "num_channels", None) or 3)
    side = _side(getattr(vc, "image_size", None), p * 4)[0] // p
    n = side * side

    def packed(x):
        B = x.shape[0]
        strip = x.reshape(B * n, c, p, p).permute(1, 2, 0, 3).reshape(1, c, p, B * n * p)
        return {main: strip, "target_sizes": torch.tensor([[side, side]] * B, dtype=torch.int32)}

    def unpack(out, B):
        if out is not None and out.dim() >= 2 and out.shape[0] == 1 and out.shape[1] % B == 0 and B > 1:
            return out.reshape(B, out.shape[1] // B, *out.shape[2:])
        return out

    return [("navit-packed", lambda b, g: torch.randn(b, n, c, p, p, generator=g), packed, unpack)]


def _flattened_patches_variant(vc) -> tuple[str, Callable, Callable, Callable]:
    """Pix2Struct-style ``flattened_patches`` ``(B, N, 2 + D)``: each row is the 1-based row
    and column of a patch in an image of ``PATCHES_PER_SIDE²`` patches (as Pix2Struct's image
    processor writes them; 0 is padding) followed by its ``D = patch_embed_hidden_size`` pixel
    values (else ``C·p·p``).  The forward always gets these row / column ids: the checked input
    is the pixel part."""
    from attncheck.audit.shrink import PATCHES_PER_SIDE

    p = int(getattr(vc, "patch_size", None) or 16)
    c = int(getattr(vc, "num_channels", None) or 3)
    d = int(getattr(vc, "patch_embed_hidden_size", None) or c * p * p)
    side = PATCHES_PER_SIDE
    rows = torch.arange(side).repeat_interleave(side) + 1
    cols = torch.arange(side).repeat(side) + 1
    ids = torch.stack([rows, cols], dim=-1).float()

    def make(b, g):
        return torch.cat([ids.expand(b, -1, -1), torch.randn(b, side * side, d, generator=g)], dim=-1)

    def with_ids(x):  # the row / column columns stay valid whatever a check writes into x
        return {"flattened_patches": torch.cat([ids.to(x).expand(x.shape[0], -1, -1), x[..., 2:]], dim=-1)}

    return ("flattened-patches", make, with_ids, lambda out, B: out)


def token_boxes(ids: torch.Tensor) -> torch.Tensor:
    """Layout boxes ``(B, L, 4)`` long, one per token, derived from its id so that a token keeps
    its box wherever padding moves it: ``(x0, y0, x1, y1)`` with ``0 ≤ x0 < x1 ≤ 1000`` and
    ``0 ≤ y0 < y1 ≤ 1000`` (the normalized 0..1000 boxes of LayoutLM-style models)."""
    ids = ids.long()
    x0, y0 = (7 * ids) % 500, (13 * ids) % 500
    return torch.stack([x0, y0, x0 + 1 + ids % 499, y0 + 1 + (3 * ids) % 499], dim=-1)


def normalized_token_boxes(ids: torch.Tensor) -> torch.Tensor:
    """The boxes of :func:`token_boxes` as fractions of the page, ``(B, L, 4)`` float32 in
    ``[0, 1]``: the floating boxes of models that compute with their coordinates rather than
    look them up (BROS scales them by ``config.bbox_scale`` into sinusoidal embeddings); like
    every floating input, cast to the model's dtype before the forward."""
    return token_boxes(ids).float() / 1000


def _num_frames(config, default: int) -> int:
    """Frames per clip: the ``num_frames`` of the image tower config, else of the config."""
    return next((n for c in (_vision_config(config), config) if isinstance(n := getattr(c, "num_frames", None), int)
                 and n > 0), default)


def _fixed_input(name: str, config, lo: int, hi: int, g: torch.Generator) -> torch.Tensor | None:
    """A batch-1 input for a forward argument next to the checked ids: an image for
    ``pixel_values``, ``ENC_LEN`` ids for another ``*input_ids`` (Q-Former text); else None."""
    if name == "pixel_values":
        return torch.randn(1, *image_shape(config), generator=g)
    if name.startswith("pixel_values_video"):  # a clip (1, T, C, H, W) of the config's num_frames (else 2)
        return torch.randn(1, _num_frames(config, 2), *image_shape(config), generator=g)
    if name.endswith("input_ids"):
        return torch.randint(lo, hi, (1, ENC_LEN), generator=g)
    return None


def _token_input_layouts(model, config, kind: str, accepts: dict, g: torch.Generator
                         ) -> list[tuple[dict[str, torch.Tensor], dict[str, Callable]]]:
    """``(fixed inputs, per-token inputs)`` to send with the checked ``input_ids``, in the order
    to try: the forward's required arguments (plus an image for a joint text-image encoder such as
    CLIP), then also the optional image and layout boxes (``bbox``) a model may need; each with
    the image as a clip ``(B, T, C, H, W)`` of the config's ``num_frames`` (else 1) after
    (video-text models such as X-CLIP, models taking several images per sample), the ids
    alone when the image is optional (a masked LM with a vision tower), then a clip, audio or
    flattened patches for a joint model's other tower (:func:`_modality_inputs`)."""
    tcfg = _text_config(config)
    vocab = getattr(tcfg, "vocab_size", 0) or 0
    lo, hi = LOW_IDS, max(vocab - RESERVED_TOP, LOW_IDS + 1)
    required = [n for n in _required_inputs(model) if n != "input_ids"]
    fixed, per_token = {}, {}
    for n in required:
        if n == "bbox":
            per_token[n] = token_boxes
        elif (v := _fixed_input(n, config, lo, hi, g)) is not None:
            fixed[n] = v
    if "pixel_values" in accepts and kind != "decoder" and getattr(config, "vision_config", None) is not None:
        fixed.setdefault("pixel_values", _fixed_input("pixel_values", config, lo, hi, g))
    _as_patch_image(model, config, fixed)
    layouts = [(fixed, per_token)]
    more_fixed, more_tok = dict(fixed), dict(per_token)
    if "pixel_values" in accepts:
        more_fixed.setdefault("pixel_values", _fixed_input("pixel_values", config, lo, hi, g))
    if "bbox" in accepts:
        more_tok.setdefault("bbox", token_boxes)
    _as_patch_image(model, config, more_fixed)
    if more_fixed.keys() != fixed.keys() or more_tok.keys() != per_token.keys():
        layouts.append((more_fixed, more_tok))
    # models taking several images or frames per sample: pixel_values (B, T, C, H, W), T the
    # config's num_frames (else one image)
    frames = _num_frames(config, 1)
    for f, t in list(layouts):
        img = f.get("pixel_values")
        if img is not None and img.dim() == 4:
            layouts.append(({**f, "pixel_values": img.unsqueeze(1).expand(-1, frames, -1, -1, -1).contiguous()}, t))
    # a model whose text tokens attend to its images through cross-attention takes which token sees
    # which image (IDEFICS: image_attention_mask (B, L, T)): every token sees every image
    if "image_attention_mask" in accepts:
        for f, t in list(layouts):
            img = f.get("pixel_values")
            if img is not None and img.dim() == 5 and "image_attention_mask" not in t:
                n = img.shape[1]
                layouts.append((f, {**t, "image_attention_mask": lambda ids, n=n: torch.ones(*ids.shape, n, dtype=torch.long)}))
    # a text model that only optionally takes images (a masked LM with a vision tower): text alone
    if "pixel_values" not in required and "pixel_values" in fixed:
        layouts.append(({k: v for k, v in fixed.items() if k != "pixel_values"}, per_token))
    # a joint model whose other tower takes clips, audio or flattened patches (CLAP's audio
    # tower): that input fixed next to the ids, one layout per audio layout
    for n in _OTHER_MODALITIES:
        if n not in accepts or n in fixed:
            continue
        base = layouts[1][0] if len(layouts) > 1 else fixed
        for v in _modality_inputs(n, config, g):
            layouts.append(({**base, n: v}, layouts[0][1]))
    # a causal LM that adds its audio embeddings to the token embeddings position by position
    # (Voxtral Realtime: ``inputs_embeds += audio_embeds``): a spectrogram (1, mels, r·L) of r
    # frames per token, drawn once per length L and shared by the batch, for r = 1, 2, 4, 8, 16
    mels = _audio_feature_size(config)
    if kind == "decoder" and "input_features" in accepts and "input_features" not in fixed and mels:
        for r in (1, 2, 4, 8, 16):
            def frames_per_token(ids, r=r):
                spec = torch.randn(1, mels, r * ids.shape[1], generator=torch.Generator().manual_seed(1234))
                return spec.expand(ids.shape[0], -1, -1).contiguous()

            layouts.append((fixed, {**per_token, "input_features": frames_per_token}))
    # region features a config sizes by name (LXMERT: visual_feats (B, N, visual_feat_dim) and
    # visual_pos (B, N, visual_pos_dim), in [0, 1) like normalized boxes): all of them together
    sized = {n: torch.rand(1, ENC_LEN, d, generator=g) for n in accepts if n not in fixed
             and (d := _declared_dim(config, n)) is not None}
    if sized:
        layouts.append(({**fixed, **sized}, per_token))
    # a decoder stack whose cross-attention needs its encoder's output (T5Gemma 2's decoder):
    # a fixed random encoder output (1, ENC_LEN, D), D the encoder width the config declares,
    # else the decoder's own width (its cross-attention projects the encoder states with it)
    if "encoder_hidden_states" in accepts and "encoder_hidden_states" not in fixed:
        width = next((w for n in ("encoder_hidden_size", "cross_attention_hidden_size", "hidden_size", "d_model")
                      if isinstance(w := getattr(tcfg, n, None), int) and not isinstance(w, bool) and w > 0), None)
        if width is not None:
            layouts.append(({**fixed, "encoder_hidden_states": torch.randn(1, ENC_LEN, width, generator=g)}, per_token))
    # integer boxes promote a float16 / float64 model's box arithmetic to float32 (an integer
    # tensor times a Python float is float32): floating boxes, which follow the model's dtype
    if "bbox" in accepts:
        layouts.append((more_fixed, {**more_tok, "bbox": normalized_token_boxes}))
    return layouts


def _feature_slots(model, config) -> tuple[str, int] | None:
    """``(mask argument, n)`` for a model that inserts ``n`` image features into its token
    sequence at the positions a mask argument marks: a forward argument ``<features>_position_mask``
    next to a ``<features>`` argument documented ``(batch_size, <count>, …)``, ``<count>`` a config
    field (Kosmos-2: ``image_embeds_position_mask`` and ``image_embeds`` of shape
    ``(batch_size, latent_query_num, hidden_size)``, Peng et al. 2023).  None otherwise."""
    params = _params(model)
    doc = getattr(type(model).forward, "__doc__", None) or ""
    for name in params:
        feats = name[: -len("_position_mask")] if name.endswith("_position_mask") else None
        if not feats or feats not in params:
            continue
        m = re.search(rf"(?m)^\s*{re.escape(feats)} {_DOC_SHAPE}", doc)
        dims = [d.strip() for d in m.group("dims").split(",")] if m else []
        n = getattr(config, dims[1], None) if len(dims) == 3 and dims[0] == "batch_size" else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return name, n
    return None


def _as_patch_image(model, config, fixed: dict[str, torch.Tensor]) -> None:
    """Turn, in place, the fixed image of a joint model whose image tower takes NaFlex-style patch
    sequences (SigLIP2: ``spatial_shapes``) into that form: ``pixel_values`` ``(1, h·w, C·p²)``,
    ``spatial_shapes`` ``[[h, w]]`` and a ``*pixel_attention_mask`` of ones ``(1, h·w)`` (every
    patch real), ``h = w = 2·merge size`` as for the tower alone (:func:`_dense_variants`)."""
    params = _params(model)
    img = fixed.get("pixel_values")
    if img is None or img.dim() != 4 or "spatial_shapes" not in params:
        return
    vc = _vision_config(config)
    p = int(getattr(vc, "patch_size", None) or 14)
    h = w = 2 * _merge_size(vc)
    g = torch.Generator().manual_seed(4321)
    fixed["pixel_values"] = torch.randn(1, h * w, img.shape[1] * p * p, generator=g)
    fixed["spatial_shapes"] = torch.tensor([[h, w]])
    for k in params:
        if k.endswith("pixel_attention_mask"):
            fixed[k] = torch.ones(1, h * w, dtype=torch.long)


def _declared_dim(config, name: str) -> int | None:
    """The width a config declares for a forward argument by its name (``visual_pos`` →
    ``visual_pos_dim``, ``visual_feats`` → ``visual_feat_dim``), else None."""
    for n in dict.fromkeys((name, name[:-1] if name.endswith("s") else name)):
        d = getattr(config, f"{n}_dim", None)
        if isinstance(d, int) and not isinstance(d, bool) and d > 0:
            return d
    return None


#: forward arguments of a second modality a text model may need beside its ids (:func:`_modality_inputs`)
_OTHER_MODALITIES = ("pixel_values_videos", "input_features", "input_values", "flattened_patches")


def _modality_inputs(name: str, config, g: torch.Generator) -> list[torch.Tensor]:
    """Batch-1 candidates for a non-text forward argument: a clip ``(1, T, C, H, W)`` for
    ``pixel_values_videos`` (T: the config's ``num_frames``, else 2), every audio layout of
    :func:`_audio_candidates` for ``input_features`` / ``input_values`` then the one of
    :func:`extractor_inputs`, Pix2Struct-style
    ``flattened_patches`` (:func:`_flattened_patches_variant`)."""
    if name == "flattened_patches":
        return [_flattened_patches_variant(_vision_config(config))[1](1, g)]
    if name.startswith("pixel_values"):
        return [torch.randn(1, _num_frames(config, 2), *image_shape(config), generator=g)]
    if name in ("input_features", "input_values"):
        made = [mk(1, g) for mk in _audio_candidates(config, name)]
        ext = extractor_inputs(config)  # then what the package's feature extractor makes of noise
        return made + ([ext[name]] if ext is not None and name in ext else [])
    return []


def _encoder_input_options(ids: torch.Tensor, config, accepts: dict, g: torch.Generator) -> list[dict[str, torch.Tensor]]:
    """Fixed encoder inputs of an encoder-decoder model, in the order to try: ids, ids with their
    layout boxes (``bbox``), an image (``pixel_values``), ids with an image, flattened patches."""
    options = [{"input_ids": ids}]
    if "bbox" in accepts:
        options.append({"input_ids": ids, "bbox": token_boxes(ids)})
    if "pixel_values" in accepts:
        img = torch.randn(1, *image_shape(config), generator=g)
        options.append({"pixel_values": img})
        options.append({**options[-2], "pixel_values": img} if "bbox" in accepts else {"input_ids": ids, "pixel_values": img})
    if "flattened_patches" in accepts:  # Pix2Struct: the image as flattened patches
        options += [{"flattened_patches": v} for v in _modality_inputs("flattened_patches", config, g)]
    return options


# ------------------------------------------------------------------------------------------------
# expectations read from the model
# ------------------------------------------------------------------------------------------------
_SCALE_ATTRS = ("scaling", "scale", "softmax_scale", "attn_scale", "scale_factor", "attention_scale")


def declared_scale(module: torch.nn.Module) -> float | None:
    """The softmax scale an attention module declares (``scaling`` / ``scale`` / ``softmax_scale``
    attribute, a number), or None."""
    for a in _SCALE_ATTRS:
        v = getattr(module, a, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return float(v)
        if isinstance(v, torch.Tensor) and v.numel() == 1 and not v.requires_grad:
            return float(v)
    return None


def scale_folded_into_q(module: torch.nn.Module) -> str | None:
    """The scale attribute an attention module multiplies its queries by before q·kᵀ and does
    not pass on to the kernel (``q = self.q_proj(x) * self.scale``, then
    ``softmax(q @ k.T)``: CLVP, BART-era code), read from the source of its ``forward``; None
    when it does not (or the source cannot be read)."""
    import re

    try:
        src = inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return None
    for a in _SCALE_ATTRS:
        if declared_scale(module) is None or getattr(module, a, None) is None:
            continue
        folded = re.search(rf"^\s*(q|query)\w*\s*=.*\*\s*self\.{a}\b", src, re.M)
        passed = re.search(rf"\w+\s*=\s*self\.{a}\b\s*[,)]", src)
        if folded and not passed:
            return a
    return None


def _int_attr(module, *names) -> int | None:
    for a in names:
        v = getattr(module, a, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def attention_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """Innermost modules that look like attention: a declared scale, or a class name containing
    ``Attention`` / ``Attn`` with q/k projections or a ``head_dim``.  A ``scale`` on a module
    without weights or layers of its own and without such a name is not a softmax scale (the
    frequency scale of a random-Fourier position embedding, Tancik et al. 2020, as in SAM, or the
    2π of DETR-style sine position embeddings, Carion et al. 2020)."""
    found = []
    for name, mod in model.named_modules():
        cname = type(mod).__name__.lower()
        named = "attention" in cname or "attn" in cname
        bare = not named and not list(mod.children()) and not list(mod.parameters(recurse=False))
        if (declared_scale(mod) is not None and not bare) or (named
                                                and (_int_attr(mod, "head_dim", "attention_head_size",
                                                               "head_size", "d_kv") is not None
                                                     or hasattr(mod, "q_proj") or hasattr(mod, "query"))):
            found.append((name, mod))
    names = [n for n, _ in found]
    return [(n, m) for n, m in found if not any(o != n and o.startswith(n + ".") for o in names)]


_WINDOW_ATTRS = ("sliding_window", "window_size", "local_window_size", "attention_window")


def _window_value(w, layer: int | None) -> int | None:
    if isinstance(w, (list, tuple)) and w:
        w = w[layer % len(w)] if layer is not None else w[0]
    return w if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None


def config_value(cfg, name: str, layer: int | None = None) -> Any:
    """``cfg.<name>``, or None when the config has no such attribute.  On a heterogeneous config
    (per-layer overrides, ``config.per_layer_config[i]``), which refuses global reads of
    per-layer attributes, the value of layer ``layer`` (None when no layer is given)."""
    try:
        return getattr(cfg, name, None)
    except Exception:  # noqa: BLE001 - a per-layer attribute read globally
        pass
    if layer is None:
        return None
    try:
        return getattr(cfg.per_layer_config[layer], name, None)
    except Exception:  # noqa: BLE001
        return None


def module_facts(mod: torch.nn.Module) -> dict[str, Any]:
    """Heads, KV heads, head dim, declared scale, causal flag and sliding window of one attention
    module (None where the module does not say)."""
    heads = _int_attr(mod, "num_heads", "num_attention_heads", "n_heads", "n_head", "heads")
    kv = _int_attr(mod, "num_key_value_heads", "num_kv_heads", "n_kv_heads")
    groups = _int_attr(mod, "num_key_value_groups")
    cfg = getattr(mod, "config", None)
    if heads is None and cfg is not None:
        h = getattr(cfg, "num_attention_heads", None)
        heads = h if isinstance(h, int) else None
    if kv is None and heads and groups:
        kv = heads // groups if heads % groups == 0 else None
    win = None
    kind = next((v for a in ("layer_type", "attention_type") if isinstance(v := getattr(mod, a, None), str)), None)
    layer = _int_attr(mod, "layer_idx", "layer_id")
    for a in _WINDOW_ATTRS:
        win = win or _window_value(getattr(mod, a, None), layer)
    if kind is not None and not any(t in kind for t in ("sliding", "local", "chunk")):
        win = None  # a global layer of a model with local layers
    elif win is None and cfg is not None and (kind is not None or hasattr(cfg, "attention_window")):
        for a in _WINDOW_ATTRS:  # a local layer whose window is on the config
            win = win or _window_value(config_value(cfg, a, layer), layer)
    causal = getattr(mod, "is_causal", None)
    # local attention over a past horizon and no future one (Gemma 3n's audio conformer: keys
    # from i - max_past_horizon to i): causal, with a window of the horizon and the query itself
    past, future = getattr(mod, "max_past_horizon", None), getattr(mod, "max_future_horizon", None)
    if isinstance(past, int) and past >= 0 and future == 0 and causal is None:
        causal, win = True, win or past + 1
    cfg_win = None
    for a in _WINDOW_ATTRS if cfg is not None else ():
        cfg_win = cfg_win or _window_value(config_value(cfg, a, layer), layer)
    return {"class": type(mod).__name__, "heads": heads, "kv_heads": kv, "config_window": cfg_win,
            "config_class": type(cfg).__name__ if cfg is not None else None, "kv_groups": groups,
            "head_dim": _int_attr(mod, "head_dim", "attention_head_size", "head_size", "d_kv"),
            "scale": declared_scale(mod), "is_causal": causal,
            "sliding_window": win, "layer_type": kind, "sinks": _has_sinks(mod),
            "scale_folded_into_q": scale_folded_into_q(mod), "factors": _logit_factors(mod)}


def _has_sinks(mod: torch.nn.Module) -> bool:
    """Whether the module joins attention sinks to its softmax (Xiao et al. 2023, "Efficient
    Streaming Language Models with Attention Sinks"): a ``sinks`` tensor, or a ``sinks=``
    argument its ``forward`` passes to the attention function (a sink logit computed per
    token, e.g. by a projection)."""
    if isinstance(getattr(mod, "sinks", None), torch.Tensor):
        return True
    try:
        src = inspect.getsource(type(mod).forward)
    except (OSError, TypeError):
        return False
    return re.search(r"\bsinks\s*=\s*(?!None\b)", src) is not None


def _logit_factors(mod: torch.nn.Module) -> dict[str, float]:
    """Numbers besides the declared scale that the module may multiply its q, k or logits by:
    float attributes of the module (e.g. a query scale factor from the config) and scalar
    parameters (a learned temperature), ``{attribute: value}``; values 0 and 1 are left out.
    Declared-scale attributes (``scaling`` …) are not factors."""
    out: dict[str, float] = {}
    for name, v in vars(mod).items():
        if name in _SCALE_ATTRS or name.startswith("_") or "dropout" in name:
            continue
        if isinstance(v, float) and math.isfinite(v) and v not in (0.0, 1.0):
            out[name] = v
    for name, prm in mod.named_parameters(recurse=False):
        if prm.numel() == 1:
            val = float(prm.detach().float())
            if math.isfinite(val) and val not in (0.0, 1.0):
                out[name] = val
    return out


def _find_seq(o, B: int, L: int):
    """The first tensor in a model output whose leading dims are ``(B, L)`` (logits first)."""
    from transformers.utils import ModelOutput

    cands = []
    if isinstance(o, ModelOutput):
        keys = list(o.keys())
        keys.sort(key=lambda k: (k != "logits", k != "last_hidden_state"))
        for k in keys:
            v = o[k]
            if isinstance(v, torch.Tensor):
                cands.append(v)
            elif isinstance(v, ModelOutput):
                r = _find_seq(v, B, L)
                if r is not None:
                    cands.append(r)
    elif isinstance(o, (tuple, list)):
        cands = [v for v in o if isinstance(v, torch.Tensor)]
    elif isinstance(o, torch.Tensor):
        cands = [o]
    for v in cands:
        if v.dim() >= 2 and v.shape[0] == B and v.shape[1] == L and v.is_floating_point():
            return v
    return None


def _last_hidden_state(o, B: int, L: int) -> torch.Tensor | None:
    """The last of a model output's ``hidden_states`` (one per layer, asked for with
    ``output_hidden_states=True``) whose leading dims are ``(B, L)``, or None."""
    hs = getattr(o, "hidden_states", None)
    return next((h for h in reversed(hs or ()) if isinstance(h, torch.Tensor) and h.dim() >= 3
                 and h.shape[:2] == (B, L) and h.is_floating_point()), None)


def _kept_keys(cache: Any) -> int | None:
    """Fewest keys any layer of a transformers cache holds after decoding (a sliding-window cache
    evicts the oldest), or None when the cache exposes no per-layer key tensors."""
    kept = [k.shape[-2] for layer in getattr(cache, "layers", None) or ()
            if isinstance(k := getattr(layer, "keys", None), torch.Tensor) and k.dim() >= 2]
    return min(kept) if kept else None


def _step_out(o, B: int, n: int) -> torch.Tensor:
    out = _find_seq(o, B, n)
    if out is None:
        raise Unsupported("an incremental decoding step returns no per-position output")
    return out


def _floats(o, integers: bool = False):
    """The float tensors of a model output, in order (nested outputs and tuples walked); the
    integer ones instead when ``integers``."""
    from transformers.utils import ModelOutput

    if isinstance(o, torch.Tensor):
        if o.is_floating_point() != integers and o.dtype != torch.bool:
            yield o
        return
    vals = list(o.values()) if isinstance(o, ModelOutput) else (list(o) if isinstance(o, (tuple, list)) else [])
    for v in vals:
        yield from _floats(v, integers)


def _first_float(o):
    return next(_floats(o), None)


def _per_sample_output(o, B: int, batched: Callable) -> torch.Tensor | None:
    """The first float output with one row per sample (``(B, ...)`` after ``batched``), not a
    batch-reduced value such as a codec's commitment loss; else the first float output."""
    for t in _floats(o):
        t = batched(t, B)
        if t.dim() >= 2 and t.shape[0] == B:
            return t
    first = _first_float(o)
    if first is None:  # a codec encoder that returns only its codes (B, K, T): compared as floats
        codes = next((t for t in _floats(o, integers=True) if t.dim() >= 2 and t.shape[0] == B), None)
        return codes.float() if codes is not None else None
    return first


def _attentions(o) -> list[torch.Tensor] | None:
    att = []
    for k in ("encoder_attentions", "attentions", "decoder_attentions", "cross_attentions"):
        v = getattr(o, k, None)
        if v:
            att += [a for a in v if isinstance(a, torch.Tensor)]
    return att or None


def _cache_of(output):
    c = getattr(output, "cache", None)
    return c if c is not None else getattr(output, "past_key_values", None)


# ------------------------------------------------------------------------------------------------
# building
# ------------------------------------------------------------------------------------------------
def resolve(name: str):
    """``(model_type, class or None)`` for a model type or a transformers class name."""
    import transformers as tf
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if name in CONFIG_MAPPING_NAMES:
        return name, None
    cls = getattr(tf, name, None) if name[:1].isupper() else None
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and hasattr(cls, "config_class"):
        return cls.config_class.model_type, cls
    return None, None


def build_hf(spec: str, name: str, overrides: dict[str, Any] | None = None,
             dtype: str = "float32", sdpa: bool = True) -> list[AuditModel]:
    """Variants ``eager`` and ``sdpa`` (identical weights) of a tiny ``name`` model.

    Runs single-threaded (tiny models: threads only add overhead, as in the audit's checks).

    Raises:
        Unsupported: no level of shrinking gives a model that builds and runs (reason inside).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _build_hf(spec, name, overrides, dtype, sdpa)
    finally:
        torch.set_num_threads(threads)


def _native_backbone(timm_config):
    """The transformers backbone config of the same architecture as a timm backbone config
    (``TimmBackboneConfig(backbone="resnet50")`` → a ``ResNetConfig`` with the same
    ``out_indices``; stage indices follow the same convention, 0 = the stem), or None.  The
    architecture is the longest backbone model type of transformers' ``AutoBackbone`` mapping
    that prefixes the timm name (followed by a non-letter: ``swin_tiny_…`` → ``swin``)."""
    import transformers as tf

    arch = getattr(timm_config, "backbone", None) or getattr(timm_config, "architecture", None)
    if not isinstance(arch, str):
        return None
    arch = arch.lower()
    types = [t for t in _mapping("MODEL_FOR_BACKBONE_MAPPING_NAMES") if not t.startswith("timm")]
    fits = [t for t in types if re.match(rf"{re.escape(t.replace('-', '_'))}(?![a-z])", arch)]
    if not fits:
        return None
    kw = {}
    for k in ("out_indices", "num_channels"):
        v = getattr(timm_config, k, None)
        if v is not None:
            kw[k] = list(v) if isinstance(v, (list, tuple)) else v
    try:
        return tf.AutoConfig.for_model(max(fits, key=len), **kw)
    except Exception:  # noqa: BLE001
        return None


def without_timm_backbones(config) -> list[str]:
    """Replace, in place, the timm backbone sub-configs (``model_type`` ``timm_backbone``, loaded
    through ``AutoBackbone``) of a config tree by the transformers backbone of the same
    architecture (:func:`_native_backbone`) when the timm library is not installed — the option
    transformers' own DETR tests use (a ``ResNetConfig`` backbone).  Returns the replacements
    made (``"backbone_config: timm resnet50 → resnet"``)."""
    import importlib.util

    if importlib.util.find_spec("timm") is not None:
        return []
    from transformers import PretrainedConfig

    done = []
    for k, sub in list(vars(config).items()):
        if not isinstance(sub, PretrainedConfig):
            continue
        if sub.model_type == "timm_backbone":
            native = _native_backbone(sub)
            if native is not None:
                setattr(config, k, native)
                done.append(f"{k}: timm {getattr(sub, 'backbone', None)} → {native.model_type}")
        else:
            done += [f"{k}.{d}" for d in without_timm_backbones(sub)]
    if done and getattr(config, "use_timm_backbone", None) is True:
        config.use_timm_backbone = False
    return done


def _parent_configs(config) -> list[tuple[type, str]]:
    """``(parent config class, field)`` for the config classes of the same transformers package
    that hold a ``type(config)`` sub-config (``SamConfig.mask_decoder_config``)."""
    import importlib

    from transformers import PretrainedConfig

    ccls = type(config)
    try:
        mod = importlib.import_module(ccls.__module__)
    except Exception:  # noqa: BLE001
        return []
    found = []
    for obj in vars(mod).values():
        if not (isinstance(obj, type) and issubclass(obj, PretrainedConfig)) or obj is ccls:
            continue
        subs = dict(getattr(obj, "sub_configs", None) or {})
        for k, spec in (getattr(obj, "sub_configs_defaults", None) or {}).items():
            subs.setdefault(k, getattr(spec, "config_class", spec))
            if getattr(spec, "model_type", None) == ccls.model_type:  # AutoConfig of this model type
                subs[k] = ccls
        found += [(obj, k) for k, c in subs.items() if c is ccls]
    return found


def _shared_switches(sub, parent) -> list[str]:
    """The ``use_*`` flags that a sub-config and its parent config both declare and both leave
    False (IDEFICS' ``use_resampler``, on ``IdeficsConfig`` and ``IdeficsPerceiverConfig``): the
    parent builds the sub-config's module only when its flag is on."""
    return [f for f, v in vars(sub).items() if f.startswith("use_") and v is False
            and getattr(parent, f, None) is False]


def _switched_module(model: torch.nn.Module, switches: list[str]) -> torch.nn.Module | None:
    """The outermost module of ``model`` whose class the model does not build with the
    ``switches`` off (the same config otherwise, built on the meta device), or None."""
    config = copy.deepcopy(model.config)
    for f in switches:
        setattr(config, f, False)
    try:
        with torch.device("meta"):
            off = {type(m) for m in _instantiate(type(model), config, None).modules()}
    except Exception:  # noqa: BLE001
        return None
    return next((m for m in model.modules() if type(m) not in off), None)


class ParentFed(torch.nn.Module):
    """A submodule run on the inputs its parent model gave it in one forward: ``x`` replaces the
    recorded ``arg`` (a float tensor), the other recorded tensors are fixed buffers (batch 1
    broadcast to the batch of ``x``).  ``main_input_name`` is ``pixel_values`` when ``x`` is an
    image-like ``(B, C, H, W)`` tensor."""

    main_input_name = "pixel_values"

    def __init__(self, sub: torch.nn.Module, arg: str, fixed: dict[str, Any], config) -> None:
        super().__init__()
        self.sub, self.arg, self.config = sub, arg, config
        self._plain = {}
        for i, (k, v) in enumerate(fixed.items()):
            if k in ("cache", "past_key_values", "use_cache"):
                # the parent's KV cache holds its own run's keys: each call starts without one
                self._plain[k] = ("value", False if k == "use_cache" else None)
            elif isinstance(v, torch.Tensor):
                self.register_buffer(f"fixed_{i}", v.detach().clone(), persistent=False)
                self._plain[k] = f"fixed_{i}"
            elif isinstance(v, (list, tuple)) and v and all(isinstance(e, torch.Tensor) for e in v):
                # per-level feature maps: each a buffer (moved with the module's dtype)
                for j, e in enumerate(v):
                    self.register_buffer(f"fixed_{i}_{j}", e.detach().clone(), persistent=False)
                self._plain[k] = ("list", type(v), [f"fixed_{i}_{j}" for j in range(len(v))])
            else:
                self._plain[k] = ("value", v)

    #: whether the batch-1 buffers are expanded to the batch (else left to broadcast: a
    #: conditioning vector ``(1, D)`` that the parent makes broadcastable against ``(B, L, D)``,
    #: Voxtral Realtime's ``t_cond``); decided by the first call that runs
    expand: bool | None = None

    def _batched(self, ref: str, B: int) -> torch.Tensor:
        t = getattr(self, ref)
        return t.expand(B, *t.shape[1:]) if self.expand is not False and t.dim() and t.shape[0] == 1 else t

    def forward(self, pixel_values: torch.Tensor, output_attentions: bool = False):
        if self.expand is not None:
            return self._call(pixel_values)
        try:
            out, self.expand = self._call(pixel_values), True
        except RuntimeError:
            self.expand = False
            try:
                out = self._call(pixel_values)
            except RuntimeError:
                self.expand = None
                raise
        return out

    def _call(self, pixel_values: torch.Tensor):
        B = pixel_values.shape[0]
        kw = {}
        for k, ref in self._plain.items():
            if isinstance(ref, tuple) and ref[0] == "list":
                kw[k] = ref[1](self._batched(r, B) for r in ref[2])
            elif isinstance(ref, tuple):
                kw[k] = ref[1]
            else:
                kw[k] = self._batched(ref, B)
        return self.sub(**{self.arg: pixel_values}, **kw)


def _record_call(model: AuditModel, target: torch.nn.Module) -> dict[str, Any] | None:
    """The arguments (by name) ``target`` gets in one forward of ``model`` on a batch of 1, or
    None when the forward does not call it."""
    got: dict[str, Any] = {}

    def pre(_mod, args, kwargs):
        if not got:
            names = [n for n in _params(target) if n != "self"]
            got.update(dict(zip(names, args)), **kwargs)

    h = target.register_forward_pre_hook(pre, with_kwargs=True)
    try:
        with torch.no_grad():
            model.forward(model.make_inputs(1, generator=torch.Generator().manual_seed(0)))
    finally:
        h.remove()
    return got or None


def _prompted_call(parent: AuditModel, target: torch.nn.Module) -> dict[str, Any] | None:
    """The arguments ``target`` gets when the parent model is also given one optional prompt
    argument of its forward that it was not given (SAM 3's ``input_boxes``, which its forward
    needs before it calls its geometry encoder), built from the shape its docstring documents
    (:func:`documented_input` with ``prompts``); the arguments tried one at a time, in signature
    order.  None when no such argument makes the parent call ``target``."""
    model = parent.module
    g = torch.Generator().manual_seed(0)
    config = getattr(model, "config", None)
    dtype = next((w.dtype for w in model.parameters() if w.is_floating_point()), None)
    for name, p in _params(model).items():
        if p.default is not None or name in MAIN_INPUTS or "mask" in name or "label" in name:
            continue
        v = documented_input(model, name, config, g, prompts=True)
        if v is None:
            continue
        if dtype is not None and torch.is_tensor(v) and v.is_floating_point():
            v = v.to(dtype)  # a floating prompt follows the model's dtype, as the other inputs do

        def give(_mod, args, kwargs, name=name, v=v):
            return args, ({**kwargs, name: v} if kwargs.get(name) is None else kwargs)

        h = model.register_forward_pre_hook(give, with_kwargs=True)
        try:
            rec = _record_call(parent, target)
        except Exception:  # noqa: BLE001 - the parent rejects this prompt: the next one
            rec = None
        finally:
            h.remove()
        if rec is not None:
            return rec
    return None


def _first_conv_call(sub: torch.nn.Module, parent: AuditModel) -> dict[str, torch.Tensor] | None:
    """The input of a submodule that takes one tensor and opens with a 2-d convolution (SAM's
    mask embedding of prompt masks, which its parent model runs only when given masks): a random
    ``(1, in_channels, H, W)`` map at the parent's image side, by the name of the forward's one
    required argument; None for any other submodule."""
    req = _required_inputs(sub)
    first = next((m for m in sub.modules() if next(m.parameters(recurse=False), None) is not None), None)
    if len(req) != 1 or not isinstance(first, torch.nn.Conv2d):
        return None
    _, h, w = getattr(parent, "image_shape", None) or (None, 32, 32)
    g = torch.Generator().manual_seed(0)
    return {req[0]: torch.randn(1, first.in_channels, h, w, generator=g, dtype=first.weight.dtype)}


def _built_from_field(model: torch.nn.Module, field: str) -> torch.nn.Module | None:
    """The submodule that a module of ``model`` (outermost first) assigns in its ``__init__``
    from the sub-config ``config.<field>`` (``self.embed_audio = Embedder(config.audio_config,
    …)``, also behind a conditional expression), or None."""
    pat = re.compile(rf"self\.(\w+)\s*=\s*\(?\s*[\w.]+\(\s*config\.{re.escape(field)}\b")
    for mod in model.modules():
        try:
            src = inspect.getsource(type(mod).__init__)
        except (OSError, TypeError):
            continue
        for name in pat.findall(src):
            sub = getattr(mod, name, None)
            if isinstance(sub, torch.nn.Module):
                return sub
    return None


def _field_module_alone(spec: str, model_type: str, field: str, parents: list[AuditModel],
                        subs: list[torch.nn.Module]) -> list[AuditModel]:
    """Adapters of a parent's sub-config module that the parent's forward does not call on the
    audited inputs, run alone on the inputs its own forward takes (:func:`_adapter`, with the
    parent's shrunk ``config.<field>`` as its config), with the parent's weights."""
    out = []
    for p, sub in zip(parents, subs):
        sub, default = copy.deepcopy(sub), getattr(p.module.config, field)
        if not hasattr(sub, "config"):
            sub.config = default
        kind = "vision" if "pixel_values" in _required_inputs(sub) else "text"
        a, _ = _first_accepted_layout(spec, sub, kind, p.dtype)
        if p.variant != a.variant:  # the parent's other dispatch path, on the layout found
            a = _adapter(spec, sub, default, a.info.get("built_as", kind), p.variant, p.dtype,
                         a.info.get("input_layout_index", 0))
        a.info.update(model_type=model_type, parent=p.info["class"], shrink_level=p.info.get("shrink_level"),
                      audited_submodule=f"{type(sub).__name__}, built by {p.info['class']} from its "
                                        f"{field} ({type(default).__name__}), run alone (its forward does not call it on "
                                        "the audited inputs)")
        out.append(a)
    return out


def _build_through_parent(spec: str, model_type: str, default, need: NeedsParent, overrides, dtype: str,
                          sdpa: bool) -> list[AuditModel]:
    """Audit a sub-config type through the submodule its parent model builds from it: the parent
    (its own default config with this type's default as the sub-config) is built and run once;
    the submodule is then run alone on the recorded inputs, its first required argument that is
    a float tensor of one sample — an image-like ``(B, C, H, W)`` map such as SAM's image
    embeddings (or prompt points ``(B, P, N, 2)``), or a ``(B, L, D)`` sequence such as a DETR
    decoder's image features — being the checked one, the other recorded inputs fixed (batch 1
    broadcast).  A submodule the parent's forward does not call on its own inputs is run on a
    random map when it takes one tensor into a 2-d convolution (:func:`_first_conv_call`).  The
    submodule is audited as a vision model: bidirectional over its input by design, its masks
    being the ones its parent gave it.

    Raises:
        Unsupported: no parent builds, its forward does not call the submodule, or the submodule
            takes no such input (the reason, after ``need``'s).
    """
    import transformers as tf

    why = []
    for pcls, field in _parent_configs(default):
        try:
            pdefault = tf.AutoConfig.for_model(pcls.model_type)
            sub_default = copy.deepcopy(default)
            switches = _shared_switches(sub_default, pdefault) if not need.classes else []
            for f in switches:  # the sub-config's module exists only with its switch on (both configs')
                setattr(sub_default, f, True)
                setattr(pdefault, f, True)
            setattr(pdefault, field, sub_default)
            parents = _build_hf(spec, pcls.model_type, overrides, dtype, sdpa, default=pdefault)
        except Unsupported as exc:
            why.append(f"parent {pcls.model_type}: {_short(exc, 200)}")
            continue
        # the outermost class built from the config (the prompt encoder, not the positional
        # embedding it builds), in the parent's module order; a module that keeps its config must
        # have been built from this one (a layer class shared by a text and a vision tower)
        subs = [next((m for c in need.classes for m in p.module.modules() if type(m) is c
                      and isinstance(getattr(m, "config", default), type(default))), None) for p in parents]
        if not need.classes:  # no class of the package takes the config: the parent's module that keeps it
            subs = [next((m for m in p.module.modules() if m is not p.module
                          and isinstance(getattr(m, "config", None), type(default))), None) for p in parents]
        if subs[0] is None and switches:  # else the module that the switches add to the parent
            subs = [_switched_module(p.module, switches) for p in parents]
        built = [_built_from_field(p.module, field) for p in parents]
        if built[0] is not None and (subs[0] is None or _record_call(parents[0], subs[0]) is None):
            # else (or when the module found is not called) the module the parent's ``__init__``
            # builds from ``config.<field>`` (Gemma 4 unified's ``embed_audio``, a projection of
            # waveform frames that keeps no config; VibeVoice's diffusion head, whose timestep
            # embedding keeps it)
            subs = built
            if _record_call(parents[0], subs[0]) is None:
                # not called by the parent's forward on its audited inputs: run on its own
                try:
                    return _field_module_alone(spec, model_type, field, parents, subs)
                except Exception as exc:  # noqa: BLE001 - inputs the module alone cannot take: the
                    # parent given a prompt may call it (below)
                    why.append(f"{type(subs[0]).__name__} (built from {pcls.__name__}.{field}) alone: "
                               f"{type(exc).__name__}: {_short(exc, 160)}")
        if subs[0] is None:
            what = need.classes[0].__name__ if need.classes else "module"
            why.append(f"parent {pcls.model_type} builds no {what} from a {type(default).__name__}")
            continue
        rec, called = _record_call(parents[0], subs[0]), True
        if rec is None and "pixel_values" in _params(subs[0]) and set(_required_inputs(subs[0])) <= {"pixel_values"}:
            # an image tower the parent runs only on an image (GOT-OCR 2's vision encoder, built
            # from PP-Chart2Table's vision config): the parent's tower, run on images of its own
            try:
                return _parent_tower_on_images(spec, model_type, default, parents, subs)
            except Exception as exc:  # noqa: BLE001 - the tower refuses every image layout
                why.append(f"{type(subs[0]).__name__} (built by {parents[0].info['class']}) on images: "
                           f"{type(exc).__name__}: {_short(exc, 160)}")
                continue
        if rec is None:  # a branch the parent's forward takes only for inputs it was not given
            rec = _prompted_call(parents[0], subs[0])
        if rec is None:
            rec, called = _first_conv_call(subs[0], parents[0]), False
        if rec is None:
            why.append(f"{parents[0].info['class']}'s forward does not call its {type(subs[0]).__name__}")
            continue
        # the checked input: the first required argument that is a float tensor of one sample,
        # an image-like (B, C, H, W) map or a (B, L, D) sequence of feature vectors
        # (the required arguments first, then the optional ones in signature order: a stack whose
        # arguments are all optional, BLT's local encoder fed the byte embeddings)
        req = _required_inputs(subs[0])
        arg = next((n for n in [*req, *_params(subs[0])] if isinstance(v := rec.get(n), torch.Tensor)
                    and v.is_floating_point() and v.dim() in (3, 4) and v.shape[0] == 1), None)
        if arg is None:
            why.append(f"{type(subs[0]).__name__} takes no float (B, C, H, W) or (B, L, D) input "
                       f"(required: {', '.join(req) or 'none'})")
            continue
        shape = tuple(rec[arg].shape[1:])
        fixed = {k: v for k, v in rec.items() if k != arg}
        out, wrappers = [], []
        for p, sub in zip(parents, subs):
            wrapper = ParentFed(sub, arg, fixed, sub.config if hasattr(sub, "config") else default)
            wrappers.append(wrapper)
            a = _adapter(spec, wrapper, default, "vision", p.variant, p.dtype)
            a.input_makers = [lambda b, g, shape=shape: torch.randn(b, *shape, generator=g)]
            a.image_shape = shape
            a.source_objects = _sources(sub)  # the submodule's code, not the wrapper's
            src = (f"from {p.info['class']}" if called else f"drawn for its first convolution "
                   f"({p.info['class']}'s forward, on its own inputs, does not call it)")
            a.info.update(model_type=model_type, parent=p.info["class"], **{"class": type(sub).__name__},
                          input=f"{arg} {list(shape)} {src}", shrink_level=p.info.get("shrink_level"))
            out.append(a)
        x0 = out[0].make_inputs(2, generator=torch.Generator().manual_seed(0))
        try:
            out[0].forward(x0)
        except Exception as exc:  # noqa: BLE001
            why.append(f"{type(subs[0]).__name__} on its recorded inputs: {type(exc).__name__}: {_short(exc, 160)}")
            continue
        for w in wrappers[1:]:  # the other variants feed the same recorded inputs alike
            w.expand = wrappers[0].expand
        _keep_if_returned(out[0], x0)
        return out
    raise Unsupported(f"{need} ({'; '.join(dict.fromkeys(why)) or 'no parent config holds it'})")


def _parent_tower_on_images(spec: str, model_type: str, default, parents: list[AuditModel],
                            subs: list[torch.nn.Module]) -> list[AuditModel]:
    """The image towers ``subs`` that the ``parents`` (eager, SDPA) built from ``default``, each
    audited as a vision model on images (:func:`_first_accepted_layout`), when the parent's own
    audited forward runs without an image.

    Raises:
        the first layout's error when the tower accepts no image layout.
    """
    first, x0 = _first_accepted_layout(spec, subs[0], "vision", parents[0].dtype)
    layout = first.info.get("input_layout_index", 0)
    out = [first] + [_adapter(spec, sub, sub.config, "vision", p.variant, p.dtype, layout)
                     for p, sub in zip(parents[1:], subs[1:])]
    for a, p, sub in zip(out, parents, subs):
        a.info.update(model_type=model_type, parent=p.info["class"], shrink_level=p.info.get("shrink_level"),
                      audited_submodule=(f"{type(sub).__name__}, built by {p.info['class']} from its "
                                         f"{type(default).__name__}, run on images (the parent's forward "
                                         "calls it only with an image)"))
    _keep_if_returned(first, x0)
    return out


def _build_hf(spec: str, name: str, overrides: dict[str, Any] | None, dtype: str, sdpa: bool,
              default=None, encode_only: bool = False) -> list[AuditModel]:
    model_type, cls = resolve(name)
    if default is None:
        try:
            default = default_config(model_type)
        except Exception as exc:  # noqa: BLE001 - a config class that cannot even build its defaults
            raise Unsupported(f"default config of {model_type!r} cannot be built: {type(exc).__name__}: {exc}") from exc
    native = without_timm_backbones(default)
    respelled = repair_misspelled_fields(default)
    try:
        kind, cls = choose_class(model_type, default, cls)
    except NeedsParent as need:
        return _build_through_parent(spec, model_type, default, need, overrides, dtype, sdpa)
    except Unsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - a class that cannot be imported (optional dependency)
        raise Unsupported(f"no usable model class for {model_type!r}: {type(exc).__name__}: {_short(exc)}") from exc
    if encode_only:
        cls, kind = _without_forward(cls), "vision"
    if cls.forward is torch.nn.Module.forward and not encodes_images_only(cls):
        return _build_forward_submodel(spec, model_type, cls, default, overrides, dtype, sdpa)
    own_default, default = default, config_for_class(cls, default)
    if kind == "decoder" and getattr(default, "is_decoder", None) is False:
        # a causal-LM class whose config switches the causal mask (BERT-style decoders)
        overrides = {"is_decoder": True, **(overrides or {})}
    tdtype = DTYPES[dtype]
    errors, plain = [], None
    # each level as shrunk; the first level, when it fails, also with the windows its defaults
    # leave unset filled, with the clipping bounds they leave unset filled, with the plain
    # mappings they leave unset empty, with the width a linear layer is fed where its config field
    # disagrees (:func:`fill_fed_width`), with the sizes the shrink made equal kept apart
    # (:func:`keep_widths_distinct`), with one documented entry in the lists they leave empty
    # (:func:`documented_list_entries`), with the fields they leave unset set as documented, with
    # the sizes of an optional module they leave unset filled, with every backbone stage
    # returned (and the per-stage channel lists tied to them), with two layers of each per-layer
    # kind (weights tied across one kind's layers), then twice as wide when the tiny width would
    # equal a dimension the original keeps narrower than its widths (:func:`narrower_dims`)
    retries = [(LEVELS[0], "windows"), (LEVELS[0], "bounds"), (LEVELS[0], "mappings"), (LEVELS[0], "widths"),
               (LEVELS[0], "distinct"), (LEVELS[0], "lists"), (LEVELS[0], "documented"), (LEVELS[0], "sizes"),
               (LEVELS[0], "stages"), (LEVELS[0], "twice"), (LEVELS[0], "wider")]
    first_exc = None
    entries = documented_list_entries(default)
    for level, retry in [(LEVELS[0], "")] + retries + [(lv, "") for lv in LEVELS[1:]]:
        if retry == "lists" and not entries:
            continue
        narrow = narrower_dims(default) if retry == "wider" else []
        if retry == "wider" and not narrow:
            continue
        declared = declared_sub_configs(default) if retry == "stages" else (default, [])
        try:
            config = shrink_config(declared[0], level,
                                   {**entries, **(overrides or {})} if retry == "lists" else overrides,
                                   repeat=2 if retry == "twice" else 1, width=2 * HIDDEN if narrow else HIDDEN)
        except Exception as exc:  # noqa: BLE001
            if not retry:
                plain = None
                errors.append(f"shrink level {level}: {type(exc).__name__}: {_short(exc)}")
            continue
        fill = {"windows": fill_unset_windows, "bounds": fill_unset_bounds, "mappings": fill_unset_mappings,
                "widths": lambda c, o: fill_fed_width(c, first_exc, o),
                "distinct": lambda c, o: keep_widths_distinct(default, c, o),
                "documented": fill_unset_documented, "sizes": fill_unset_sizes,
                "stages": fill_all_backbone_stages}.get(retry)
        filled = declared[1] + (fill(config, overrides) if fill is not None else [])
        if fill is not None and not filled:
            continue
        if retry == "lists":
            filled = [f"{k} = {v} (a documented supported value; the default is empty)" for k, v in entries.items()]
        if retry == "twice":
            if plain is not None and config.to_dict() == plain.to_dict():
                continue  # no per-layer kinds: the same model again
            filled = ["two layers of each per-layer kind"]
        elif narrow:
            filled = [f"tiny width {2 * HIDDEN}: {', '.join(narrow)} stays below the hidden width"]
        elif not retry:
            plain = config
        try:
            with torch.device("meta"):  # count first: a level that keeps full widths can be huge
                meta = _instantiate(cls, config, None)
            if retry == "stages" and (tied := tie_stage_channels(config, _backbone_channels(meta))):
                filled = filled + tied  # the neck's per-stage widths: those the backbone returns
                with torch.device("meta"):
                    meta = _instantiate(cls, config, None)
            if not attention_modules(meta) and (head := _head_with_attention(model_type, config, cls)) is not None:
                # a base model without attention whose task class adds it (a text recognizer's
                # SVTR head over a CNN backbone): the task class is audited
                (kind, cls), meta = choose_class(model_type, default, head), head
                with torch.device("meta"):
                    meta = _instantiate(cls, config, None)
            n = sum(p.numel() for p in meta.parameters())
            if n > MAX_PARAMS:
                errors.append(f"level {level}{f' ({retry})' if retry else ''}: {n / 1e6:.0f} M parameters "
                              f"(limit {MAX_PARAMS / 1e6:.0f} M)")
                continue
            torch.manual_seed(0)
            base = _instantiate(cls, config, "eager")
            to_dtype(base, tdtype).eval()
            if kind == "text" and _audio_tensor_argument(base):
                kind = "audio"  # a waveform tower whose forward names its input otherwise
            audited, audited_kind = attention_bearer(base, kind)
            adapter, x0 = _first_accepted_layout(spec, audited, audited_kind, tdtype)
            if audited is not base:
                adapter.info["audited_submodule"] = f"{type(audited).__name__} (the encoder: the decoder has no attention)"
            _keep_if_returned(adapter, x0)
        except Exception as exc:  # noqa: BLE001 - try the next level
            if level == LEVELS[0] and not retry:
                first_exc = exc
            errors.append(f"level {level}{f' ({retry})' if retry else ''}: {type(exc).__name__}: {_short(exc)}")
            continue
        adapter.info["shrink_level"] = level
        if filled:
            adapter.info["filled"] = "; ".join(filled)
        if getattr(base, "attncheck_redrawn", None):
            adapter.info["uninitialized_weights"] = (f"{len(base.attncheck_redrawn)} parameters left unset by "
                                                     f"{cls.__name__}'s initialisation, drawn N(0, σ²): "
                                                     + ", ".join(base.attncheck_redrawn[:4]))
        if native:
            adapter.info["backbone"] = "; ".join(native)
        if respelled:
            adapter.info["misspelled_default"] = "; ".join(respelled)
        layout = adapter.info.get("input_layout_index", 0)
        models = [adapter]
        if sdpa:
            other, why = _sdpa_variant(spec, cls, config, base, adapter.info.get("built_as", kind), tdtype, layout)
            if other is not None:
                models.append(other)
            else:
                adapter.info["sdpa_unavailable"] = why
        return models
    shown = errors[:1] + ([errors[-1]] if len(errors) > 1 else [])
    reason = f"{cls.__name__} cannot be built tiny and run: " + "; ".join(shown)
    if not encode_only and kind == "vision" and _encodes_pixels(cls):
        # an image tokenizer whose forward also decodes, to a latent grid the config fixes (Janus's
        # VQ-VAE: num_patches² codes) that the audit's image does not fill: its encoder alone
        try:
            models = _build_hf(spec, name, overrides, dtype, sdpa, default=own_default, encode_only=True)
        except Unsupported as exc:
            reason += f"; through encode: {_short(exc, 200)}"
        else:
            for m in models:
                m.info["audited_submodule"] = (f"{cls.__name__}.encode(pixel_values), the encoder (its forward, "
                                               f"which also decodes, fails: {_short(errors[0], 160)})")
            return models
    if (not encode_only and (beyond := _inputs_beyond_the_audits(cls)) and not _parent_configs(own_default)
            and _attention_all_in_submodel(cls, default, overrides)):
        # a head whose forward needs inputs of its task (a decision head's marks and option
        # counts) over a backbone it builds from a sub-config (and no parent that feeds it):
        # the backbone, where all its attention is
        why = f"{cls.__name__}'s forward needs {', '.join(beyond)}, inputs of its task, besides the backbone's"
        try:
            return _build_forward_submodel(spec, model_type, cls, own_default, overrides, dtype, sdpa, why)
        except Unsupported as exc:
            reason += f"; through its backbone: {_short(exc, 200)}"
    if _parent_configs(own_default):
        # a model class whose forward needs what its parent model computes (a DETR decoder fed
        # text and image features, BLT's local encoder fed byte embeddings and patch ids): audited
        # through the parent, like a sub-config's submodule
        return _build_through_parent(spec, model_type, own_default, NeedsParent(reason, [cls]), overrides,
                                     dtype, sdpa)
    raise Unsupported(reason)


def _backbone_channels(model: torch.nn.Module) -> list[int]:
    """The channels of the stages a model's backbone returns (transformers' ``BackboneMixin.channels``,
    one per ``out_features`` entry); empty when the model has no such backbone."""
    for m in model.modules():
        if m is not model and isinstance(getattr(type(m), "channels", None), property) and hasattr(m, "out_features"):
            try:
                return [int(c) for c in m.channels]
            except Exception:  # noqa: BLE001 - a backbone whose stages are not declared yet
                continue
    return []


def _head_with_attention(model_type: str, config, base) -> type | None:
    """A class of transformers' auto mappings for ``model_type`` (a task class: ``…ForTextRecognition``)
    that builds ``base`` (its ``__init__`` names the class), takes the same inputs and, built on
    the meta device from ``config``, has attention modules (:func:`attention_modules`); None
    when no mapped class does."""
    from transformers.models.auto import modeling_auto as ma

    seen = {base}
    for mname in sorted(n for n in dir(ma) if n.startswith("MODEL_") and n.endswith("_MAPPING_NAMES")):
        if model_type not in _mapping(mname):
            continue
        c = _auto_class(mname, config)
        if c is None or c in seen or not _contains(c, base) or _required_inputs(c) != _required_inputs(base):
            continue
        seen.add(c)
        try:
            with torch.device("meta"):
                built = _instantiate(c, copy.deepcopy(config), None)
        except Exception:  # noqa: BLE001 - a task class the config cannot build
            continue
        if attention_modules(built):
            return c
    return None


def _encodes_pixels(cls) -> bool:
    """Whether a model class with a forward of its own also has an ``encode(pixel_values)``."""
    try:
        return (cls.forward is not torch.nn.Module.forward and callable(getattr(cls, "encode", None))
                and "pixel_values" in inspect.signature(cls.encode).parameters)
    except (TypeError, ValueError):
        return False


def _without_forward(cls) -> type:
    """A subclass of ``cls`` (same name, module and code) without its ``forward``, so that it is
    built and run through its ``encode`` (:class:`ImageEncoding`)."""
    return type(cls.__name__, (cls,), {"forward": torch.nn.Module.forward, "__module__": cls.__module__,
                                       "__qualname__": cls.__qualname__})


def forward_submodel_config(cls, config) -> tuple[str, Any] | None:
    """``(field, sub-config)`` of the first sub-config of ``config`` whose model class has a
    ``forward`` and is built by ``cls.__init__`` (its source names the class, or builds a
    module from ``config.<field>``: ``AutoModel.from_config(config.text_config)``), or None."""
    from transformers import PretrainedConfig

    try:
        src = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        src = ""
    for field, sub in vars(config).items():
        if not isinstance(sub, PretrainedConfig):
            continue
        try:
            _, sub_cls = choose_class(sub.model_type, sub)
        except Exception:  # noqa: BLE001 - a sub-config without a model class of its own
            continue
        if sub_cls.forward is not torch.nn.Module.forward and (
                _contains(cls, sub_cls) or re.search(rf"[\w.]+\(\s*config\.{re.escape(field)}\b", src)):
            return field, sub
    return None


def _attention_all_in_submodel(cls, config, overrides) -> bool:
    """Whether ``cls`` builds a sub-model from a sub-config (:func:`forward_submodel_config`)
    that holds every attention module of ``cls`` (counted on the meta device, the config shrunk
    at the first level): JEV's decision head over its backbone, not ESMFold2's folding trunk
    and structure module beside its protein language model."""
    found = forward_submodel_config(cls, config)
    if found is None:
        return False
    try:
        with torch.device("meta"):
            whole = _instantiate(cls, shrink_config(config, LEVELS[0], overrides), None)
    except Exception:  # noqa: BLE001 - a class the shrunk config cannot build
        return False
    sub = _built_from_field(whole, found[0])
    return sub is not None and len(attention_modules(whole)) == len(attention_modules(sub)) > 0


def _inputs_beyond_the_audits(cls) -> list[str]:
    """Required forward arguments of ``cls`` that are neither a main input the audit makes
    (:data:`MAIN_INPUTS`) nor a mask (a decision head's ``marks`` and ``question_type_ids``)."""
    return [n for n in _required_inputs(cls) if n not in MAIN_INPUTS and not n.endswith("mask")]


def _build_forward_submodel(spec: str, model_type: str, cls, default, overrides, dtype: str,
                            sdpa: bool, why: str = "") -> list[AuditModel]:
    """A mapped class without a ``forward`` of its own (Qwen2.5-Omni's
    ``ForConditionalGeneration``, whose ``generate`` runs its thinker), or whose forward needs
    inputs the audit cannot make (``why``: a decision head scoring options at marked tokens of
    the backbone it builds), is audited through the sub-model its ``__init__`` builds from a
    sub-config (:func:`forward_submodel_config`).

    Raises:
        Unsupported: no sub-config gives such a model (or that model is unsupported: its reason).
    """
    why = why or f"{cls.__name__} has no forward of its own"
    found = forward_submodel_config(cls, default)
    if found is None:
        raise Unsupported(f"{why} and builds no sub-model with one from its sub-configs")
    field, sub = found
    models = _build_hf(spec, sub.model_type, overrides, dtype, sdpa, default=copy.deepcopy(sub))
    for m in models:
        m.info.update(model_type=model_type, audited_submodule=f"{m.info['class']}, built from its {field} ({why})")
    return models


def config_for_class(cls, config):
    """The config ``cls`` is built from: ``config`` itself when it is an instance of the class's
    ``config_class``, else the first nested config that is (breadth first: a composite
    ``Llama4Config`` whose causal-LM class ``Llama4ForCausalLM`` takes the ``text_config``, a
    ``Llama4TextConfig``); ``config`` when none is."""
    from transformers import PretrainedConfig

    want = getattr(cls, "config_class", None)
    if not (isinstance(want, type) and issubclass(want, PretrainedConfig)) or isinstance(config, want):
        return config
    queue, seen = [config], set()
    while queue:
        c = queue.pop(0)
        if id(c) in seen:
            continue
        seen.add(id(c))
        if isinstance(c, want):
            return c
        queue += [v for v in vars(c).values() if isinstance(v, PretrainedConfig)]
    # a config of the same sub-config layout as the class's own (NougatConfig's encoder + decoder
    # for VisionEncoderDecoderModel, which its docstring builds from it): the class's config
    # holding the same sub-configs
    keys = set(getattr(want, "sub_configs_defaults", None) or getattr(want, "sub_configs", None) or {})
    if keys and keys == set(getattr(type(config), "sub_configs_defaults", None) or {}):
        try:
            return want(**{k: getattr(config, k) for k in keys})
        except Exception:  # noqa: BLE001 - the class's config rejects them: keep the config
            pass
    return config


def _first_accepted_layout(spec: str, model, kind: str, tdtype: torch.dtype) -> tuple[AuditModel, torch.Tensor]:
    """The adapter of the first input layout (:func:`_layouts_tried`) a forward accepts, and the
    inputs it ran on.  A vision model whose every layout fails because its image is too small
    for it — a convolution or pooling window exceeds the feature map (a text recognizer's CNN
    fed text-line crops of any size: the image is smaller than its total stride and final
    pooling window), or the model refuses the size itself (DepthPro tiles the image at several
    scales) — is retried on images of twice the side, up to :data:`MAX_GROWN_SIDE`; the
    side that runs is kept on the model (``attncheck_image_side``, :func:`model_image_shape`).
    A model that reports the image size it got against the one it takes (``Input image size
    (128*64) doesn't match model (64*64)``) after combining its images (SegGPT stacks the prompt
    image above the input image, its config declaring the stacked size) is retried once on images
    scaled by the reported ratio, where it divides the side exactly.

    Raises:
        the first layout's error when no layout (at any tried side) is accepted.
    """
    while True:
        try:
            return _layouts_tried(spec, model, kind, tdtype)
        except (RuntimeError, ValueError) as exc:
            _, h, w = model_image_shape(model, model.config)
            got = _SIZE_REFUSED.search(str(exc))
            if kind == "vision" and got and getattr(model, "attncheck_image_side", None) is None:
                gh, gw, wh, ww = map(int, got.groups())
                if gh and gw and (h * wh) % gh == 0 and (w * ww) % gw == 0 and (gh, gw) != (wh, ww):
                    model.attncheck_image_side = (h * wh // gh, w * ww // gw)
                    continue
            side = h
            if kind != "vision" or not _MAP_TOO_SMALL.search(str(exc)) or 2 * side > MAX_GROWN_SIDE:
                raise
            model.attncheck_image_side = 2 * side


def _layouts_tried(spec: str, model, kind: str, tdtype: torch.dtype) -> tuple[AuditModel, torch.Tensor]:
    """The adapter of the first input layout (:func:`_dense_variants`) a forward accepts, and the
    inputs it ran on; raises the first layout's error when none is accepted.  A token model whose
    forward itself refuses every id layout (a talker or code predictor fed by a parent's hidden
    states: ``input_ids`` refused, or no ``embed_tokens``) is then tried on ``inputs_embeds``
    ``(B, L, D)`` (kind ``"embeds"``: :func:`_features_adapter`), kept only with one output row
    per input position."""
    first_error, last = None, ""
    for k in (kind, "embeds"):
        if k == "embeds" and not (kind in ("text", "decoder", "encoder") and "inputs_embeds" in _params(model)
                                  and not isinstance(first_error, Unsupported)):
            break
        first_name = None
        for i in range(16):
            try:
                adapter = _adapter(spec, model, model.config, k, "eager", tdtype, i)
            except Unsupported:
                if k == kind:
                    raise
                continue  # not this width of inputs_embeds
            name = adapter.info.get("input_layout")
            if i and name in (None, first_name):
                break  # token models have one layout; dense layouts wrap around
            first_name = first_name or name
            try:
                x0 = adapter.make_inputs(2, generator=torch.Generator().manual_seed(0))
                adapter.forward(x0)
            except Exception as exc:  # noqa: BLE001 - try the next layout
                if first_error is None:
                    first_error = exc
                elif type(exc) is not type(first_error) or str(exc) != str(first_error):
                    last = f"{name}: {type(exc).__name__}: {_short(exc, 160)}"
                continue
            adapter.info["input_layout_index"] = i
            if k != kind:
                adapter.info["built_as"] = k
            return adapter, x0
    if last:
        raise type(first_error)(f"{first_error} (other inputs, {last})") if isinstance(
            first_error, (TypeError, ValueError, RuntimeError)) else first_error
    raise first_error


def _instantiate(cls, config, attn_implementation: str | None) -> torch.nn.Module:
    """A random-weight ``cls`` from a copy of ``config``: ``PreTrainedModel._from_config``, or
    ``cls(config)`` for a plain ``nn.Module`` tower (the attention implementation set on the
    config, where transformers' attention modules read it).  An attribute the model reads that
    the config tree lacks (one a parent config writes into its sub-configs) is filled into
    ``config`` (:func:`~attncheck.audit.shrink.fill_missing_attribute`), as are per-layer-type rotary
    parameters it lacks (:func:`~attncheck.audit.shrink.fill_missing_layer_rope`), and the build retried."""
    for _ in range(8):
        try:
            return _instantiate_once(cls, config, attn_implementation)
        except (AttributeError, KeyError) as exc:
            if fill_missing_attribute(config, exc) is None and fill_missing_layer_rope(config, exc) is None:
                raise
        except TypeError as exc:  # ``[w] + config.sizes`` on a tuple default (VitMatte's fusion_hidden_sizes)
            if "tuple" not in str(exc) or not _tuples_as_lists(config):
                raise
    return _instantiate_once(cls, config, attn_implementation)


def _tuples_as_lists(config) -> int:
    """Turn the tuple fields of a config tree into lists, in place, as a config loaded from a
    ``config.json`` has them (JSON has no tuples); returns how many fields changed."""
    from transformers import PretrainedConfig

    changed, queue, seen = 0, [config], set()
    while queue:
        c = queue.pop(0)
        if id(c) in seen:
            continue
        seen.add(id(c))
        for k, v in list(vars(c).items()):
            if isinstance(v, PretrainedConfig):
                queue.append(v)
            elif isinstance(v, tuple) and not k.startswith("_"):
                try:
                    setattr(c, k, list(v))
                    changed += 1
                except Exception:  # noqa: BLE001 - a field its validators keep a tuple
                    continue
    return changed


def _instantiate_once(cls, config, attn_implementation: str | None) -> torch.nn.Module:
    config = copy.deepcopy(config)
    with _nan_filled_empty():
        if hasattr(cls, "_from_config"):
            kw = {"attn_implementation": attn_implementation} if attn_implementation else {}
            # MoE experts as the reference loop, not torch._grouped_mm: the same per-token result at
            # any batch size, and it runs in float64 (the audit's reference for dtype noise)
            module = cls._from_config(config, experts_implementation="eager", **kw)
            if encodes_images_only(cls):
                module = ImageEncoding(module)
            elif (session := session_class(cls)) is not None:
                module = SessionTracked(module, session)
        else:
            if attn_implementation:
                config._attn_implementation = attn_implementation
            module = cls(config)
    if not hasattr(module, "config"):  # a plain tower that does not keep its config
        module.config = config
    _redraw_uninitialized(module)
    return module


@contextlib.contextmanager
def _nan_filled_empty():
    """Fill memory that ``torch.empty`` hands out with NaN while a model is built (PyTorch's
    ``torch.utils.deterministic.fill_uninitialized_memory``, active under
    ``torch.use_deterministic_algorithms``), so that a parameter the model's own initialisation
    skips is NaN every time instead of whatever the allocator returned."""
    import torch.utils.deterministic as det

    prev = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
            det.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])
        det.fill_uninitialized_memory = prev[2]


def _redraw_uninitialized(module: torch.nn.Module) -> list[str]:
    """Parameters the model's initialisation left unset (all NaN: :func:`_nan_filled_empty`),
    drawn from ``N(0, initializer_range²)`` (the config's ``initializer_range``, else 0.02, as
    transformers' ``_init_weights`` draws linear weights), so the audit runs on finite weights.
    Their names are kept in ``module.attncheck_redrawn`` (reported in the audit's info) and
    returned."""
    std = getattr(getattr(module, "config", None), "initializer_range", None)
    std = float(std) if isinstance(std, (int, float)) and not isinstance(std, bool) and std > 0 else 0.02
    names = []
    with torch.no_grad():
        for n, p in module.named_parameters():
            if p.is_floating_point() and p.numel() and p.device.type != "meta" and bool(torch.isnan(p).all()):
                p.normal_(0.0, std)
                names.append(n)
    if names:
        module.attncheck_redrawn = names
    return names


def attention_bearer(model: torch.nn.Module, kind: str) -> tuple[torch.nn.Module, str]:
    """``(module to audit, kind)``: a speech encoder-decoder whose decoder has no attention
    module (an RNN-T / TDT transducer: an LSTM prediction network and a joint network over the
    encoder's frames) is audited through its audio encoder, where all its attention is; any other
    model is audited whole."""
    if kind != "speech-seq2seq":
        return model, kind
    decoder = getattr(model, "decoder", None)
    try:
        encoder = model.get_encoder()
    except Exception:  # noqa: BLE001 - no encoder accessor: audit the model whole
        return model, kind
    if (isinstance(decoder, torch.nn.Module) and isinstance(encoder, torch.nn.Module) and encoder is not model
            and not attention_modules(decoder) and attention_modules(encoder)
            and getattr(encoder, "main_input_name", None) in ("input_features", "input_values")):
        return encoder, "audio"
    return model, kind


def _keep_if_returned(adapter: AuditModel, x: torch.Tensor) -> None:
    """Drop ``output_attentions`` support unless a forward with it returns attention maps."""
    if "output_attentions" not in adapter.supports:
        return
    try:
        ok = bool(adapter.forward(x, output_attentions=True).attentions)
    except Exception:  # noqa: BLE001
        ok = False
    if not ok:
        adapter.supports = adapter.supports - {"output_attentions"}


def _short(exc: BaseException, n: int = 300) -> str:
    s = " ".join(str(exc).split())
    return s if len(s) <= n else s[:n] + "…"


def to_dtype(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """``model.to(dtype)``, as ``from_pretrained(dtype=...)`` loads a model: in float16 the
    parameters and buffers whose names match the class's ``_keep_in_fp32_modules`` stay float32,
    in float16 and bfloat16 those matching ``_keep_in_fp32_modules_strict`` (transformers'
    ``modeling_utils``: a module name matches a parameter name by ``re.search``).  Returns
    ``model``."""
    model.to(dtype)
    names: list[str] = []
    if dtype in (torch.float16, torch.bfloat16):
        names += list(getattr(model, "_keep_in_fp32_modules_strict", None) or [])
    if dtype == torch.float16:
        names += list(getattr(model, "_keep_in_fp32_modules", None) or [])
    if names:
        keep = re.compile("|".join(re.escape(n) for n in names))
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            if t.is_floating_point() and keep.search(name):
                t.data = t.data.to(torch.float32)
    return model


def _sdpa_variant(spec, cls, config, base, kind, tdtype, layout: int = 0) -> tuple[AuditModel | None, str]:
    """The SDPA variant with the eager variant's weights, or ``(None, why not)``."""
    try:
        m = _instantiate(cls, config, "sdpa")
        m.load_state_dict(base.state_dict())
        to_dtype(m, tdtype).eval()
        m, kind = attention_bearer(m, kind)
        a = _adapter(spec, m, m.config, kind, "sdpa", tdtype, layout)
        a.forward(a.make_inputs(2, generator=torch.Generator().manual_seed(0)))
    except Exception as exc:  # noqa: BLE001 - no SDPA path: the eager variant is still audited
        return None, f"{type(exc).__name__}: {_short(exc)}"
    return a, ""


def _adapter(spec: str, model, config, kind: str, impl: str, tdtype: torch.dtype,
             input_layout: int = 0) -> AuditModel:
    tcfg = _text_config(config)
    accepts = _params(model)
    main = getattr(model, "main_input_name", "input_ids")
    if isinstance(main, (list, tuple)):  # several main inputs (OneFormer's pixel_values, task_inputs): the first
        main = main[0] if main else "input_ids"
    mods = attention_modules(model)
    facts = [module_facts(m) for _, m in mods]
    heads = next((f["heads"] for f in facts if f["heads"]), None)
    kv = next((f["kv_heads"] for f in facts if f["kv_heads"]), None) or heads
    head_dim = next((f["head_dim"] for f in facts if f["head_dim"]), None)
    vocab = getattr(tcfg, "vocab_size", None)
    if vocab is None and "input_ids" in accepts:
        vocab = _first_embedding_rows(model)
    # a codebook-token tower whose only required argument names its ids otherwise (an audio
    # tokenizer's embeddings: ``audio_input_ids`` of ``codebook_size`` ids per codebook)
    req = _required_inputs(model)
    ids_arg = "input_ids" if "input_ids" in accepts or len(req) != 1 or not req[0].endswith("input_ids") else req[0]
    if ids_arg != "input_ids" and vocab is None:
        vocab = getattr(tcfg, "codebook_size", None)
    vocab = vocab if isinstance(vocab, int) and vocab > LOW_IDS + RESERVED_TOP else None
    pad = getattr(tcfg, "pad_token_id", None)
    pad = pad if isinstance(pad, int) and vocab and 0 <= pad < vocab else 0
    window = config_value(tcfg, "sliding_window")
    window = window if isinstance(window, int) and not isinstance(window, bool) else None
    if getattr(tcfg, "use_sliding_window", True) is False:
        window = None
    layer_types = getattr(tcfg, "layer_types", None)
    supports = {"attention_mask"} if "attention_mask" in accepts else set()
    takes_kwargs = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in accepts.values())
    if impl == "eager" and ("output_attentions" in accepts or takes_kwargs):
        supports.add("output_attentions")  # kept only when a forward returns them (build_hf)
    encoded = isinstance(model, ImageEncoding)  # reported as the tokenizer's class, run through encode
    wrapped = isinstance(model, (ImageEncoding, SessionTracked))
    info = {"model_type": config.model_type, "class": type(model.model if wrapped else model).__name__,
            "attn_implementation": impl,
            "num_layers": getattr(tcfg, "num_hidden_layers", None), "num_heads": heads,
            "num_kv_heads": kv, "head_dim": head_dim, "hidden_size": getattr(tcfg, "hidden_size", None),
            "sliding_window": window, "vocab_size": vocab, "dtype": str(tdtype).replace("torch.", ""),
            "attention_modules": len(mods)}
    sinks = sorted({f["class"] for f in facts if f["sinks"]})
    if sinks:
        info["attention_sinks"] = sinks
    if encoded:
        info["method"] = "encode"
    if isinstance(model, SessionTracked):
        info["method"] = (f"{model.arg}: a {model.session_cls.__name__} per clip, one object prompted by a mask "
                          "on frame 0, tracked frame by frame")
    def retype(dt: torch.dtype) -> AuditModel:
        return _adapter(spec, to_dtype(copy.deepcopy(model), dt), config, kind, impl, dt, input_layout)

    common = dict(spec=spec, module=model, variant=impl, retype_fn=retype, num_heads=heads, num_kv_heads=kv,
                  head_dim=head_dim, expected_scale=None, scale_note="", source_objects=_sources(model),
                  info=info, seq_len=SEQ_LEN, attention_modules=mods, dtype=tdtype)

    def cast(x):
        return x.to(tdtype) if x.is_floating_point() else x

    g0 = torch.Generator().manual_seed(1234)

    if kind == "vision" and main not in accepts:
        main = next((n for n in accepts if n.startswith("pixel_values") or n == "flattened_patches"), None) or next(
            (n for n in _required_inputs(model) if not n.endswith(("grid_thw", "merge_sizes"))), "pixel_values")
    if kind == "audio" and main not in accepts:  # a main_input_name inherited from another tower
        main = next((n for n in ("input_values", "input_features") if n in accepts), None) or _audio_tensor_argument(
            model) or main
    if kind == "series":
        main = "past_values"
    if kind in ("vision", "audio", "series"):
        variants = _dense_variants(model, config, main, kind)
        layout, maker, to_kwargs, batched = variants[input_layout % len(variants)]

        def fwd_dense(x, attention_mask=None, position_ids=None, output_attentions=False):
            kw = {"output_attentions": True} if output_attentions else {}
            if "generator" in accepts:  # a forward that draws noise (vocoders): the same draws each call
                kw["generator"] = torch.Generator().manual_seed(0)
            o = model(**{k: cast(v) for k, v in to_kwargs(x).items()}, **kw)
            out = _per_sample_output(o, x.shape[0], batched)
            return Forward(out, _attentions(o) if output_attentions else None)

        info["input"] = main
        info["input_layout"] = layout
        # bidirectional unless every attention module declares ``is_causal`` (a decoder-only
        # forecaster such as TimesFM, a streaming audio codec's causal transformer such as Mimi)
        causal = bool(facts) and all(f["is_causal"] is True for f in facts)
        if causal and window is None:  # a window the attention modules declare (a past horizon)
            window = next((f["sliding_window"] for f in facts if f["sliding_window"]), None)
        return AuditModel(kind=kind, causal=causal,
                          input_kind={"vision": "pixels", "audio": "audio", "series": "series"}[kind],
                          forward_fn=fwd_dense, input_makers=[maker], sliding_window=window if causal else None,
                          image_shape=model_image_shape(model, config) if kind == "vision" else None,
                          supports=frozenset(s for s in supports if s == "output_attentions"), **common)

    if kind == "embeds":  # a token model fed its parent's embeddings (:func:`_first_accepted_layout`)
        return _features_adapter(model, config, "inputs_embeds", facts, supports, input_layout, cast, info, common,
                                 per_position_only=True)
    if ids_arg not in accepts and (feats := _feature_input(model, config)) is not None:
        return _features_adapter(model, config, feats, facts, supports, input_layout, cast, info, common)
    if vocab is None and "input_ids" not in accepts and (steps := documented_steps(model, config)) is not None:
        return _steps_adapter(model, steps, facts, supports, cast, info, common)
    if vocab is None:
        if "input_ids" not in accepts:
            need = ", ".join(_required_inputs(model)) or "no required tensor"
            raise Unsupported(f"{type(model).__name__}: its forward takes {need} — not token ids, pixels or "
                              "audio the audit can make")
        raise Unsupported(f"{type(model).__name__}: no vocab_size in the text config")
    lo, hi = LOW_IDS, vocab - RESERVED_TOP
    enc_dec = kind in ("seq2seq", "speech-seq2seq")
    cache_kw = "cache" if "cache" in accepts else "past_key_values"

    if enc_dec:
        if kind == "speech-seq2seq":
            enc_main = main if main != "input_ids" else "input_features"
            options = [{enc_main: mk(1, g0)} for mk in _audio_candidates(config, enc_main)]
            if main == "input_ids" and not any(n in accepts for n in ("input_features", "input_values")):
                # a forward that takes no audio: a text encoder (Dia, text to speech)
                ids = torch.randint(lo, hi, (1, ENC_LEN), generator=g0)
                options = _encoder_input_options(ids, config, accepts, g0)
        else:
            ids = torch.randint(lo, hi, (1, ENC_LEN), generator=g0)
            options = _encoder_input_options(ids, config, accepts, g0)
        enc_kw = options[input_layout % len(options)]
        # a decoder of audio codebooks (Dia's ``decoder_input_ids`` (B, L, K)): each codebook
        # layout of :func:`codebook_ids`, after plain (B, L) ids
        dec_k = _codebook_count(getattr(config, "decoder_config", None) or tcfg)
        dec_forms = [None, *(CODEBOOK_FORMS if dec_k else ())]
        dec_form = dec_forms[input_layout // len(options) % len(dec_forms)]
        info["input_layout"] = "+".join(enc_kw) + (f"#{input_layout % len(options)}" if len(options) > 1 else "") + (
            f" decoder_input_ids as {dec_k} codebooks {dec_form}" if dec_form else "")

        def dec_ids(x):
            return x if dec_form is None else codebook_ids(x, dec_k, dec_form, lo, hi)

        def dec_out(o, B, L):  # per-codebook logits (B·K, L, V) folded to (B, L, K·V)
            out = _find_seq(o, B, L)
            return _fold_codebooks(o, B, L, dec_k) if out is None and dec_form else out

        def enc_inputs(b):
            return {k: cast(v.expand(b, *v.shape[1:])) for k, v in enc_kw.items()}

        def fwd_s2s(x, attention_mask=None, position_ids=None, output_attentions=False):
            kw = {"output_attentions": True} if output_attentions else {}
            o = model(**enc_inputs(x.shape[0]), decoder_input_ids=dec_ids(x), decoder_attention_mask=attention_mask,
                      use_cache=False, **kw)
            out = dec_out(o, x.shape[0], x.shape[1])
            return Forward(out, _attentions(o) if output_attentions else None)

        def decode_s2s(x, prefill):
            enc = model.get_encoder()(**enc_inputs(x.shape[0]))
            outs, past = [], None
            steps = [(0, prefill)] + [(t, t + 1) for t in range(prefill, x.shape[1])]
            for a, b in steps:
                o = model(encoder_outputs=enc, decoder_input_ids=dec_ids(x[:, a:b]), use_cache=True,
                          **{cache_kw: past})
                past = _cache_of(o)
                step = dec_out(o, x.shape[0], b - a)
                if step is None:
                    raise Unsupported("an incremental decoding step returns no per-position output")
                outs.append(step)
            return torch.cat(outs, dim=1)

        enc_len = int(enc_kw["input_ids"].shape[-1]) if "input_ids" in enc_kw else None

        def pattern_s2s(shape, ordinal=None, module=None):
            if module is not None and module.get("cross"):
                return ("full", None)
            if enc_len is not None and shape[0] == enc_len and shape[1] == enc_len:
                return ("full", None)
            if shape[0] != shape[1]:
                return ("full", None)  # cross-attention (decoder queries × encoder keys)
            return ("causal", None) if shape[0] == SEQ_LEN else ("full", None)

        sup = set(supports) | {"cache"}
        if "decoder_attention_mask" in accepts:
            sup.add("attention_mask")
        else:
            sup.discard("attention_mask")
        info["encoder_input"] = ", ".join(enc_kw)
        return AuditModel(kind="seq2seq", causal=True, input_kind="tokens", vocab_size=vocab,
                          token_range=(lo, hi), pad_id=pad, forward_fn=fwd_s2s, decode_fn=decode_s2s,
                          enc_len=enc_len, expected_pattern_fn=pattern_s2s, supports=frozenset(sup), **common)

    if "position_ids" in accepts:
        supports.add("position_ids")
    layouts = [({k: v for k, v in f.items() if k != ids_arg}, t)
               for f, t in _token_input_layouts(model, config, kind, accepts, g0)]
    K = _codebook_count(tcfg)
    # the codebooks alone, or with a text stream beside them (one more id per frame)
    forms = [(None, None)] + [(f, n) for n in ((K, K + 1) if K else ()) for f in CODEBOOK_FORMS]
    (extra, per_token) = layouts[input_layout % len(layouts)]
    if "input_features" in per_token:
        # audio frames drawn per sequence length: padding the ids would change the audio of the
        # real positions too (a padded processor input pads the audio alike), so no padding check
        supports.discard("attention_mask")
        info["padding_unsupported"] = "the audio frames beside each token cannot be padded with the ids"
    form, K = forms[input_layout // len(layouts) % len(forms)]
    info["input_layout"] = "+".join([ids_arg, *(f"{k}(B,T,C,H,W)" if v.dim() == 5 else f"{k}{list(v.shape[1:])}"
                                                    if k in ("input_values", "input_features") else k
                                                    for k, v in extra.items()),
                                     *per_token]) + (f" as {K} codebooks {form}" if form else "")

    # a model that inserts its image features at the positions a mask marks (Kosmos-2): that many
    # placeholder ids before the checked ones, marked (the ids are then at rows n… of the output)
    slots = _feature_slots(model, config) if "pixel_values" in extra else None
    if slots is not None:
        supports.discard("position_ids")  # the positions of the ids are behind the placeholders
        info["input_layout"] += f" after {slots[1]} image placeholders ({slots[0]})"

    def ids_in(x):
        ids = x if form is None else codebook_ids(x, K, form, lo, hi)
        if slots is not None:
            ids = torch.cat([torch.full((ids.shape[0], slots[1]), lo, dtype=ids.dtype, device=ids.device), ids], 1)
        return ids

    def seq_out(o, B, L):
        out = _find_seq(o, B, L)
        return out if out is not None or form is None else _fold_codebooks(o, B, L, K)

    def kw_for(x, attention_mask=None, position_ids=None, output_attentions=False):
        kw = {}
        if position_ids is not None:
            kw["position_ids"] = position_ids
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask
        if "use_cache" in accepts:
            kw["use_cache"] = False
        if output_attentions:
            kw["output_attentions"] = True
        for k, v in extra.items():
            kw[k] = cast(v.expand(x.shape[0], *v.shape[1:]).contiguous())  # models may .view() it
        for k, fn in per_token.items():
            kw[k] = cast(fn(x))
        if slots is not None:
            first = torch.ones(x.shape[0], slots[1], dtype=torch.long, device=x.device)
            kw[slots[0]] = torch.cat([first, torch.zeros(x.shape[:2], dtype=torch.long, device=x.device)], 1)
            if attention_mask is not None:
                kw["attention_mask"] = torch.cat([first.to(attention_mask.dtype), attention_mask], 1)
        return kw

    def run_ids(x):
        return model(**{ids_arg: ids_in(x)}, **kw_for(x))

    located: dict[str, Any] = {}  # where the tokens' rows are in an output with no (B, L, …) tensor

    def fwd_tokens(x, attention_mask=None, position_ids=None, output_attentions=False):
        kw = kw_for(x, attention_mask, position_ids, output_attentions)
        o = model(**{ids_arg: ids_in(x)}, **kw)
        out = seq_out(o, x.shape[0], x.shape[1])
        if out is None and hidden_states_ok:
            # an encoder that returns only a pooled vector (DPR): its last per-position hidden state
            oh = model(**{ids_arg: ids_in(x)}, output_hidden_states=True, **kw)
            out = _last_hidden_state(oh, x.shape[0], x.shape[1])
        if out is None:
            if not located:
                located.update(locate_token_rows(run_ids, torch.randint(lo, hi, (2, SEQ_LEN), generator=
                                                                       torch.Generator().manual_seed(7)), lo, hi))
                if not located:
                    raise Unsupported(f"{type(model).__name__} returns no per-position output of shape (B, L, …) "
                                      "and no per-sample output that follows its ids")
                adapter.supports = adapter.supports - {"cache"}  # decoding steps: per position only
                adapter.decode_fn = None
                adapter.per_position = located["offset"] is not None
                info["output"] = located["what"]
            t = _output_at(o, located["path"])
            off = located["offset"]
            out = t if off is None else t[:, off:off + x.shape[1]]
        return Forward(out, _attentions(o) if output_attentions else None)

    hidden_states_ok = "output_hidden_states" in accepts or takes_kwargs

    decode_fn = None
    causal = {"decoder": True, "encoder": False}.get(kind)
    if kind == "decoder" and cache_kw in accepts and not extra and not per_token:
        supports.add("cache")  # incremental decoding feeds ids only

        def decode_tokens(x, prefill):
            past = None  # the model makes its own cache (some use their own cache classes)
            outs = []
            steps = [(0, prefill)] + [(t, t + 1) for t in range(prefill, x.shape[1])]
            for a, b in steps:
                o = model(**{ids_arg: ids_in(x[:, a:b])}, use_cache=True, **{cache_kw: past})
                past = _cache_of(o)
                if past is None and b < x.shape[1]:
                    # a stateful model (RecurrentGemma: recurrent and convolution states kept in
                    # its modules) resets its state when a step gets no cache
                    raise Unsupported(f"{type(model).__name__} returns no cache to continue decoding from")
                step = seq_out(o, x.shape[0], b - a)
                if step is None:
                    raise Unsupported("an incremental decoding step returns no per-position output")
                outs.append(step)
            decode_tokens.kept_keys = _kept_keys(past)
            return torch.cat(outs, dim=1)

        decode_tokens.kept_keys = None
        decode_fn = decode_tokens

    def bidirectional_module(module):
        # a module of a decoder that declares ``is_causal = False`` (a block-diffusion model's
        # canvas decoder): bidirectional by its design, a band around each query where it has a
        # window; the model's output causality is still checked by the causality check
        return ("band", None) if module.get("sliding_window") else ("unknown", None)

    pattern_fn = None
    if kind == "decoder" and layer_types and isinstance(layer_types, (list, tuple)):
        types = [str(t) for t in layer_types]
        info["layer_types"] = types

        def per_layer(shape, ordinal=None, module=None):
            if module is not None and module.get("is_causal") is False:
                return bidirectional_module(module)
            if module is not None and module.get("layer_type"):
                t = module["layer_type"]
            elif module is not None and module.get("layer") is not None:
                t = types[module["layer"] % len(types)]
            elif ordinal is not None and ordinal < len(types):
                # a map no attention module claimed: the ordinal-th layer's type, while there are
                # no more maps than layers (past that, other stacks — an encoder, a vision tower —
                # make maps too and the ordinal no longer names a layer)
                t = types[ordinal]
            else:
                return ("unknown", None)
            if "sliding" in t or "local" in t or "chunk" in t:
                w = (module or {}).get("sliding_window") or window
                return ("sliding", int(w)) if w else ("unknown", None)
            return ("causal", None)

        pattern_fn = per_layer
    if kind == "decoder" and pattern_fn is None:
        def per_module(shape, ordinal=None, module=None):
            if module is not None and module.get("is_causal") is False:
                return bidirectional_module(module)
            w = (module or {}).get("sliding_window")
            if w:
                return ("sliding", int(w))
            if module is not None and module.get("layer_type"):
                return ("causal", None)
            if module is not None and module.get("config_window") and module.get("config_class") != type(tcfg).__name__:
                # a stack built from a nested config of its own that declares a window (BLT's
                # entropy patcher and local encoder beside its global transformer)
                return ("sliding", int(module["config_window"]))
            return ("sliding", window) if window else ("causal", None)

        pattern_fn = per_module
    enc_states = extra.get("encoder_hidden_states")
    if enc_states is not None:
        common = {**common, "enc_len": int(enc_states.shape[1])}
    adapter = AuditModel(kind=kind, causal=causal, input_kind="tokens", vocab_size=vocab, token_range=(lo, hi),
                         pad_id=pad, forward_fn=fwd_tokens, decode_fn=decode_fn,
                         sliding_window=window if kind == "decoder" else None,
                         expected_pattern_fn=pattern_fn, supports=frozenset(supports), **common)
    return adapter


def _float_paths(o, path: tuple = ()):
    """``(path, tensor)`` for the float tensors of a model output, in order: a path is the keys
    (of a ``ModelOutput`` / dict) and indices (of a tuple / list) that lead to the tensor, the same
    whatever else the output holds (attention maps asked for or not)."""
    from collections.abc import Mapping

    if isinstance(o, torch.Tensor):
        if o.is_floating_point():
            yield path, o
        return
    items = o.items() if isinstance(o, Mapping) else (enumerate(o) if isinstance(o, (tuple, list)) else ())
    for k, v in items:
        yield from _float_paths(v, (*path, k))


def _output_at(o, path: tuple) -> torch.Tensor:
    for k in path:
        o = o[k]
    return o


def locate_token_rows(run: Callable[[torch.Tensor], Any], x: torch.Tensor, lo: int, hi: int) -> dict[str, Any]:
    """Where the rows of the ``L`` tokens of ``x`` ``(B ≥ 2, L)`` are in the output of a model that
    returns no ``(B, L, …)`` tensor (``run(x)``: the output for ids ``x``):

    - a sequence of more rows ``(B, L + n, …)`` (the tokens beside ``n`` others: ViLT's image
      patches, a text tower's appended class token) holds the tokens at the rows ``off … off + L - 1``
      when changing token ``j`` moves row ``off + j`` most (strictly), for the first and the last
      token of every sample (the residual stream carries each token's own embedding: He et al.
      2016; Vaswani et al. 2017) → ``{"path", "offset": off, "what"}``;
    - else the first float output of one row per sample ``(B, …)`` (a pooled vector, the
      decoder queries of a Perceiver: Jaegle et al. 2021) that a change of the sample's own ids
      moves and a change of the other samples' ids leaves exactly as it was (not a batch-wide
      similarity matrix of contrastive logits) → ``{"path", "offset": None, "what"}``;
    - ``{}`` when neither exists.

    Every run draws the same random numbers (a model that samples, such as ViLT's patch
    selection, is compared with itself).
    """
    B, L = x.shape

    def outputs(y) -> dict:
        with torch.random.fork_rng(devices=[]):  # the same draws in every run (ViLT samples its patches)
            torch.manual_seed(0)
            return dict(_float_paths(run(y)))

    def changed(pos: tuple) -> dict:
        y = x.clone()
        y[pos] = lo + (y[pos] - lo + 1) % (hi - lo)
        return outputs(y)

    base = outputs(x)

    first, last = changed((slice(None), 0)), changed((slice(None), L - 1))
    for path, t in base.items():
        if t.dim() < 3 or t.shape[0] != B or t.shape[1] <= L:
            continue
        if first.get(path) is None or last.get(path) is None or first[path].shape != t.shape:
            continue
        rows = []
        for other, j in ((first[path], 0), (last[path], L - 1)):
            d = (other - t).abs().flatten(2).amax(-1)  # (B, rows)
            top = d.topk(2, dim=1)
            if not bool((top.values[:, 0] > top.values[:, 1]).all()):
                break
            r = top.indices[:, 0]
            if not bool((r == r[0]).all()):
                break
            rows.append(int(r[0]) - j)
        if len(rows) == 2 and rows[0] == rows[1] and 0 <= rows[0] <= t.shape[1] - L:
            n = t.shape[1] - L
            return {"path": path, "offset": rows[0],
                    "what": f"{'.'.join(map(str, path))}: rows {rows[0]}…{rows[0]}+L of (B, L + {n}, …)"}
    own = changed((0, slice(None)))
    others = changed((slice(1, None), slice(None)))
    for path, t in base.items():
        if t.dim() < 2 or t.shape[0] != B or own.get(path) is None or others.get(path) is None:
            continue
        if own[path].shape != t.shape or others[path].shape != t.shape:
            continue
        if torch.equal(others[path][0], t[0]) and not torch.equal(own[path][0], t[0]):
            return {"path": path, "offset": None,
                    "what": f"{'.'.join(map(str, path))} {list(t.shape[1:])} per sample (no row per token)"}
    return {}


#: layouts of ``input_ids`` for a model whose tokens are parallel codebooks of an audio codec
#: (one id per codebook per frame): ``(B·K, L)`` rows (MusicGen), ``(B, K, L)``, ``(B, L, K)``
CODEBOOK_FORMS = ("(B*K,L)", "(B,K,L)", "(B,L,K)")


def _codebook_count(config) -> int | None:
    """Codebooks per frame (``num_codebooks``; else the ``num_channels`` of a token config, Dia's
    audio channels: one codebook each, offset into a shared vocab) a token model's config
    declares, when more than one.  The codebook layouts are tried only after plain ``(B, L)``
    ids fail."""
    k = getattr(config, "num_codebooks", None)
    if k is None and isinstance(getattr(config, "vocab_size", None), int):
        k = getattr(config, "num_channels", None)
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 1 else None


def codebook_ids(x: torch.Tensor, k: int, form: str, lo: int, hi: int) -> torch.Tensor:
    """The ``k`` codebook ids of each frame of ``x`` ``(B, L)`` (long, in ``[lo, hi)``), laid out
    as ``form`` (:data:`CODEBOOK_FORMS`).  Codebook ``c`` of a frame is a shift of its id, so the
    frames stay where the ids are: changing frame ``j`` of ``x`` changes only frame ``j``'s codes."""
    n = hi - lo
    codes = torch.stack([lo + (x - lo + 7 * c) % n for c in range(k)], dim=1)  # (B, K, L)
    if form == "(B*K,L)":
        return codes.reshape(-1, x.shape[-1])
    return codes if form == "(B,K,L)" else codes.transpose(1, 2).contiguous()


def _fold_codebooks(o, B: int, L: int, k: int) -> torch.Tensor | None:
    """The per-frame output ``(B, L, …)`` of a codebook model whose outputs are per codebook:
    ``(B·K, L, …)`` rows or ``(B, K, L, …)``, folded to ``(B, L, K·…)``; None when there is none."""
    rows = _find_seq(o, B * k, L)
    if rows is not None:
        return rows.reshape(B, k, L, -1).transpose(1, 2).reshape(B, L, -1)
    for t in _floats(o):
        if t.dim() >= 3 and tuple(t.shape[:3]) == (B, k, L):
            return t.transpose(1, 2).reshape(B, L, -1)
    return None


#: forward arguments that take a sequence of feature vectors ``(B, L, D)`` (a tower fed by another
#: model's hidden states, a vocoder fed spectrogram frames)
_FEATURE_ARGS = re.compile(r"(^|_)(hidden_states|inputs_embeds|embeds|context|latents|spectrogram|features)$")
_FEATURE_DIM_KEYS = re.compile(r"(^|_)(hidden_size|d_model|dim|embed_dim|input_dim|input_size|input_feat_per_channel|"
                               r"num_mel_bins|mel_dim|feature_size|model_in_dim|latent_dim|hidden_dim|channels|"
                               r"in_channels|num_channels)$")


def _upsampled_seq(o, B: int, L: int) -> torch.Tensor | None:
    """The waveform of a decoder that upsamples its ``L`` input frames by a whole factor
    ``r > 1`` (an audio codec's decoder: latents ``(B, D, L)`` → mono or stereo audio
    ``(B, C ≤ 2, r·L)``), folded to one row per input frame ``(B, L, C·r)``; None when no float
    output has that shape (a resampler's ``(B, latents, D)`` has more than 2 rows per sample)."""
    for t in _floats(o):
        if t.dim() == 3 and t.shape[0] == B and t.shape[1] <= 2 and t.shape[-1] > L and t.shape[-1] % L == 0:
            r = t.shape[-1] // L
            return t.reshape(B, t.shape[1], L, r).permute(0, 2, 1, 3).reshape(B, L, -1)
    return None


def _feature_input(model, config) -> str | None:
    """The forward argument of a model fed feature vectors (:data:`_FEATURE_ARGS`): its first
    required argument; every other required argument must be a mask (filled with ones) or a
    conditioning input :func:`conditioning_inputs` can make."""
    req = _required_inputs(model)
    if not req or not _FEATURE_ARGS.search(req[0]):
        return None
    others = [n for n in req[1:] if not n.endswith("mask")]
    if others and conditioning_inputs(model, others, torch.Generator().manual_seed(0)) is None:
        return None
    return req[0]


def conditioning_inputs(model, names: list[str], g: torch.Generator) -> dict[str, torch.Tensor] | None:
    """Batch-1 values for required forward arguments that condition the checked sequence (a
    draft model's context states, a diffusion block's codes), each read from the submodule the
    forward first applies to it (``self.<sub>(name)`` in its source): a float sequence
    ``(1, ENC_LEN, in_features)`` of that submodule's first ``nn.Linear``, or ids
    ``(1, ENC_LEN)`` in ``[0, num_embeddings)`` of its first ``nn.Embedding``.  None when an
    argument is not passed straight to a submodule of one of those kinds."""
    try:
        src = inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        return None
    out = {}
    for name in names:
        m = re.search(rf"\bself\.(\w+)\(\s*{re.escape(name)}\b", src)
        sub = getattr(model, m.group(1), None) if m else None
        if not isinstance(sub, torch.nn.Module):
            return None
        first = next((x for x in sub.modules() if isinstance(x, (torch.nn.Linear, torch.nn.Embedding))), None)
        if isinstance(first, torch.nn.Linear):
            out[name] = torch.randn(1, ENC_LEN, first.in_features, generator=g)
        elif isinstance(first, torch.nn.Embedding):
            out[name] = torch.randint(0, first.num_embeddings, (1, ENC_LEN), generator=g)
        else:
            return None
    return out


def _feature_dims(config) -> list[int]:
    """Candidate feature widths ``D``: the config's width-like fields (hidden size, input dim, mel
    bins …), in field order, without repeats."""
    from attncheck.audit.shrink import _values_of

    dims = [x for k, x in _values_of(config).items() if _FEATURE_DIM_KEYS.search(k)
            and isinstance(x, int) and not isinstance(x, bool) and 0 < x <= 4096]
    return list(dict.fromkeys(dims))[:8]


def _builds_own_mask(model) -> bool:
    """Whether the model's ``forward``, or the ``forward`` of one of its submodules (a codec
    decoder's transformer stack), builds the attention mask (calls a mask maker such as
    transformers' ``create_causal_mask`` / ``get_extended_attention_mask``) rather than passing
    through a mask its parent model prepared."""
    for cls in dict.fromkeys(type(m) for m in model.modules()):
        try:
            src = inspect.getsource(cls.forward)
        except (OSError, TypeError):
            continue
        if re.search(r"\b(create_\w*mask|_?prepare_\w*mask\w*|get_extended_attention_mask|_?expand_mask|"
                     r"_?make_\w*mask)\s*\(", src) is not None:
            return True
    return False


def _features_adapter(model, config, arg: str, facts, supports, input_layout: int, cast, info, common,
                      per_position_only: bool = False) -> AuditModel:
    """A model fed feature vectors ``x`` ``(B, L, D)`` through ``arg`` (layouts: the candidate
    widths of :func:`_feature_dims`, then the same channels first ``(B, D, L)``, as convolutional
    vocoders take spectrograms), then the same with fixed ``encoder_hidden_states`` for a tower
    with cross-attention; other required arguments are masks of ones ``(B, L)``.  The
    checked sequence is ``L`` when the output has one row per input position; otherwise (a
    resampler to a fixed number of latents) the model is bidirectional by design over its input.

    Raises:
        Unsupported: the config declares no candidate width, or (``per_position_only``) the
            output has no row per input position at this width.
    """
    dims = _feature_dims(config)
    if not dims:
        raise Unsupported(f"{type(model).__name__}: its forward takes {arg} (B, L, D) and the config declares no width D")
    accepts = _params(model)
    # a tower with cross-attention layers (BLIP-2's Q-Former) also needs the states it attends
    # to: a fixed (1, ENC_LEN, encoder_hidden_size) after the layouts without them
    enc_width = getattr(config, "encoder_hidden_size", None)
    cross = ([False, True] if "encoder_hidden_states" in accepts and isinstance(enc_width, int) and enc_width > 0
             else [False])
    masks = [n for n in _required_inputs(model)[1:] if n.endswith("mask")]
    conditions = conditioning_inputs(model, [n for n in _required_inputs(model)[1:] if not n.endswith("mask")],
                                     torch.Generator().manual_seed(4321)) or {}
    # a forward whose keys are the conditioning states followed by the checked sequence (a
    # draft model attending to its target's context states) takes a key mask over both (ones
    # for the conditioning): tried before the layouts with a mask over the sequence alone
    spans = [True, False] if conditions and "attention_mask" in accepts else [False]
    layouts = [(d, channels_first, c, s) for s in spans for c in cross for channels_first in (False, True)
               for d in dims]
    D, channels_first, with_enc, mask_spans = layouts[input_layout % len(layouts)]
    n_cond = max((int(v.shape[1]) for v in conditions.values()), default=0)
    enc_states = (torch.randn(1, ENC_LEN, enc_width, generator=torch.Generator().manual_seed(1234))
                  if with_enc else None)

    def fwd_features(x, attention_mask=None, position_ids=None, output_attentions=False):
        kw = {"output_attentions": True} if output_attentions else {}
        for n in masks:
            kw[n] = torch.ones(x.shape[:2], dtype=torch.long if n.endswith("attention_mask") else torch.bool)
        if mask_spans and attention_mask is None:
            attention_mask = torch.ones(x.shape[:2], dtype=torch.long, device=x.device)
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask if not mask_spans else torch.cat(
                [torch.ones(x.shape[0], n_cond, dtype=attention_mask.dtype, device=x.device), attention_mask], 1)
        if mask_spans and position_ids is not None:  # the conditioning first, at positions 0 … n_cond - 1
            first = torch.arange(n_cond, device=x.device).expand(position_ids.shape[0], -1)
            kw["position_ids"] = torch.cat([first, position_ids + n_cond], 1)
        if enc_states is not None:
            kw["encoder_hidden_states"] = cast(enc_states.expand(x.shape[0], -1, -1))
        for n, v in conditions.items():  # the same conditioning for every sample
            kw[n] = cast(v.expand(x.shape[0], *v.shape[1:]))
        o = model(**{arg: cast(x.transpose(1, 2) if channels_first else x)}, **kw)
        out = _find_seq(o, x.shape[0], x.shape[1])
        if out is None:
            out = _upsampled_seq(o, x.shape[0], x.shape[1])
        if out is None:
            out = _per_sample_output(o, x.shape[0], lambda t, B: t)
        return Forward(out, _attentions(o) if output_attentions else None)

    try:
        probe = fwd_features(torch.randn(2, SEQ_LEN, D, generator=torch.Generator().manual_seed(0))).out
    except Exception:  # noqa: BLE001 - not this width: the builder tries the next layout
        probe = None
    per_position = probe is not None and probe.dim() >= 2 and probe.shape[1] == SEQ_LEN
    if per_position_only and not per_position:
        raise Unsupported(f"{type(model).__name__}: no per-position output of {arg} (B, L, {D})")
    declared = {f["is_causal"] for f in facts}
    causal = (True if declared == {True} else False if declared == {False} else None) if per_position else False
    if probe is not None and not per_position and declared == {True}:  # (a width that fails: the next layout)
        raise Unsupported(f"{type(model).__name__}: causal attention modules but no per-position output of {arg}")
    own_mask = _builds_own_mask(model)
    if declared == {True} and not own_mask:
        raise Unsupported(f"{type(model).__name__}: its attention modules are causal but its forward builds no mask: "
                          "the causal mask comes from its parent model")
    sup = set(supports)
    if "attention_mask" in masks or not per_position or "attention_mask" not in accepts or not own_mask:
        sup.discard("attention_mask")
    info["input"] = arg
    if mask_spans:
        info["conditioning_keys"] = n_cond
    info["input_layout"] = (f"{arg}(B, {D}, L)" if channels_first else f"{arg}(B, L, {D})") + (
        f"+encoder_hidden_states(B, {ENC_LEN}, {enc_width})" if with_enc else "") + "".join(
        f"+{n}(B, {', '.join(map(str, v.shape[1:]))}) (fixed)" for n, v in conditions.items()) + (
        " (attention_mask over the conditioning, then the sequence)" if mask_spans else "")
    if mask_spans and "position_ids" in accepts:
        sup.add("position_ids")
    return AuditModel(kind="features", causal=causal, input_kind="features", feature_dim=D, forward_fn=fwd_features,
                      supports=frozenset(sup - {"cache"}), **common)


def adapt_hf_model(spec: str, model: torch.nn.Module) -> AuditModel:
    """Adapt an already built transformers model (single variant, its own dtype)."""
    config = model.config
    kind, _ = choose_class(config.model_type, config, type(model))
    try:
        dtype = next(model.parameters()).dtype
    except StopIteration:
        dtype = torch.float32
    impl = getattr(config, "_attn_implementation", None) or "eager"
    return _adapter(spec, model, config, kind, impl, dtype)


def _sources(model) -> list[Any]:
    """The model's classes (not the audit's own wrappers) and the attention functions it calls."""
    objs: list[Any] = [type(m) for m in model.modules() if not type(m).__module__.startswith("attncheck.")]
    try:  # the attention functions and mask builders the model dispatches to
        from transformers import masking_utils
        from transformers.integrations import sdpa_attention

        objs += [sdpa_attention, masking_utils]
    except Exception:  # noqa: BLE001
        pass
    return objs


def expected_scale_for(facts: dict[str, Any] | None, observed_width: int | None) -> tuple[float | None, str]:
    """Expected softmax scale for one attention map: the module's declared scale, else
    ``1/√d`` for the observed q·k width ``d``.  Returns ``(scale, source)``."""
    if facts and facts.get("scale") is not None and facts.get("scale_folded_into_q"):
        return 1.0, (f"{facts['class']} multiplies q by its declared scale {facts['scale']:.4g} "
                     "before q·kᵀ (the product reaches the softmax unscaled)")
    if facts and facts.get("scale") is not None:
        return facts["scale"], f"{facts['class']} declares its scale"
    if observed_width:
        return 1.0 / math.sqrt(observed_width), "1/√d of the observed q·k width"
    return None, ""


__all__ = ["DTYPES", "adapt_hf_model", "SEQ_LEN", "Unsupported", "attention_modules", "build_hf", "choose_class",
           "declared_scale", "expected_scale_for", "image_shape", "module_facts", "resolve"]
