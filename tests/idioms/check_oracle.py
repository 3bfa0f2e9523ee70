"""Dynamic checks on generated attention modules, judged against their executed truth.

``run(variant)`` learns the truth of a variant by executing it (:func:`idioms.oracle.verify`:
float64 SDPA on the module's own weights, float16 for literal fills, two eval forwards), then
loads the module from its source file, builds it in float32 and runs ``attncheck.check(...)``
with the hints a user of that module would give: ``causal=True`` for a causal module, the input
layout, the head counts (``num_kv_heads`` for GQA) and the longest sequence its buffers allow.

:data:`FAULT_CHECKS` says, per injected fault (a lint rule code), which checks name it: a
buggy module counts as found when one of them fails.  :data:`NOT_DYNAMIC` lists the faults a
dynamic check cannot see in principle, with the reason; they leave the buggy denominator.
A correct module must not fail any check of :data:`CHECKS`.
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .generator import Variant
from .oracle import Verdict, verify

#: Injected fault → the checks whose failure names it.  ``reference`` compares every captured
#: softmax / SDPA call with softmax(q·kᵀ/√d) over the key axis, so it names any wrong scale,
#: axis or mask; the others name one property each.
FAULT_CHECKS: dict[str, tuple[str, ...]] = {
    "ATT101": ("scale", "reference", "saturation"),      # missing 1/√d
    "ATT102": ("scale", "reference"),                    # 1/√d_model
    "ATT103": ("scale", "reference"),                    # 1/d
    "ATT104": ("scale", "reference"),                    # 1/√d applied twice
    "ATT105": ("scale", "reference", "saturation"),      # × √d
    "ATT201": ("causality", "mask-pattern", "reference"),  # blocked set is the past
    "ATT202": ("causality", "normalization", "mask-pattern", "reference"),  # diagonal hidden
    "ATT204": ("dtype",),                                # fill overflows float16
    "ATT205": ("causality", "normalization", "mask-pattern", "reference"),  # fill hides nothing
    "ATT206": ("normalization", "causality", "reference"),  # mask applied to the probabilities
    "ATT207": ("causality", "normalization", "mask-pattern", "reference"),  # bool mask added
    "ATT301": ("normalization", "reference"),            # softmax over a non-key axis
    "ATT401": ("reference", "permutation-equivariance", "batch-independence"),  # split, no transpose
    "ATT402": ("reference", "permutation-equivariance", "batch-independence"),  # merge, no transpose
    "ATT403": ("reference",),                            # GQA heads tiled, not interleaved
    "ATT501": ("determinism",),                          # dropout active in eval mode
}

#: Faults no dynamic check can see, with the reason.
NOT_DYNAMIC: dict[str, str] = {
    "ATT208": "an inverted key padding mask input: the checks detect a mask's convention by "
              "trying each (True = attend, True = blocked, additive), so an inverted mask reads "
              "as the other convention",
}

#: Why variants that take a key padding mask leave the check oracle: the checks draw fully
#: padded samples, where a correct module with a -inf fill gives NaN (``finite`` fails, as it
#: should), while the execution oracle keeps a token in every sample.
PADDING_EXCLUDED = "takes a key padding mask (fully padded samples are outside the execution oracle)"


def excluded(v: Variant) -> str | None:
    """Why the check oracle leaves ``v`` out, or ``None``."""
    if v.fault in NOT_DYNAMIC:
        return NOT_DYNAMIC[v.fault]
    return PADDING_EXCLUDED if v.padding else None

#: The checks run on every module: the default suite plus the opt-in checks that compare with a
#: reference or with the module itself.  ``magnitude`` is left out: it drives the logits to
#: 10⁵, beyond the premise of the execution oracle, and by design fails the ``-1e4`` fills that
#: the oracle (float16 at unit-variance inputs) accepts as correct.
CHECKS: tuple[str, ...] = ("shapes", "finite", "normalization", "causality", "gradient-flow",
                           "saturation", "scale", "determinism", "reference", "dtype",
                           "permutation-equivariance", "batch-independence", "mask-pattern")

#: ``max_len`` the modules are built with (causal buffers): the checks draw at most this length
MAX_LEN = 32


def hints(v: Variant) -> dict:
    """The hints a user of this module would pass to ``attncheck.check``."""
    h = dict(causal=v.causal, batch_first=not v.seq_first, num_heads=v.n_heads,
             embed_dim=v.d_model, max_length=MAX_LEN, cross=False)
    if v.n_kv_heads != v.n_heads:
        h["num_kv_heads"] = v.n_kv_heads
    return h


def load(v: Variant, directory: Path):
    """Import the variant's source as a module file and build its ``Attention`` (float32)."""
    import torch

    path = directory / f"idiom_{v.seed}.py"
    path.write_text(v.source)
    spec = importlib.util.spec_from_file_location(f"idiom_{v.seed}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(spec.name, None)
    torch.manual_seed(v.seed)
    return mod.Attention(d_model=v.d_model, n_heads=v.n_heads, n_kv_heads=v.n_kv_heads,
                         dropout=v.dropout, max_len=MAX_LEN)


@dataclass
class CheckOutcome:
    variant: Variant
    verdict: Verdict
    statuses: dict[str, str] = field(default_factory=dict)  # check → pass|fail|warn|skip|error
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def kept(self) -> bool:
        """The execution confirms the label (buggy variants differ, correct ones match)."""
        want = "correct" if self.variant.fault is None else "buggy"
        return self.verdict.truth == want

    @property
    def failed(self) -> list[str]:
        """Checks that failed or errored."""
        return [c for c, s in self.statuses.items() if s in ("fail", "error")]

    @property
    def naming(self) -> list[str]:
        """Failed checks that name the injected fault."""
        names = FAULT_CHECKS.get(self.variant.fault or "", ())
        return [c for c in self.failed if c in names and self.statuses[c] == "fail"]

    @property
    def ok(self) -> bool:
        """Correct: no check fails; buggy: a check that names the fault fails."""
        if self.variant.fault is None:
            return not self.failed
        return bool(self.naming)


def run(v: Variant, checks: tuple[str, ...] = CHECKS, max_examples: int = 3,
        verdict: Verdict | None = None) -> CheckOutcome:
    import attncheck
    import torch

    verdict = verdict or verify(v)
    out = CheckOutcome(v, verdict)
    if verdict.truth == "error":
        return out
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = load(v, Path(tmp))
        report = attncheck.check(module, checks=list(checks), device="cpu", seed=v.seed % 1000,
                                 max_examples=max_examples, timeout=60, **hints(v))
    out.seconds = time.perf_counter() - t0
    for r in report.results:
        out.statuses[r.check] = r.status
        out.messages[r.check] = r.message
    return out
