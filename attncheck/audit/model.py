"""Model adapters for the audit: one calling convention for token models, vision models and layers.

An :class:`AuditModel` wraps a built ``nn.Module`` together with the facts the model-level checks
need (is it causal, how many heads / KV heads, sliding window, which arguments the forward
accepts) and a uniform :meth:`AuditModel.forward`:

- ``input_kind="tokens"``: ``x`` is ``input_ids`` of shape ``(B, L)`` (``torch.long``); for
  encoder-decoder models (T5) the checked sequence is the *decoder* input and the encoder input is
  a fixed random sequence (``enc_len`` tokens);
- ``input_kind="pixels"``: ``x`` is ``pixel_values`` of shape ``(B, C, H, W)``;
- ``input_kind="audio"``: ``x`` is ``input_values`` ``(B, samples)`` or ``input_features``
  ``(B, mel bins, frames)`` (made by ``input_makers``);
- ``input_kind="series"``: ``x`` is a time series ``past_values`` ``(B, context_length[, channels])``
  (made by ``input_makers``);
- ``input_kind="features"``: ``x`` is ``(B, L, E)`` float (a self-attention layer).

``forward`` returns :class:`Forward` with ``out`` of shape ``(B, L, ...)`` (logits or the last
hidden state; position axis 1; for a model with no output row per input position, ``per_position``
False, one ``(B, ...)`` output per sample: a pooled vector, a fixed set of latent queries) and, when asked and available, ``attentions``: a list with one
``(B, H, L_q, L_k)`` tensor per attention layer.

Padding convention (HF): ``attention_mask`` is ``(B, L)`` with 1 = real token, 0 = padding.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

INPUT_KINDS = ("tokens", "pixels", "audio", "series", "features")


@dataclass
class Forward:
    """Result of :meth:`AuditModel.forward`: ``out`` ``(B, L, ...)`` float; ``attentions`` or None."""

    out: torch.Tensor
    attentions: list[torch.Tensor] | None = None


@dataclass
class AuditModel:
    """A model under audit with its calling convention and declared attention facts.

    Attributes:
        spec: the user's spec, e.g. ``"hf:gpt2"``.
        variant: the dispatch path of this instance (``"eager"``, ``"sdpa"``,
            ``"need_weights=True"``, ...) or ``None``.
        module: the ``nn.Module`` (eval mode, random weights).
        kind: ``"decoder"``, ``"encoder"``, ``"seq2seq"``, ``"vision"`` or ``"layer"``.
        causal: whether self-attention over the checked sequence must be causal (``None`` unknown).
        supports: subset of ``{"attention_mask", "position_ids", "output_attentions", "cache"}``.
        sliding_window: declared window ``w`` (a query sees itself and the ``w - 1`` previous
            keys, transformers' convention ``q - w < k <= q``), or ``None``.
        expected_scale: declared softmax scale (``1/sqrt(head_dim)`` unless the family documents
            otherwise, e.g. T5 uses 1.0), ``scale_note`` explains a non-default value.
        source_objects: classes/functions whose source files are linted.
        seq_len: the sequence length the checks use by default.
        per_position: whether ``out`` has one row per input position (axis 1); False for a model
            whose output is per sample only (pooled, or latent / decoder queries that are not the
            input positions): the checks that compare positions (causality, padding) do not apply.
    """

    spec: str
    module: torch.nn.Module
    forward_fn: Callable[..., Forward]
    kind: str = "layer"
    variant: str | None = None
    causal: bool | None = None
    input_kind: str = "tokens"
    vocab_size: int | None = None
    feature_dim: int | None = None
    image_shape: tuple[int, int, int] | None = None
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    sliding_window: int | None = None
    expected_scale: float | None = None
    scale_note: str = ""
    seq_len: int = 12
    per_position: bool = True
    enc_len: int | None = None
    supports: frozenset[str] = frozenset()
    source_objects: list[Any] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    decode_fn: Callable[[torch.Tensor, int], torch.Tensor] | None = None
    expected_pattern_fn: Callable[..., tuple[str, int | None]] | None = None
    #: token ids are drawn from ``[lo, hi)``; ``pad_id`` fills padded slots (the model's pad token)
    token_range: tuple[int, int] | None = None
    pad_id: int = 0
    #: makers of dense inputs ``(batch, generator) -> tensor`` (vision / audio); the first is used
    input_makers: list[Callable[[int, torch.Generator | None], torch.Tensor]] = field(default_factory=list)
    #: ``(qualified name, module)`` of the model's attention modules (expectations per module)
    attention_modules: list[tuple[str, torch.nn.Module]] = field(default_factory=list)
    #: dtype the model runs in (parameters and float inputs)
    dtype: torch.dtype = torch.float32
    #: ``retype_fn(dtype)`` → the same model (a copy) running in ``dtype``; None when unsupported
    retype_fn: Callable[[torch.dtype], AuditModel] | None = None

    @property
    def label(self) -> str:
        return f"{self.spec}[{self.variant}]" if self.variant else self.spec

    # -- inputs ---------------------------------------------------------------------------------
    def make_inputs(self, batch: int, length: int | None = None, generator: torch.Generator | None = None,
                    device: str | torch.device = "cpu") -> torch.Tensor:
        """Random inputs: ids ``(B, L)`` in ``[1, vocab)`` (0 is kept for padding), pixels
        ``(B, C, H, W)`` or features ``(B, L, E)`` standard normal."""
        L = length or self.seq_len
        if self.input_kind == "tokens":
            lo, hi = self.token_range or (1, self.vocab_size)
            return torch.randint(lo, hi, (batch, L), generator=generator).to(device)
        if self.input_makers:
            return self.input_makers[0](batch, generator).to(device)
        if self.input_kind == "pixels":
            return torch.randn((batch, *self.image_shape), generator=generator).to(device)
        return torch.randn((batch, L, self.feature_dim), generator=generator).to(device)

    def perturb(self, x: torch.Tensor, positions: torch.Tensor, generator: torch.Generator | None = None
                ) -> torch.Tensor:
        """Return ``x`` with the entries at ``positions`` ``(B, L)`` bool replaced by different
        values: another token id; for dense inputs the perturbation of ``attncheck check``,
        N(0, 4²) noise added (:func:`attncheck.dynamic.checks._compare.noise_like`: large, finite,
        never NaN)."""
        y = x.clone()
        if self.input_kind == "tokens":
            lo, hi = self.token_range or (1, self.vocab_size)
            n = hi - lo
            shift = torch.randint(1, n, x.shape, generator=generator).to(x.device)
            new = (x.clamp(lo, hi - 1) - lo + shift) % n + lo  # always != x, inside [lo, hi)
            y[positions] = new[positions]
        else:
            from attncheck.dynamic.checks._compare import noise_like

            noise = noise_like(x, generator if generator is not None else torch.Generator())
            y[positions] = x[positions] + noise[positions]
        return y

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, output_attentions: bool = False) -> Forward:
        """One forward; ``out`` is unwrapped from what the model returned (:func:`main_output`).

        Raises :class:`~attncheck.dynamic.targets.TargetOutputError` when the return value holds
        no output tensor."""
        with torch.no_grad():
            f = self.forward_fn(x, attention_mask=attention_mask, position_ids=position_ids,
                                output_attentions=output_attentions)
        if not isinstance(f.out, torch.Tensor):
            f = Forward(main_output(f.out, self.label), f.attentions)
        return f


    def expected_pattern(self, shape: tuple[int, int], ordinal: int | None = None,
                         module: dict[str, Any] | None = None) -> tuple[str, int | None]:
        """Declared mask pattern for an attention map of ``(L_q, L_k)``, the ``ordinal``-th map
        seen in a forward, made by the attention module described by ``module`` (facts such as
        ``layer``, ``sliding_window``, ``cross``; None when unknown): ``("causal", None)``,
        ``("full", None)``, ``("sliding", w)`` or ``("unknown", None)``."""
        if self.expected_pattern_fn is not None:
            try:
                return self.expected_pattern_fn(shape, ordinal, module)
            except TypeError:  # user adapters written for (shape, ordinal)
                return self.expected_pattern_fn(shape, ordinal)
        if self.causal is None:
            return ("unknown", None)
        if self.causal:
            if self.sliding_window:
                return ("sliding", self.sliding_window)
            return ("causal", None)
        return ("full", None)


#: keys of a dict / ``transformers.utils.ModelOutput`` that hold the main output, in order
OUTPUT_KEYS = ("logits", "last_hidden_state", "output", "out", "hidden_states")


def main_output(raw: Any, name: str = "the model") -> torch.Tensor:
    """The output tensor in what a model returned: a tensor itself; for a dict or a
    ``ModelOutput`` the first of :data:`OUTPUT_KEYS` that holds a tensor, else its first tensor
    value; for a tuple / list its first element (unwrapped the same way).

    Raises :class:`~attncheck.dynamic.targets.TargetOutputError` (the model's fault, reported
    as a failed check) when there is no tensor to take."""
    from collections.abc import Mapping

    from attncheck.dynamic.targets import TargetOutputError

    seen = raw
    for _ in range(4):  # (out, weights), {"logits": ...}, ((out, w), cache), ...
        if isinstance(raw, torch.Tensor):
            return raw
        if isinstance(raw, Mapping):
            key = next((k for k in OUTPUT_KEYS if isinstance(raw.get(k), torch.Tensor)), None)
            if key is None:
                key = next((k for k, v in raw.items() if isinstance(v, torch.Tensor)), None)
            if key is None:
                break
            raw = raw[key]
        elif isinstance(raw, (tuple, list)) and raw:
            raw = raw[0]
        else:
            break
    keys = f" with keys {list(seen)[:8]}" if isinstance(seen, Mapping) else ""
    raise TargetOutputError(
        f"{name} returned {type(seen).__name__}{keys}: expected a tensor (B, L, ...), a tuple "
        f"whose first element is one, or a dict / ModelOutput with one of {', '.join(OUTPUT_KEYS)}")
