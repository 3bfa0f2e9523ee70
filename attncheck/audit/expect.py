"""Expectation facts: what a model's config and modules declare about its design, read when a
model-level check fails, so that a deviation that is the model's documented mechanism is reported
as ``warn`` with the reason instead of ``fail``.

The facts are read generically from the built model, never from its type name:

- *random forward*: two eval-mode forwards of the same input differ (the model draws random
  numbers at inference, e.g. MAE's random patch masking, He et al. 2021, with the ratio in
  ``config.mask_ratio``): a sample's output then depends on the draw for the whole batch, so
  ``batch-independence`` cannot be judged;
- *declared bidirectional attention*: a config attention-type field set to ``"bi"`` (XLNet's
  permutation language model, Yang et al. 2019: the causal order is the ``perm_mask`` the caller
  passes), so ``causality`` and ``mask-pattern`` deviations from a causal expectation are by
  design;
- *hashed attention*: modules that bucket queries and keys by locality-sensitive hashing
  (``num_hashes``): the pattern is content-dependent, not a positional mask;
- *an evicting cache*: after decoding, the model's own cache holds fewer keys than tokens (a
  sliding-window cache with the config's window) while the full forward is causal over every
  earlier position: step-by-step decoding differs by the cache's design (the full forward's
  own mask is judged by ``mask-pattern``);
- *position mixing outside attention*: convolutions with a kernel longer than 1 (span-based
  dynamic convolution, convolution modules of Conformer blocks, depthwise convolutions over the
  values), hidden states entering the first attention module that already mix positions
  (trigram input embeddings), or attention that runs on a shorter, pooled sequence (Funnel
  Transformer): padded slots then reach real positions through these operations, not through
  the attention mask, so ``padding`` deviations are by design; likewise self-attention maps with
  more keys than input positions (compressed summaries of blocks of positions, e.g. DeepSeek-V4's
  compressed attention), or conditioning keys that precede the inputs on the same key axis (a
  draft model's context states): left padding then sits between the two.

Facts of a single attention module (sinks, a query scale factor, a declared window) are read by
:func:`attncheck.audit.hf.module_facts` and judged by the per-layer checks themselves.
"""
from __future__ import annotations

from typing import Any

import torch

from attncheck.audit.model import AuditModel

__all__ = ["BIDIRECTIONAL_VALUES", "by_design", "conv_mixing", "declared_bidirectional",
           "evicting_cache", "hashed_attention", "mixes_before_attention", "random_forward"]


def random_forward(m: AuditModel, ctx: Any) -> str | None:
    """Why the model's eval forward is random (two runs on the same input differ), naming the
    config's masking ratios when it has any; None when it is deterministic."""
    x = m.make_inputs(2, m.seq_len, ctx.generator(41), ctx.device)
    a, b = m.forward(x).out, m.forward(x).out
    if a.shape != b.shape or torch.equal(a, b):
        return None
    d = float((a.double() - b.double()).abs().nan_to_num(nan=0.0).max())
    cfg = getattr(m.module, "config", None)
    ratios = {k: v for k, v in (vars(cfg) if cfg is not None else {}).items()
              if "mask" in k and isinstance(v, float) and 0 < v < 1}
    declared = (" (" + ", ".join(f"config.{k} = {v:g}" for k, v in ratios.items()) + ")") if ratios else ""
    return (f"the forward is random in eval mode: two runs on the same input differ by {d:.3g}"
            f"{declared}; each sample's output depends on the random draw of the whole batch")


#: config values that name bidirectional attention (XLNet's ``attn_type="bi"``; Transformer-XL
#: style configs use ``"uni"`` for causal)
BIDIRECTIONAL_VALUES = ("bi", "bidirectional")


def declared_bidirectional(m: AuditModel) -> str | None:
    """Why the model's config declares its attention bidirectional although the audit checks it
    as causal (an attention-type field set to ``"bi"`` / ``"bidirectional"``); None otherwise."""
    cfg = getattr(m.module, "config", None)
    if cfg is None or m.causal is False:
        return None
    for k, v in vars(cfg).items():
        if ("attn" in k or "attention" in k) and isinstance(v, str) and v.lower() in BIDIRECTIONAL_VALUES:
            return (f"config.{k} = {v!r} declares bidirectional attention (the causal-LM head "
                    "predicts under a permutation / prompt mask the caller passes, not a causal "
                    "mask of the model's own)")
    return None


def hashed_attention(m: AuditModel) -> str | None:
    """Why the model's attention pattern depends on the content: modules that hash queries and
    keys into buckets (an int ``num_hashes`` / ``num_hash`` attribute: locality-sensitive
    hashing attention, Kitaev et al. 2020, "Reformer", §2: queries and keys are shared, so a
    token attends to itself only when no other key shares its bucket); None when there is none."""
    for name, mod in m.module.named_modules():
        for attr in ("num_hashes", "num_hash"):
            v = getattr(mod, attr, None)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                return (f"{name} ({type(mod).__name__}) hashes queries and keys into buckets "
                        f"({attr} = {v}): which keys a query sees depends on the content, and "
                        "with shared queries and keys a token does not attend to itself")
    return None


def evicting_cache(m: AuditModel) -> str | None:
    """Why step-by-step decoding differs from the full forward by the cache's design: after
    decoding the ``seq_len`` tokens, the model's own cache holds fewer keys than that (a
    sliding-window cache evicts the oldest keys, with the window the config declares), while the
    full forward attends to every earlier position; None otherwise."""
    kept = getattr(m.decode_fn, "kept_keys", None)
    if kept is None or kept >= m.seq_len:
        return None
    from attncheck.audit.hf import config_value

    win = config_value(getattr(m.module, "config", None), "sliding_window")
    declared = f" (config.sliding_window = {win})" if isinstance(win, int) else ""
    return (f"the model's cache keeps {kept} keys of the {m.seq_len} decoded tokens{declared}: "
            "decoding sees a window the full forward does not apply")


def conv_mixing(m: AuditModel, ctx: Any) -> list[str]:
    """Qualified names of convolutions that run over the checked sequence in one forward: a
    kernel longer than 1 along the sequence axis (the last axis of a ``Conv1d`` input, the
    first spatial axis of a ``Conv2d`` over ``(L, 1)``) of an input whose axis has the
    sequence's length (an image tower's patch convolution does not count)."""
    cands = {mod: name for name, mod in m.module.named_modules()
             if isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d)) and mod.kernel_size[0] > 1}
    if not cands or m.input_kind != "tokens":
        return []
    ran: dict[str, str] = {}

    def seen(mod, args, _out):
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        axis = -1 if isinstance(mod, torch.nn.Conv1d) else -2
        if x is not None and x.dim() >= 2 and x.shape[axis] == m.seq_len:
            ran[cands[mod]] = f"{cands[mod]} ({type(mod).__name__}, kernel {tuple(mod.kernel_size)})"

    handles = [mod.register_forward_hook(seen) for mod in cands]
    try:
        m.forward(m.make_inputs(1, m.seq_len, ctx.generator(42), ctx.device))
    finally:
        for h in handles:
            h.remove()
    return [ran[n] for n in sorted(ran, key=list(cands.values()).index)]


def _hidden_arg(args: tuple, kwargs: dict) -> torch.Tensor | None:
    h = kwargs.get("hidden_states")
    if isinstance(h, torch.Tensor):
        return h
    return next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)


def mixes_before_attention(m: AuditModel, ctx: Any) -> str | None:
    """Why the hidden states entering the model's first attention module already mix positions
    (changing the token at one position changes the states at others), or why attention runs
    on a sequence shorter than the input (pooling); None when neither is observed."""
    if m.input_kind != "tokens" or not m.attention_modules:
        return None
    name, first = m.attention_modules[0]
    seen: list[torch.Tensor] = []

    def grab(_mod, args, kwargs):
        if not seen:
            h = _hidden_arg(args, kwargs)
            if h is not None:
                seen.append(h.detach().clone())

    handle = first.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        x = m.make_inputs(1, m.seq_len, ctx.generator(43), ctx.device)
        j = m.seq_len // 2
        pos = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
        pos[:, j] = True
        m.forward(x)
        h0 = seen[:1]
        seen.clear()
        m.forward(m.perturb(x, pos, ctx.generator(44)))
        h1 = seen[:1]
    finally:
        handle.remove()
    if not h0 or not h1 or h0[0].shape != h1[0].shape or h0[0].dim() < 2:
        return None
    h0, h1 = h0[0], h1[0]
    if h0.shape[1] != m.seq_len:
        return None
    d = (h1.double() - h0.double()).abs().reshape(h0.shape[0], h0.shape[1], -1).amax((0, 2))
    others = [i for i in range(m.seq_len) if i != j and float(d[i]) > 0]
    if others:
        return (f"the hidden states entering {name} already mix positions: changing the token at "
                f"position {j} changes positions {others[:6]}{' …' if len(others) > 6 else ''}")
    return None


def _pooled_length(n: int, L: int) -> bool:
    """Whether ``n`` query positions are ``L`` positions pooled by a power of two (within one
    position: a separate [CLS] slot or a ceil), as stride-2 pooling between blocks makes them
    (Funnel Transformer, Dai et al. 2020); an image tower's patch count is not."""
    k = 2
    while L / k >= 1:
        if abs(n - L / k) <= 1 and n < L:
            return True
        k *= 2
    return False


def by_design(check: str, m: AuditModel, ctx: Any) -> str | None:
    """The reason a failed ``check`` on model ``m`` is the model's design, or None.

    ``batch-independence``: a random forward; ``causality`` and ``mask-pattern``: a config that
    declares bidirectional attention; ``mask-pattern``: hashed (LSH) attention; ``kv-cache``:
    a cache that evicts keys (:func:`evicting_cache`); ``padding``: position mixing outside attention
    (:func:`conv_mixing`, :func:`mixes_before_attention`, attention maps on a pooled sequence
    shorter than the input, from the probe's per-layer maps)."""
    if check == "batch-independence":
        return random_forward(m, ctx)
    if check == "kv-cache":
        return evicting_cache(m)
    if check == "causality":
        return declared_bidirectional(m)
    if check == "mask-pattern":
        return declared_bidirectional(m) or hashed_attention(m)
    if check == "padding":
        convs = conv_mixing(m, ctx)
        if convs:
            more = f" and {len(convs) - 2} more" if len(convs) > 2 else ""
            return ("positions are mixed outside attention by convolutions over the sequence: "
                    f"{'; '.join(convs[:2])}{more}; padded slots reach real positions through them")
        why = mixes_before_attention(m, ctx)
        if why:
            return why + "; padded slots reach real positions through them"
        from attncheck.audit.checks import probe_layers

        maps, _ = probe_layers(m, ctx)
        pooled = [lm.index for lm in maps if _pooled_length(lm.probs.shape[-2], m.seq_len)
                  and lm.probs.shape[-1] < m.seq_len and m.enc_len not in lm.probs.shape[-2:]]
        if pooled:
            return (f"attention runs on a pooled sequence in {len(pooled)} map(s) (fewer query "
                    f"and key positions than the {m.seq_len} inputs): pooling merges neighbouring "
                    "positions, and padding shifts the pooling windows")
        extra = sorted({lm.probs.shape[-1] - m.seq_len for lm in maps
                        if lm.probs.shape[-2] == m.seq_len and lm.probs.shape[-1] > m.seq_len
                        and lm.probs.shape[-1] != m.seq_len + (m.enc_len or 0)})
        cond = m.info.get("conditioning_keys")
        if cond and cond in extra:
            return (f"self-attention reads {cond} conditioning key(s) before the {m.seq_len} input positions "
                    "on one key axis: left padding sits between them and moves the inputs' key indices "
                    "relative to the conditioning (a window over key indices then covers other keys)")
        if extra:
            return (f"self-attention also reads {extra[0]} key(s) beyond the {m.seq_len} input "
                    "positions (compressed summaries of blocks of positions): padded slots are "
                    "compressed together with real tokens, and padding shifts the blocks")
    return None
