"""The hint registry: every keyword hint that ``attncheck.target()`` / ``attncheck.check()``,
``attncheck check --hint KEY=VALUE`` (and ``attncheck audit --hint``), the pytest plugin's
``[tool.attncheck] targets = [{spec = "...", KEY = VALUE}]`` entries and the ``attncheck``
fixture accept, in one place.

Each hint is one :class:`HintSpec` in :data:`HINTS` (name → spec): the accepted values (``values``,
as shown in errors and docs), a validator that returns the normalised value or raises
:class:`HintError`, a one-line ``doc``, and the checks that read it (``used_by``; ``"target"``
means the calling convention every check uses).  Adding a hint is one :func:`register_hint`
call at the bottom of this module.

An unknown hint name or an invalid value is a usage error: :class:`HintError` here,
:class:`~attncheck.dynamic.targets.TargetError` from ``attncheck.target()`` / ``attncheck.check()``,
exit code 2 on the command line, a collection error of the target for ``pytest --attncheck``.
The message names the closest known hint (``difflib.get_close_matches``).
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HINTS", "HintError", "HintSpec", "register_hint", "hint_spec", "validate_hint",
           "validate_hints", "unknown_hint_message"]


class HintError(ValueError):
    """An unknown hint name or an invalid hint value (a usage error)."""


@dataclass(frozen=True)
class HintSpec:
    """One registered hint.

    Attributes:
        name: the keyword (``attncheck.check(t, num_heads=4)``, ``--hint num_heads=4``).
        values: the accepted values in words (``"int > 0"``, ``"'left' | 'right'"``).
        doc: one line: what the hint declares.
        used_by: the checks that read it; ``"target"`` = the calling convention (all checks).
        validate: ``value -> normalised value``; raises :class:`HintError` (message without
            the hint name, which :func:`validate_hint` adds).
        alias_of: for an alternative spelling, the canonical hint it stands for.
    """

    name: str
    values: str
    doc: str
    used_by: tuple[str, ...]
    validate: Callable[[Any], Any]
    alias_of: str | None = None


#: name → :class:`HintSpec`, in registration order (see the module docstring)
HINTS: dict[str, HintSpec] = {}


def register_hint(name: str, values: str, doc: str, *, validate: Callable[[Any], Any],
                  used_by: tuple[str, ...] = ("target",), alias_of: str | None = None) -> HintSpec:
    """Add one hint to :data:`HINTS` (``ValueError`` when ``name`` is taken)."""
    if name in HINTS:
        raise ValueError(f"hint {name!r} is registered twice")
    spec = HintSpec(name, values, doc, tuple(used_by), validate, alias_of)
    HINTS[name] = spec
    return spec


def unknown_hint_message(name: Any, known: Mapping[str, Any] | None = None,
                         what: str = "hint") -> str:
    """``unknown hint 'causl' (did you mean 'causal'?)``, or the known names when none is close."""
    known = HINTS if known is None else known
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    if close:
        return f"unknown {what} {name!r} (did you mean {close[0]!r}?)"
    return f"unknown {what} {name!r}; known: {', '.join(sorted(known))}"


def hint_spec(name: str) -> HintSpec:
    """The :class:`HintSpec` of ``name``; :class:`HintError` with a "did you mean" otherwise."""
    try:
        return HINTS[name]
    except (KeyError, TypeError):
        raise HintError(unknown_hint_message(name)) from None


def validate_hint(name: str, value: Any) -> Any:
    """Check one hint; return its normalised value (``None`` = not given, passed through).

    Raises :class:`HintError` for an unknown name or an invalid value, e.g.
    ``hint num_heads=-3: expected int > 0``.
    """
    spec = hint_spec(name)
    if value is None:
        return None
    try:
        return spec.validate(value)
    except HintError as exc:
        raise HintError(f"hint {name}={value!r}: {exc}") from None
    except ValueError as exc:  # a normaliser of attncheck.dynamic.targets (TargetError)
        raise HintError(f"hint {name}={value!r}: {exc}") from None


def validate_hints(hints: Mapping[str, Any]) -> dict[str, Any]:
    """Check every hint of ``hints``; return a new dict of normalised values (``None`` values
    are kept as ``None``).  Raises :class:`HintError` on the first problem (see
    :func:`validate_hint`)."""
    return {k: validate_hint(k, v) for k, v in hints.items()}


# ------------------------------------------------------------------------------- validators
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise HintError("expected true or false")
    return v


def _positive_int(v: Any) -> int:
    if not _is_int(v) or v <= 0:
        raise HintError("expected an integer > 0")
    return int(v)


def _name_or_empty(v: Any) -> str:
    """A parameter name; ``""`` means "none"."""
    if not isinstance(v, str) or (v and not v.isidentifier()):
        raise HintError("expected a parameter name (a Python identifier), or '' for none")
    return v


def _text(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise HintError("expected a non-empty string")
    return v


def _choice(*allowed: str, aliases: Mapping[str, str] | None = None) -> Callable[[Any], str]:
    table = {a: a for a in allowed}
    table.update(aliases or {})

    def check(v: Any) -> str:
        key = v.strip().lower() if isinstance(v, str) else v
        if key not in table:
            raise HintError(f"expected one of {', '.join(repr(a) for a in allowed)}")
        return table[key]

    return check


def _table(fields: Mapping[str, Callable[[Any], Any]], *, also: Callable[[Any], Any] | None = None,
           required: tuple[str, ...] = (), alternatives: str = ""
           ) -> Callable[[Any], Any]:
    """A dict hint whose keys are ``fields`` (each value validated, the dict returned as given);
    ``also`` handles the non-dict forms (e.g. ``True`` or a string)."""

    def check(v: Any) -> Any:
        if isinstance(v, Mapping):
            for k, val in v.items():
                if k not in fields:
                    raise HintError(unknown_hint_message(k, fields, "key"))
                try:
                    fields[k](val)
                except (HintError, ValueError) as exc:
                    raise HintError(f"key {k!r}: {exc}") from None
            missing = [k for k in required if k not in v]
            if missing:
                raise HintError(f"missing key {missing[0]!r}")
            return dict(v)
        if also is not None:
            return also(v)
        raise HintError(f"expected a table with keys {', '.join(fields)}"
                        + (f"{alternatives}" if alternatives else ""))

    return check


def _kind(v: Any) -> str:
    from attncheck.dynamic.targets import KINDS

    if v == "lm":
        raise HintError("token models (kind='lm') are not supported by attncheck check yet; "
                        "use attncheck audit")
    return _choice(*KINDS)(v)


def _layout(v: Any) -> str:
    from attncheck.dynamic.targets import _norm_layout

    if not isinstance(v, str):
        raise HintError("expected '(B,H,L,d)', '(B,L,H,d)' or '(B,L,d)'")
    return _norm_layout(v)


def _mask_shape(v: Any) -> str:
    from attncheck.dynamic.targets import _norm_mask_shape

    if not isinstance(v, str):
        raise HintError("expected '(B, 1, L_q, L_k)', '(B, L_q, L_k)', '(B, 1, 1, L_k)', "
                        "'(B, L_k)' or '(L_q, L_k)'")
    _norm_mask_shape(v)
    return v


def _mask_convention(v: Any) -> str:
    from attncheck.dynamic.targets import _CONV_ALIASES

    return _choice("keep", "blocked", "additive", aliases=_CONV_ALIASES)(v)


def _call(v: Any) -> str:
    from attncheck.dynamic.targets import _CALL_ALIASES

    if isinstance(v, str):
        v = v.replace(" ", "")
    return _choice("x", "q_kv", "q_k_v", aliases=_CALL_ALIASES)(v)


def _scale(v: Any) -> Any:
    """A positive finite number (numeric strings from ``--hint scale=1.0`` too) or ``learned``."""
    if isinstance(v, str):
        if v.strip().lower() == "learned":
            return "learned"
        try:
            num = float(v)
        except ValueError:
            raise HintError("expected a number > 0 or 'learned'") from None
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        num = float(v)
    else:
        raise HintError("expected a number > 0 or 'learned'")
    if not (math.isfinite(num) and num > 0):
        raise HintError("expected a finite number > 0 or 'learned'")
    return v


_PATTERN = _choice("full", "causal", "sliding_window",
                   aliases={"sliding-window": "sliding_window", "local": "sliding_window",
                            "sliding": "sliding_window"})


def _returns(v: Any) -> str:
    return _choice("output", "output_weights", "weights",
                   aliases={"(output, weights)": "output_weights", "out": "output",
                            "weights_only": "weights"})(v)


# ---------------------------------------------------------------------------- the registry
# calling convention (Target fields)
register_hint("kind", "'kernel' | 'layer' | 'mha' | 'encoder_layer'",
              "force the target kind instead of detecting it", validate=_kind)
register_hint("causal", "bool",
              "the target must be causal (true) or must not be (false); kernels that take "
              "is_causal get is_causal=True",
              validate=_bool, used_by=("target", "causality", "mask-pattern", "reference",
                                       "permutation-equivariance", "padding"))
register_hint("batch_first", "bool", "layer inputs are (B, L, E) (true, default) or (L, B, E)",
              validate=_bool)
register_hint("layout", "'(B,H,L,d)' | '(B,L,H,d)' | '(B,L,d)'",
              "kernel tensor layout (default (B,H,L,d))", validate=_layout)
register_hint("mask_arg", "parameter name, or '' for none",
              "name of the mask parameter; '' = pass no masks", validate=_name_or_empty)
register_hint("mask_convention", "'keep' | 'blocked' | 'additive'",
              "mask values: keep (True = attend, SDPA), blocked (True = masked, "
              "nn.MultiheadAttention) or additive (0 kept, -inf blocked)",
              validate=_mask_convention)
register_hint("mask_shape", "'(B,1,L_q,L_k)' | '(B,L_q,L_k)' | '(B,1,1,L_k)' | '(B,L_k)' | "
              "'(L_q,L_k)'", "shape of the target's own mask", validate=_mask_shape)
register_hint("mask_required", "bool",
              "the target needs its mask on every call (detected: the mask parameter has no "
              "default); calls that vary no mask pass an all-keep one",
              validate=_bool)
register_hint("mask", "{arg, convention, shape} or a parameter name",
              "the mask parameter as one table (fixture form of mask_arg / mask_convention / "
              "mask_shape)",
              validate=_table({"arg": _name_or_empty, "convention": _mask_convention,
                                "shape": _mask_shape}, also=_name_or_empty),
              used_by=("target", "padding", "batch-independence", "reference", "dtype"))
register_hint("returns", "'output' | 'output_weights' | 'weights'",
              "what the target returns (detected at call time); 'weights': a kernel that "
              "returns only the attention weights (its output is taken as weights @ v)",
              validate=_returns, used_by=("target",))
register_hint("causal_arg", "parameter name, or '' for none",
              "name of the boolean causal parameter (default is_causal when accepted)",
              validate=_name_or_empty)
register_hint("num_heads", "int > 0", "number of (query) heads", validate=_positive_int)
register_hint("head_dim", "int > 0", "head dimension d", validate=_positive_int)
register_hint("embed_dim", "int > 0", "layer width E", validate=_positive_int)
register_hint("call", "'x' | 'q_kv' | 'qkv'",
              "layer call convention: m(x), m(q, kv) or m(q, k, v)", validate=_call)
register_hint("alignment", "'top_left' | 'bottom_right'",
              "causal alignment when L_q != L_k: top_left (SDPA is_causal) or bottom_right "
              "(KV cache, flash-attention)",
              validate=_choice("top_left", "bottom_right"),
              used_by=("target", "causality", "kv-cache"))
register_hint("cross", "bool", "whether L_q != L_k may be drawn (default: kernels and q/k/v "
              "layers yes)", validate=_bool)
register_hint("max_length", "int > 0",
              "longest sequence the target accepts (causal buffers, position tables): drawn "
              "L_q and L_k never exceed it", validate=_positive_int)
register_hint("name", "string", "display name in reports", validate=_text, used_by=())
register_hint("spec", "string", "the CLI spec that produced the target (reproduction lines)",
              validate=_text, used_by=())
# hints read by individual checks
register_hint("padding_side", "'left' | 'right'", "side of the padded keys (default right)",
              validate=_choice("left", "right"), used_by=("padding",))
register_hint("positional", "bool",
              "the target uses positions (true: skip), or force the check on a target whose "
              "position term was detected in its logits (false)",
              validate=_bool, used_by=("permutation-equivariance",))
register_hint("scale", "number > 0 | 'learned'",
              "expected logits scale when it is not 1/sqrt(head_dim) (T5: 1.0); 'learned' = a "
              "learned temperature", validate=_scale, used_by=("scale", "reference", "saturation"))
register_hint("softmax_scale", "number > 0 | 'learned'", "same as scale (flash-attention's name)",
              validate=_scale, used_by=("reference",), alias_of="scale")
register_hint("num_kv_heads", "int > 0",
              "GQA / MQA: number of key/value heads (the reference repeats them with "
              "repeat_interleave)", validate=_positive_int, used_by=("reference",))
register_hint("num_key_value_heads", "int > 0", "same as num_kv_heads (transformers' name)",
              validate=_positive_int, used_by=("reference",), alias_of="num_kv_heads")
register_hint("rope", "{offset_arg} or bool",
              "rotary kernel; offset_arg names the argument that shifts all positions (checked "
              "for relative-position invariance)",
              validate=_table({"offset_arg": _name_or_empty}, also=_bool),
              used_by=("reference",))
register_hint("cache", "{arg, flag, returns, layout} or bool",
              "KV-cache convention: m(x, **{arg: past, flag: True}) -> (out, present)",
              validate=_table({"arg": _name_or_empty, "flag": _name_or_empty, "returns": _text,
                               "layout": _text}, also=_bool),
              used_by=("kv-cache",))
register_hint("kv_cache", "bool", "the target takes a KV cache (default cache convention)",
              validate=_bool, used_by=("kv-cache",))
register_hint("pattern", "'full' | 'causal' | 'sliding_window'", "declared attention pattern",
              validate=_PATTERN, used_by=("mask-pattern", "reference"))
register_hint("window", "int > 0",
              "sliding window w: keys visible per query, the current one included (Mistral "
              "sliding_window)", validate=_positive_int, used_by=("mask-pattern", "reference"))
register_hint("mask_pattern", "{kind, window} or a pattern name",
              "declared pattern as one table, e.g. {kind = 'sliding_window', window = 4}",
              validate=_table({"kind": _PATTERN, "pattern": _PATTERN, "window": _positive_int},
                              also=_PATTERN),
              used_by=("mask-pattern", "reference"))


def _positions(v: Any) -> Any:
    from attncheck.dynamic.positions import _norm

    try:
        _norm(v)
    except ValueError as exc:
        raise HintError(str(exc).split(": ", 1)[-1]) from None
    return v


register_hint("positions", "'none' | 'absolute' | 'rotary' | 'alibi' | 'relative' ('t5', 'xl') "
              "or {kind, slopes}",
              "position term inside the target: additive biases (ALiBi, T5 relative bias, "
              "Transformer-XL u/v), rotary or absolute embeddings; ALiBi slopes default to "
              "2^(-8h/H). Detected from the logits when not given (ALiBi, relative)",
              validate=_positions,
              used_by=("reference", "scale", "permutation-equivariance", "kv-cache"))
register_hint("qk_norm", "'l2' | bool",
              "q and k are L2-normalised before the logits (cosine attention, qk-norm): the "
              "kernel reference normalises them too",
              validate=lambda v: v if isinstance(v, bool) else _choice(
                  "l2", aliases={"cosine": "l2", "true": "l2"})(v),
              used_by=("reference",))
register_hint("convention", "'sdpa' | 'hf_eager' | 'varlen' | 'weights'",
              "kernel calling convention (detected from the signature): f(q, k, v); "
              "transformers' eager_attention_forward(module, query, key, value, attention_mask, "
              "scaling, dropout); packed (total_tokens, H, d) with cu_seqlens / max_seqlen; "
              "f(q, k) returning the weights",
              validate=_choice("sdpa", "hf_eager", "varlen", "weights",
                               aliases={"hf": "hf_eager", "eager": "hf_eager",
                                        "packed": "varlen"}))
def _two_values(v: Any) -> list:
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise HintError("expected a list of two values")
    return list(v)


register_hint("paths", "{arg, values} or {attr, values}",
              "two code paths of one target: a call argument or a module attribute (dotted, "
              "e.g. config._attn_implementation) and its two values (default [true, false])",
              validate=_table({"arg": _name_or_empty, "attr": _text,
                               "values": _two_values}),
              used_by=("paths",))
