"""Model families the audit can build: small random-weight models, no downloads.

Spec grammar (``attncheck audit SPEC``):

- ``hf:<model_type>`` or ``hf:<ModelClass>`` — transformers, built from a tiny config (2 layers,
  hidden 64, 4 heads, vocab 100) with ``from_config`` (random weights, nothing downloaded).  Every
  transformers family is audited once per attention implementation (``eager`` and ``sdpa``) with
  identical weights.  Sliding window (Mistral: ``sliding_window=4``), GQA (Mistral / Qwen2:
  ``num_key_value_heads=2`` of 4) and encoder-decoder (T5: the decoder sequence is checked) are
  set so the checks exercise them.
- ``xt:decoder`` / ``xt:encoder`` — x-transformers ``TransformerWrapper`` (dim 64, depth 2,
  heads 4), variants ``attn_flash=False`` (softmax) and ``attn_flash=True`` (SDPA).
- ``torch:MultiheadAttention`` — ``nn.MultiheadAttention(64, 4, batch_first=True)`` used as causal
  self-attention (``attn_mask`` = causal bool mask), variants ``need_weights=True`` (per-head
  weights returned) and ``need_weights=False`` (SDPA path).
- ``torch:TransformerEncoderLayer`` — ``nn.TransformerEncoderLayer(64, 4, 128, dropout=0)``,
  causal ``src_mask``; variants ``fast-path`` (eval + inference mode) and ``slow-path``.
- ``timm:<name>`` — optional; when timm cannot be imported :func:`build` raises
  :class:`FamilyUnavailable` (``timm unavailable (<reason>); pip install timm``).
- ``package.module:factory`` / ``path/to/file.py:factory`` — a zero-argument callable (or an
  ``nn.Module`` subclass) returning a model; see :func:`adapt_module` for how it is called.

:func:`build` returns a list of :class:`~attncheck.audit.model.AuditModel` (one per variant) or
raises :class:`UnknownSpec` (→ exit 2, lists the known names), :class:`FamilyUnavailable`
(optional dependency missing → a "skip" result from :func:`attncheck.audit`, exit 2 from the
``attncheck audit`` command) or any exception from building the model
(→ an "error" result).
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from attncheck.audit.model import AuditModel, Forward

SEQ_LEN = 12
VOCAB = 100
HF_TESTED = ("gpt2", "llama", "bert", "mistral", "qwen2", "t5", "vit")
XT_NAMES = ("decoder", "encoder")
TORCH_NAMES = ("MultiheadAttention", "TransformerEncoderLayer")


class UnknownSpec(ValueError):
    """The spec names no known family or model; ``known`` lists what is available."""

    def __init__(self, message: str, known: list[str]):
        super().__init__(message)
        self.known = known

    def close_matches(self, spec: str, n: int = 3) -> list[str]:
        """Up to ``n`` known specs whose NAME (after ``FAMILY:``) is close to ``spec``'s, best
        first; empty when none is.  The shared family prefix is left out of the comparison (with
        it, ``hf:notamodel`` is 60% similar to ``hf:olmoe``), and case is ignored."""
        def name(s: str) -> str:
            return s.partition(":")[2].lower() if ":" in s else s.lower()

        by_name: dict[str, str] = {}
        for k in self.known:
            by_name.setdefault(name(k), k)
        close = difflib.get_close_matches(name(spec), list(by_name), n=n, cutoff=0.75)
        return [by_name[c] for c in close]


class FamilyUnavailable(RuntimeError):
    """An optional dependency of the family cannot be imported (reported as "skip")."""


def known_specs() -> list[str]:
    """Specs that are known to build (the README's tested set plus the other built-ins)."""
    return ([f"hf:{n}" for n in HF_TESTED] + ["hf:<any transformers model_type or class>"]
            + [f"xt:{n}" for n in XT_NAMES] + [f"torch:{n}" for n in TORCH_NAMES]
            + ["timm:<model name>", "package.module:factory", "path/to/file.py:factory"])


def build(spec: str, device: str = "cpu", config: dict[str, Any] | None = None,
          dtype: str = "float32") -> list[AuditModel]:
    """Build the variants of ``spec`` (see module docstring) on ``device``, eval mode.

    ``config``: extra transformers config values for ``hf:`` specs (e.g.
    ``{"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}``), applied
    over the shrunk config; ``ValueError`` for other families.  ``dtype``: ``float32``
    (default), ``float64``, ``float16`` or ``bfloat16`` — the whole model runs in it (``hf:``).
    Raises :class:`attncheck.audit.hf.Unsupported` when a transformers type cannot be built tiny.
    """
    if config and not spec.startswith("hf:"):
        raise ValueError("config overrides apply to hf: specs only")
    family, sep, name = spec.partition(":")
    if not sep or not name:
        raise UnknownSpec(f"not a model spec: {spec!r} (expected FAMILY:NAME or module:factory)",
                          known_specs())
    if dtype != "float32" and family != "hf":
        raise ValueError("--dtype applies to hf: specs only")
    if family == "hf":
        models = _build_hf(spec, name, config or {}, dtype)
    elif family == "xt":
        models = _build_xt(spec, name)
    elif family == "torch":
        models = _build_torch(spec, name)
    elif family == "timm":
        models = _build_timm(spec, name)
    else:
        models = _build_factory(spec, family, name)
    for m in models:
        m.module.to(device)
    return models


def preload(spec: str) -> None:
    """Import the code behind ``spec`` ahead of the build, so that a build's time limit measures
    building and running the model, not importing its package: importing one transformers model's
    modules takes seconds (tens of seconds on a loaded machine).  Best effort: any failure here
    is left for :func:`build` to report."""
    family, sep, name = spec.partition(":")
    if family != "hf" or not sep:
        return
    try:
        import importlib

        _import_transformers()
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        from attncheck.audit.hf import resolve

        model_type, _cls = resolve(name)
        if model_type is None:
            return
        config_module = CONFIG_MAPPING[model_type].__module__
        package, _, leaf = config_module.rpartition(".")
        importlib.import_module(f"{package}.{leaf.replace('configuration_', 'modeling_', 1)}")
    except Exception:  # noqa: BLE001 - the build reports what is wrong
        pass


# ------------------------------------------------------------------------------------------------
# transformers
# ------------------------------------------------------------------------------------------------
def _import_transformers():
    try:
        import transformers
        from transformers.utils import logging as hf_logging
    except Exception as exc:  # pragma: no cover - depends on the environment
        raise FamilyUnavailable(
            f"transformers unavailable ({type(exc).__name__}: {exc}); "
            "install the extra: pip install 'attncheck[hf]'") from exc

    hf_logging.set_verbosity_error()
    return transformers


def _hf_resolve(tf, name: str):
    """Return (model_type, model_class or None) for ``name`` (a model_type or a class name)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    from attncheck.audit.hf import resolve

    model_type, cls = resolve(name)
    if model_type is None:
        raise UnknownSpec(f"unknown transformers model type or class: {name!r}",
                          [f"hf:{n}" for n in HF_TESTED]
                          + [f"hf:{n}" for n in sorted(CONFIG_MAPPING_NAMES) if n not in HF_TESTED])
    return model_type, cls


def _build_hf(spec: str, name: str, overrides: dict[str, Any] | None = None,
              dtype: str = "float32") -> list[AuditModel]:
    tf = _import_transformers()
    _hf_resolve(tf, name)
    from attncheck.audit.hf import build_hf

    return build_hf(spec, name, overrides, dtype=dtype)


# ------------------------------------------------------------------------------------------------
# x-transformers
# ------------------------------------------------------------------------------------------------
def _build_xt(spec: str, name: str) -> list[AuditModel]:
    if name not in XT_NAMES:
        raise UnknownSpec(f"unknown x-transformers model: {name!r}", [f"xt:{n}" for n in XT_NAMES])
    try:
        import x_transformers
        from x_transformers import Decoder, Encoder, TransformerWrapper
    except Exception as exc:
        raise FamilyUnavailable(f"x-transformers unavailable ({type(exc).__name__}: {exc}); "
                                "install the extra: pip install 'attncheck[xt]'") from exc
    layers_cls = Decoder if name == "decoder" else Encoder
    causal = name == "decoder"
    models, state = [], None
    for flash in (False, True):
        torch.manual_seed(0)
        m = TransformerWrapper(num_tokens=VOCAB, max_seq_len=64,
                               attn_layers=layers_cls(dim=64, depth=2, heads=4, attn_dim_head=16,
                                                      attn_flash=flash)).eval()
        if state is None:
            state = m.state_dict()
        else:
            m.load_state_dict(state)
        models.append(_xt_adapter(spec, m, causal, "sdpa" if flash else "softmax", x_transformers))
    return models


def _xt_adapter(spec, m, causal, variant, xt_mod) -> AuditModel:
    def fwd(x, attention_mask=None, position_ids=None, output_attentions=False):
        kw = {}
        if attention_mask is not None:
            kw["mask"] = attention_mask.bool()
        if position_ids is not None:
            kw["pos"] = position_ids
        return Forward(m(x, **kw), None)

    def decode(x, prefill):
        logits, inter = m(x[:, :prefill], return_intermediates=True)
        outs = [logits]
        for t in range(prefill, x.shape[1]):
            logits, inter = m(x[:, :t + 1], return_intermediates=True, cache=inter)
            outs.append(logits[:, -1:])
        return torch.cat(outs, dim=1)

    supports = {"attention_mask", "position_ids"} | ({"cache"} if causal else set())
    return AuditModel(spec=spec, module=m, forward_fn=fwd, kind="decoder" if causal else "encoder",
                      variant=variant, causal=causal, input_kind="tokens", vocab_size=VOCAB,
                      num_heads=4, num_kv_heads=4, head_dim=16, expected_scale=16 ** -0.5,
                      seq_len=SEQ_LEN, supports=frozenset(supports), decode_fn=decode if causal else None,
                      source_objects=[type(x) for x in m.modules()] + [xt_mod],
                      info={"class": "TransformerWrapper", "dim": 64, "depth": 2, "heads": 4, "dim_head": 16,
                            "attn_flash": variant == "sdpa"})


# ------------------------------------------------------------------------------------------------
# torch.nn
# ------------------------------------------------------------------------------------------------
def _causal_bool_mask(L: int, device) -> torch.Tensor:
    """(L, L) bool, True = *not allowed* (PyTorch MHA convention)."""
    return torch.ones(L, L, dtype=torch.bool, device=device).triu(1)


def _build_torch(spec: str, name: str) -> list[AuditModel]:
    if name not in TORCH_NAMES:
        raise UnknownSpec(f"unknown torch.nn module: {name!r}", [f"torch:{n}" for n in TORCH_NAMES])
    torch.manual_seed(0)
    E, H = 64, 4
    if name == "MultiheadAttention":
        mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
        out = []
        for need in (True, False):
            out.append(_mha_adapter(spec, mha, need))
        return out
    layer = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=128, dropout=0.0,
                                             batch_first=True).eval()
    return [_tel_adapter(spec, layer, fast) for fast in (False, True)]


def _mha_adapter(spec, mha, need_weights: bool) -> AuditModel:
    def fwd(x, attention_mask=None, position_ids=None, output_attentions=False):
        L = x.shape[1]
        kpm = None if attention_mask is None else ~attention_mask.bool()
        o, w = mha(x, x, x, attn_mask=_causal_bool_mask(L, x.device), key_padding_mask=kpm,
                   need_weights=need_weights, average_attn_weights=False, is_causal=True)
        return Forward(o, [w] if (need_weights and w is not None) else None)

    supports = {"attention_mask"} | ({"output_attentions"} if need_weights else set())
    return AuditModel(spec=spec, module=mha, forward_fn=fwd, kind="layer",
                      variant=f"need_weights={need_weights}", causal=True, input_kind="features",
                      feature_dim=mha.embed_dim, num_heads=mha.num_heads, num_kv_heads=mha.num_heads,
                      head_dim=mha.head_dim, expected_scale=mha.head_dim ** -0.5, seq_len=SEQ_LEN,
                      supports=frozenset(supports),
                      source_objects=[torch.nn.MultiheadAttention, torch.nn.functional.multi_head_attention_forward],
                      info={"class": "torch.nn.MultiheadAttention", "embed_dim": mha.embed_dim,
                            "num_heads": mha.num_heads, "usage": "causal self-attention (attn_mask)"})


def _tel_adapter(spec, layer, fast: bool) -> AuditModel:
    def fwd(x, attention_mask=None, position_ids=None, output_attentions=False):
        L = x.shape[1]
        kpm = None if attention_mask is None else ~attention_mask.bool()
        mask = _causal_bool_mask(L, x.device)
        if fast:
            with torch.inference_mode():
                o = layer(x, src_mask=mask, src_key_padding_mask=kpm, is_causal=True)
            return Forward(o.clone(), None)
        was = layer.training
        layer.train()  # dropout=0: the slow (Python) path, deterministic
        try:
            o = layer(x, src_mask=mask, src_key_padding_mask=kpm, is_causal=True)
        finally:
            layer.train(was)
        return Forward(o, None)

    sa = layer.self_attn
    return AuditModel(spec=spec, module=layer, forward_fn=fwd, kind="layer",
                      variant="fast-path" if fast else "slow-path", causal=True,
                      input_kind="features", feature_dim=sa.embed_dim, num_heads=sa.num_heads,
                      num_kv_heads=sa.num_heads, head_dim=sa.head_dim,
                      expected_scale=sa.head_dim ** -0.5, seq_len=SEQ_LEN,
                      supports=frozenset({"attention_mask"}),
                      source_objects=[torch.nn.TransformerEncoderLayer, torch.nn.MultiheadAttention],
                      info={"class": "torch.nn.TransformerEncoderLayer", "d_model": sa.embed_dim,
                            "nhead": sa.num_heads, "usage": "causal (src_mask)"})


# ------------------------------------------------------------------------------------------------
# timm (optional)
# ------------------------------------------------------------------------------------------------
def timm_unavailable_reason() -> str | None:
    """None when timm imports, else the reason (exception type and message)."""
    try:
        import timm  # noqa: F401
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _build_timm(spec: str, name: str) -> list[AuditModel]:
    reason = timm_unavailable_reason()
    if reason is not None:
        raise FamilyUnavailable(f"timm unavailable ({reason}); pip install timm")
    import timm

    if name not in timm.list_models():
        raise UnknownSpec(f"unknown timm model: {name!r}", [f"timm:{n}" for n in timm.list_models("vit_*")])
    torch.manual_seed(0)
    kwargs = dict(pretrained=False, num_classes=0)
    try:
        m = timm.create_model(name, img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, **kwargs)
    except TypeError:
        m = timm.create_model(name, **kwargs)
    m.eval()
    cfg = getattr(m, "pretrained_cfg", {}) or {}
    pe = getattr(m, "patch_embed", None)
    if pe is not None and tuple(getattr(pe, "img_size", (32, 32))) == (32, 32):
        size = 32
    else:
        size = int(cfg.get("input_size", (3, 224, 224))[-1])

    def fwd(x, attention_mask=None, position_ids=None, output_attentions=False):
        out = m.forward_features(x)
        return Forward(out if out.dim() == 3 else out.flatten(2).transpose(1, 2), None)

    return [AuditModel(spec=spec, module=m, forward_fn=fwd, kind="vision", causal=False,
                       input_kind="pixels", image_shape=(3, size, size), source_objects=[type(x) for x in m.modules()],
                       info={"class": type(m).__name__})]


# ------------------------------------------------------------------------------------------------
# user factories
# ------------------------------------------------------------------------------------------------
def load_object(spec: str):
    """Import ``package.module:NAME`` or ``path/to/file.py:NAME`` and return the object.

    Raises :class:`UnknownSpec` when the module or the name cannot be found.
    """
    mod_part, _, name = spec.rpartition(":")
    if mod_part.endswith(".py") or os.sep in mod_part or "/" in mod_part:
        path = os.path.abspath(mod_part)
        if not os.path.isfile(path):
            raise UnknownSpec(f"no such file: {mod_part}", known_specs())
        mod_name = "attncheck_audit_user_" + os.path.splitext(os.path.basename(path))[0]
        s = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(s)
        sys.modules[mod_name] = module
        try:
            s.loader.exec_module(module)
        except Exception:
            sys.modules.pop(mod_name, None)
            raise
    else:
        try:
            module = importlib.import_module(mod_part)
        except ModuleNotFoundError as exc:
            raise UnknownSpec(f"unknown family or module {mod_part!r} ({exc})", known_specs()) from exc
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise UnknownSpec(f"{mod_part} has no attribute {name!r}", known_specs())
        obj = getattr(obj, part)
    return obj


def _required_args(fn: Callable[..., Any]) -> list[str]:
    """Parameters of ``fn`` that a call without arguments leaves unfilled (none when the
    signature cannot be read: the call itself then tells)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                   p.KEYWORD_ONLY)]


def _build_factory(spec: str, family: str, name: str) -> list[AuditModel]:
    obj = load_object(spec)
    if isinstance(obj, torch.nn.Module):
        made = obj
    elif callable(obj):
        need = _required_args(obj)
        if need:
            what = "its constructor needs" if isinstance(obj, type) else "it takes"
            raise UnknownSpec(
                f"{spec}: {what} arguments ({', '.join(need)}); audit builds a model from an "
                f"nn.Module, an nn.Module class or a factory called without arguments (for an "
                f"attention kernel f(q, k, v) run `attncheck check {spec}`)", known_specs())
        made = obj()
    else:
        raise UnknownSpec(f"{spec} is not a model, an nn.Module class or a factory", known_specs())
    if isinstance(made, AuditModel):
        return [made]
    if isinstance(made, (list, tuple)) and made and all(isinstance(m, AuditModel) for m in made):
        return list(made)
    if not isinstance(made, torch.nn.Module):
        raise TypeError(f"{spec} returned {type(made).__name__}, expected an nn.Module")
    return [adapt_module(spec, made.eval())]


_MASK_NAMES = ("key_padding_mask", "attention_mask", "padding_mask", "mask")


def adapt_module(spec: str, module: torch.nn.Module, causal: bool | None = None) -> AuditModel:
    """Adapt an arbitrary ``nn.Module``.

    - A module whose ``forward`` takes ``input_ids`` (or whose config says so) is a token model
      (transformers-style); it is wrapped like ``hf:`` models (single variant).
    - ``nn.MultiheadAttention`` uses the built-in adapter.
    - Otherwise a self-attention layer ``m(x)`` on ``(B, L, E)``; ``E`` from ``module.embed_dim``
      / ``d_model`` / ``dim`` (default 64); an optional padding mask argument named one of
      ``key_padding_mask`` (True = padding, PyTorch convention), ``attention_mask`` /
      ``padding_mask`` / ``mask`` (1/True = real token); returns a tensor or ``(out, weights)``
      with weights ``(B, H, L, L)`` or ``(B, L, L)``.  Declared causality comes from ``causal``,
      then a ``causal`` / ``is_causal`` attribute of the module; unknown otherwise.
    """
    if isinstance(module, torch.nn.MultiheadAttention):
        return _mha_adapter(spec, module, True)
    params = inspect.signature(module.forward).parameters
    config = getattr(module, "config", None)
    if "input_ids" in params and config is not None and hasattr(config, "model_type"):
        from attncheck.audit.hf import adapt_hf_model

        return adapt_hf_model(spec, module)
    if causal is None:
        for attr in ("causal", "is_causal"):
            v = getattr(module, attr, None)
            if isinstance(v, bool):
                causal = v
                break
    E = None
    for attr in ("embed_dim", "d_model", "dim", "hidden_size", "n_embd"):
        v = getattr(module, attr, None)
        if isinstance(v, int):
            E = v
            break
    E = E or 64
    H = None
    for attr in ("num_heads", "n_head", "heads", "nhead", "n_heads"):
        v = getattr(module, attr, None)
        if isinstance(v, int):
            H = v
            break
    mask_name = next((n for n in _MASK_NAMES if n in params), None)

    def fwd(x, attention_mask=None, position_ids=None, output_attentions=False):
        kw = {}
        if attention_mask is not None:
            if mask_name is None:
                raise TypeError("the module takes no padding-mask argument")
            am = attention_mask.bool()
            kw[mask_name] = ~am if mask_name == "key_padding_mask" else am
        o = module(x, **kw)
        weights = None
        if isinstance(o, (tuple, list)):
            o, weights = o[0], (o[1] if len(o) > 1 else None)
        att = None
        if output_attentions and isinstance(weights, torch.Tensor) and weights.dim() in (3, 4):
            att = [weights if weights.dim() == 4 else weights.unsqueeze(1)]
        return Forward(o, att)

    supports = {"output_attentions"} | ({"attention_mask"} if mask_name else set())
    head_dim = E // H if H else None
    return AuditModel(spec=spec, module=module, forward_fn=fwd, kind="layer", causal=causal,
                      input_kind="features", feature_dim=E, num_heads=H, num_kv_heads=H,
                      head_dim=head_dim, expected_scale=head_dim ** -0.5 if head_dim else None,
                      seq_len=SEQ_LEN, supports=frozenset(supports),
                      source_objects=[type(m) for m in module.modules()],
                      info={"class": type(module).__qualname__, "embed_dim": E, "num_heads": H,
                            "mask_argument": mask_name})


def resolve_callable(spec: str) -> Callable[[], Any]:  # pragma: no cover - convenience
    return load_object(spec)
