"""The op catalog (``attncheck.lint.analysis.ops``) against PyTorch's own signatures.

Every argument slot the catalog records (position and keyword) must be where the installed
PyTorch puts that parameter: the analyses read masks, dims, fills and dropout probabilities from
these slots, so a wrong position silently reads another argument.  Signatures come from
``inspect.signature`` for Python-level callables and from the ATen operator schemas for builtins
(the docstrings of some methods name their parameters differently from what the binding accepts:
``Tensor.matmul`` documents ``tensor2``, takes ``other=``).
"""
from __future__ import annotations

import inspect

import libcst as cst
import pytest

from attncheck.lint.analysis import ops

torch = pytest.importorskip("torch")

_SLOTS = ("input", "other", "dim", "mask", "value", "dtype", "q", "k", "v", "attn_mask", "dropout",
          "scale")


def _aten_signatures(leaf: str, method: bool) -> list[tuple[list[str], set[str]]]:
    """(positional names, all names) of each overload of ``aten::leaf``, as the Python binding
    spells them: a function's ``self`` is ``input``; a method's ``self`` is the receiver."""
    out = []
    for schema in torch._C._jit_get_schemas_for_operator(f"aten::{leaf}"):
        args = list(schema.arguments)
        if method:
            if not args or args[0].name != "self":
                continue
            args = args[1:]
        names = ["input" if a.name == "self" else a.name for a in args]
        pos = [n for n, a in zip(names, args) if not a.kwarg_only]
        out.append((pos, set(names)))
    return out


def _python_signature(obj) -> list[tuple[list[str], set[str]]]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    params = [p for p in sig.parameters.values() if p.name != "self"]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return []
    pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [(pos, {p.name for p in params})]


def _matches(sig: tuple[list[str], set[str]], slots: list) -> bool:
    pos, names = sig
    for _, a in slots:
        if a.kw is not None and a.kw not in names:
            return False
        if a.pos is not None and (a.pos >= len(pos) or (a.kw is not None and pos[a.pos] != a.kw)):
            return False
    return True


def _resolve(qualname: str):
    obj = None
    parts = qualname.split(".")
    if parts[0] != "torch":
        return None
    obj = torch
    for p in parts[1:]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    return obj


def _all_cases():
    """(id, signatures, op) of every catalog entry; signatures empty when none is known."""
    for name, op in ops.FUNCTIONS.items():
        obj = _resolve(name)
        sigs = _python_signature(obj) if obj is not None else []
        if obj is not None and not sigs:
            sigs = _aten_signatures(name.rsplit(".", 1)[-1], method=False)
        yield name, sigs, op
    for name, op in ops.METHODS.items():
        yield f"Tensor.{name}", _aten_signatures(name, method=True), op
    for name, op in ops.MODULES.items():
        cls = _resolve(name)
        yield name, _python_signature(cls.__init__) if cls is not None else [], op


def _slots(op: ops.Op) -> list:
    return [(s, getattr(op, s)) for s in _SLOTS if getattr(op, s) is not None]


def _cases():
    """Entries with argument slots and a known PyTorch signature to check them against."""
    return [pytest.param(sigs, op, id=name) for name, sigs, op in _all_cases()
            if _slots(op) and sigs]


@pytest.mark.parametrize(("sigs", "op"), _cases())
def test_argument_slots_match_pytorch_signature(sigs, op: ops.Op) -> None:
    slots = _slots(op)
    assert any(_matches(sig, slots) for sig in sigs), (slots, sigs)


def test_unchecked_slots_are_outside_torch_or_untyped_in_the_schema() -> None:
    """Every entry with argument slots is checked against a signature, except ops of other
    packages (numpy, einops) and the Tensor methods whose ATen schema PyTorch does not expose."""
    unchecked = [name for name, sigs, op in _all_cases() if _slots(op) and not sigs]
    assert all(not n.startswith("torch.") for n in unchecked), unchecked
    assert len(unchecked) < len(_cases()) / 10, unchecked


def test_every_torch_name_exists() -> None:
    """A misspelt qualified name never matches a call: every ``torch.*`` entry resolves."""
    missing = [n for n in [*ops.FUNCTIONS, *ops.MODULES] if n.startswith("torch.") and _resolve(n) is None]
    assert missing == []
    assert [n for n in ops.METHODS if n != "einsum" and not hasattr(torch.Tensor, n)] == []
    assert [n for n in ops.DTYPES if n.startswith("torch.") and not isinstance(_resolve(n), torch.dtype)] == []


def test_dtype_facts_match_finfo() -> None:
    for name, d in ops.DTYPES.items():
        if not name.startswith("torch.") or d.kind != "float":
            continue
        fi = torch.finfo(_resolve(name))
        assert fi.bits == d.bits, name
        # exponent bits: max ≈ 2^(2^(e-1))
        assert d.exp_bits == round(__import__("math").log2(__import__("math").log2(fi.max) + 1)) + 1, name


def test_arg_reads_the_catalog_slot() -> None:
    call = cst.parse_expression("torch.where(c, scores, other=fill)")
    op = ops.function("torch.where")
    assert cst.Module([]).code_for_node(op.mask.of(call)) == "c"
    assert cst.Module([]).code_for_node(op.other.of(call)) == "fill"
    # after *args, positions are unknown
    assert op.input.of(cst.parse_expression("torch.where(*xs, s)")) is None


def test_kernel_lookup() -> None:
    assert ops.kernel("torch.nn.functional.scaled_dot_product_attention").layout == "BHLD"
    assert ops.kernel("flash_attn.flash_attn_func").layout == "BLHD"
    assert ops.kernel("xformers.ops.memory_efficient_attention").dropout == ops.Arg(4, "p")
    assert ops.kernel("torch.softmax") is None
