"""Snapshot and restore everything a check could change.

:func:`snapshot` records, and :meth:`Snapshot.restore` puts back *exactly*:

- for the target's module and every submodule: the parameter / buffer / submodule dicts (the
  same tensor objects, their values, dtypes and devices), each parameter's ``.grad`` (values or
  None) and ``requires_grad`` flag, the ``training`` flag, and the other attributes of the
  module's ``__dict__``: rebinding (e.g. a ``self.dropout = 0.0`` assigned by ``forward``) and
  in-place changes of the builtin containers reachable from them (``list``, ``dict``, ``set``,
  ``deque``, ``bytearray``, also nested and inside tuples: e.g. ``self.seen.append(x)``, the same
  container objects get their old items back) and of plain tensor attributes (values);
- the RNG states: torch CPU, every initialised CUDA device, Python ``random``, and NumPy's
  global ``RandomState`` (only when NumPy is already imported);
- global torch settings: grad mode, default dtype, anomaly mode, deterministic-algorithms mode,
  the ``TorchFunctionMode`` / ``TorchDispatchMode`` stacks (modes left pushed by a check that
  raised are popped), the intra-op thread count (``torch.set_num_threads``), float32 matmul /
  convolution precision (``torch.set_float32_matmul_precision``,
  ``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32`` and the
  ``fp32_precision`` settings behind them), the reduced-precision reduction flags, cuDNN's
  ``enabled`` / ``benchmark`` / ``deterministic``, the SDPA backend switches
  (``torch.backends.cuda.enable_flash_sdp`` ...) and the print options
  (``torch.set_printoptions``), and the default device (``torch.set_default_device``).

Usage::

    with preserved(module):          # or: snap = snapshot(module); ...; snap.restore()
        run_checks()
"""
from __future__ import annotations

import collections
import contextlib
import random
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import nn

__all__ = ["Snapshot", "snapshot", "preserved", "global_state", "module_state_equal"]


@dataclass
class _ModState:
    mod: nn.Module
    params: dict[str, Any]
    param_data: dict[str, tuple[torch.Tensor, torch.Tensor]]
    grads: dict[str, torch.Tensor | None]
    requires_grad: dict[str, bool]
    buffers: dict[str, Any]
    buffer_vals: dict[str, torch.Tensor]
    modules: dict[str, Any]
    training: bool
    attrs: dict[str, Any]
    contents: list[tuple[str, Any, Any]]


def _grab_module(m: nn.Module) -> _ModState:
    params = dict(m._parameters)
    pdata = {n: (p.data, p.detach().clone()) for n, p in params.items() if p is not None}
    grads = {n: (None if p.grad is None else p.grad.detach().clone())
             for n, p in params.items() if p is not None}
    rg = {n: p.requires_grad for n, p in params.items() if p is not None}
    bufs = dict(m._buffers)
    bvals = {n: b.detach().clone() for n, b in bufs.items() if isinstance(b, torch.Tensor)}
    attrs: dict[str, Any] = {}
    contents: list[tuple[str, Any, Any]] = []
    memo: set[int] = set()
    for k, v in m.__dict__.items():
        if k in ("_parameters", "_buffers", "_modules", "training"):
            continue
        attrs[k] = v
        _grab_contents(v, memo, contents)
    return _ModState(m, params, pdata, grads, rg, bufs, bvals, dict(m._modules), m.training,
                     attrs, contents)


def _grab_contents(v: Any, memo: set[int], out: list[tuple[str, Any, Any]]) -> None:
    """Append ``(kind, container, old contents)`` for every builtin mutable container reachable
    from ``v`` through containers and tuples, and ``("tensor", t, (version, clone))`` for plain
    tensors; modules and parameters are left to the module snapshot."""
    if id(v) in memo or isinstance(v, (nn.Module, nn.Parameter)):
        return
    if isinstance(v, torch.Tensor):
        memo.add(id(v))
        try:
            version = v._version
        except RuntimeError:  # inference tensors keep no version counter: always restore
            version = None
        try:
            out.append(("tensor", v, (version, v.detach().clone())))
        except RuntimeError:  # a tensor that cannot be copied (e.g. a functorch wrapper)
            pass
        return
    if isinstance(v, dict):
        memo.add(id(v))
        items = list(v.items())
        out.append(("dict", v, items))
        for _, x in items:
            _grab_contents(x, memo, out)
    elif isinstance(v, (list, collections.deque)):
        memo.add(id(v))
        items = list(v)
        out.append(("list", v, items))
        for x in items:
            _grab_contents(x, memo, out)
    elif isinstance(v, (set, bytearray)):
        memo.add(id(v))
        out.append(("set" if isinstance(v, set) else "bytes", v, v.copy()))
    elif isinstance(v, tuple):
        memo.add(id(v))
        for x in v:
            _grab_contents(x, memo, out)


def _put_contents(contents: list[tuple[str, Any, Any]]) -> None:
    """Give every recorded container its old items back (the same objects, by identity)."""
    for kind, c, old in contents:
        if kind == "dict":
            c.clear()
            c.update(old)
        elif kind == "list":
            c.clear()
            c.extend(old)
        elif kind == "set":
            c.clear()
            c.update(old)
        elif kind == "bytes":
            c[:] = old
        elif kind == "tensor":
            version, vals = old
            try:
                changed = version is None or c._version != version
            except RuntimeError:
                changed = True
            if changed:
                with torch.no_grad():
                    if c.shape == vals.shape and c.dtype == vals.dtype and c.device == vals.device:
                        c.copy_(vals)
                    else:
                        c.data = vals.clone()


def _put_module(s: _ModState) -> None:
    m = s.mod
    if not isinstance(m, torch.jit.ScriptModule):
        # TorchScript modules keep their structure in C++ (``_parameters`` is a read-only
        # OrderedDictWrapper): only values, grads, flags and the training mode are restored
        for k in [k for k in m.__dict__ if k not in s.attrs and
                  k not in ("_parameters", "_buffers", "_modules", "training")]:
            del m.__dict__[k]
        for k, v in s.attrs.items():
            m.__dict__[k] = v
        _put_contents(s.contents)
        m._parameters.clear()
        m._parameters.update(s.params)
        m._buffers.clear()
        m._buffers.update(s.buffers)
        m._modules.clear()
        m._modules.update(s.modules)
    m.training = s.training
    with torch.no_grad():
        for n, p in s.params.items():
            if p is None:
                continue
            data, vals = s.param_data[n]
            if data.shape != vals.shape or data.dtype != vals.dtype or data.device != vals.device:
                data = vals.clone()
            else:
                data.copy_(vals)
            p.data = data
            p.requires_grad_(s.requires_grad[n])
            g = s.grads[n]
            p.grad = None if g is None else g.clone()
        for n, b in s.buffers.items():
            if isinstance(b, torch.Tensor) and n in s.buffer_vals:
                v = s.buffer_vals[n]
                if b.shape == v.shape and b.dtype == v.dtype and b.device == v.device:
                    b.copy_(v)
                else:
                    b.data = v.clone()


def _mode_stacks() -> tuple[list[Any], list[Any]]:
    fn = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
    from torch.utils import _python_dispatch as pd

    disp = [pd._get_dispatch_stack_at(i) for i in range(pd._len_torch_dispatch_stack())]
    return fn, disp


def _restore_mode_stacks(fn: list[Any], disp: list[Any]) -> None:
    from torch.utils import _python_dispatch as pd

    while torch._C._len_torch_function_stack() > len(fn):
        torch._C._pop_torch_function_stack()
    cur = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
    if any(a is not b for a, b in zip(cur, fn)) or len(cur) < len(fn):
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        for m in fn:
            torch._C._push_on_torch_function_stack(m)
    while pd._len_torch_dispatch_stack() > len(disp):
        pd._pop_torch_dispatch_stack()


#: ``torch.backends`` objects whose ``fp32_precision`` (TF32 / bf16 use for float32 math) is
#: restored, parents before children: setting a parent resets its children
_FP32_PRECISION = ("backends", "backends.cuda.matmul", "backends.cudnn", "backends.cudnn.conv",
                   "backends.cudnn.rnn", "backends.mkldnn", "backends.mkldnn.matmul",
                   "backends.mkldnn.conv", "backends.mkldnn.rnn")
#: plain boolean switches (object path, attribute)
_BACKEND_FLAGS = (("backends.cuda.matmul", "allow_tf32"), ("backends.cudnn", "allow_tf32"),
                  ("backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
                  ("backends.cuda.matmul", "allow_bf16_reduced_precision_reduction"),
                  ("backends.cudnn", "enabled"), ("backends.cudnn", "benchmark"),
                  ("backends.cudnn", "deterministic"))
#: SDPA backend switches: (getter, setter) in ``torch.backends.cuda``
_SDP_SWITCHES = (("flash_sdp_enabled", "enable_flash_sdp"),
                 ("mem_efficient_sdp_enabled", "enable_mem_efficient_sdp"),
                 ("math_sdp_enabled", "enable_math_sdp"), ("cudnn_sdp_enabled", "enable_cudnn_sdp"))
_PRINT_OPTIONS = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")


def _resolve(path: str) -> Any:
    obj: Any = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _read(obj: Any, attr: str) -> Any:
    """``getattr`` that gives None where torch refuses to answer (e.g. a legacy TF32 getter
    after the ``fp32_precision`` API was used)."""
    if obj is None:
        return None
    try:
        return getattr(obj, attr)
    except Exception:  # noqa: BLE001 - RuntimeError / AttributeError across torch versions
        return None


def _torch_settings() -> dict[str, Any]:
    """Float32 precision, backend and print settings (see the module docstring), as plain values
    (None = not readable in this torch build / state)."""
    out: dict[str, Any] = {"num_threads": torch.get_num_threads()}
    try:
        out["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    except RuntimeError:
        out["float32_matmul_precision"] = None
    for path, attr in _BACKEND_FLAGS:
        out[f"{path}.{attr}"] = _read(_resolve(path), attr)
    for path in _FP32_PRECISION:
        out[f"{path}.fp32_precision"] = _read(_resolve(path), "fp32_precision")
    cuda = torch.backends.cuda
    for getter, _ in _SDP_SWITCHES:
        fn = getattr(cuda, getter, None)
        out[f"sdp.{getter}"] = fn() if fn is not None else None
    from torch._tensor_str import PRINT_OPTS

    for name in _PRINT_OPTIONS:
        out[f"print.{name}"] = getattr(PRINT_OPTS, name, None)
    return out


def _restore_torch_settings(saved: dict[str, Any]) -> None:
    """Put back :func:`_torch_settings`; only what differs is set (``set_num_threads`` and the
    precision setters are not free).  Order matters: the legacy float32 precision setters write
    the ``fp32_precision`` values, which are then set parents first."""
    now = _torch_settings()
    if now == saved:
        return
    if now["num_threads"] != saved["num_threads"]:
        torch.set_num_threads(saved["num_threads"])
    precision_keys = [k for k in saved if k == "float32_matmul_precision" or
                      k.endswith(".fp32_precision") or k.endswith(".allow_tf32")]
    if any(now[k] != saved[k] for k in precision_keys):
        if saved["float32_matmul_precision"] is not None:
            torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
        for path, attr in _BACKEND_FLAGS:
            v = saved[f"{path}.{attr}"]
            if v is not None and attr == "allow_tf32":
                setattr(_resolve(path), attr, v)
        for path in _FP32_PRECISION:
            v = saved[f"{path}.fp32_precision"]
            if v is not None:
                setattr(_resolve(path), "fp32_precision", v)
    for path, attr in _BACKEND_FLAGS:
        key = f"{path}.{attr}"
        if attr != "allow_tf32" and saved[key] is not None and now[key] != saved[key]:
            setattr(_resolve(path), attr, saved[key])
    cuda = torch.backends.cuda
    for getter, setter in _SDP_SWITCHES:
        v = saved[f"sdp.{getter}"]
        if v is not None and now[f"sdp.{getter}"] != v:
            getattr(cuda, setter)(v)
    from torch._tensor_str import PRINT_OPTS

    for name in _PRINT_OPTIONS:
        if now[f"print.{name}"] != saved[f"print.{name}"]:
            setattr(PRINT_OPTS, name, saved[f"print.{name}"])


@dataclass
class GlobalState:
    """Torch / Python global state (see module docstring)."""

    cpu_rng: torch.Tensor
    cuda_rng: list[torch.Tensor] | None
    py_rng: Any
    np_rng: Any
    grad_enabled: bool
    default_dtype: torch.dtype
    anomaly: bool
    deterministic: bool
    deterministic_warn_only: bool
    fn_stack: list[Any]
    dispatch_stack: list[Any]
    settings: dict[str, Any] = field(default_factory=dict)
    #: ``torch.set_default_device``'s context (a function mode, restored with the mode stack;
    #: its global reference must follow, or a later ``set_default_device`` pops a wrong mode)
    device_context: Any = None

    def restore(self) -> None:
        _restore_mode_stacks(self.fn_stack, self.dispatch_stack)
        holder = getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None)
        if holder is not None and getattr(holder, "device_context", None) is not self.device_context:
            holder.device_context = self.device_context
        if self.settings:
            _restore_torch_settings(self.settings)
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)
        random.setstate(self.py_rng)
        if self.np_rng is not None and "numpy" in sys.modules:
            sys.modules["numpy"].random.set_state(self.np_rng)
        torch.set_grad_enabled(self.grad_enabled)
        torch.set_default_dtype(self.default_dtype)
        if torch.is_anomaly_enabled() != self.anomaly:
            torch.set_anomaly_enabled(self.anomaly)
        # only when changed: use_deterministic_algorithms imports torch._inductor (~5 s)
        if (torch.are_deterministic_algorithms_enabled() != self.deterministic or
                torch.is_deterministic_algorithms_warn_only_enabled()
                != self.deterministic_warn_only):
            torch.use_deterministic_algorithms(self.deterministic,
                                               warn_only=self.deterministic_warn_only)

    def as_comparable(self) -> dict[str, Any]:
        """Plain values, for equality assertions in tests."""
        return {
            "cpu_rng": self.cpu_rng.tolist(),
            "cuda_rng": None if self.cuda_rng is None else [t.tolist() for t in self.cuda_rng],
            "py_rng": self.py_rng,
            "np_rng": None if self.np_rng is None else repr(self.np_rng),
            "grad_enabled": self.grad_enabled, "default_dtype": self.default_dtype,
            "anomaly": self.anomaly, "deterministic": self.deterministic,
            "fn_stack": [id(m) for m in self.fn_stack],
            "dispatch_stack": [id(m) for m in self.dispatch_stack],
            "settings": dict(self.settings),
            "device_context": id(self.device_context) if self.device_context is not None else None,
            "default_device": str(torch.get_default_device()),
        }


def global_state() -> GlobalState:
    """Capture the current :class:`GlobalState`."""
    cuda = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        cuda = torch.cuda.get_rng_state_all()
    np_state = sys.modules["numpy"].random.get_state() if "numpy" in sys.modules else None
    fn, disp = _mode_stacks()
    return GlobalState(torch.get_rng_state(), cuda, random.getstate(), np_state,
                       torch.is_grad_enabled(), torch.get_default_dtype(),
                       torch.is_anomaly_enabled(), torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled(), fn, disp,
                       _torch_settings(),
                       getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context",
                               None))


@dataclass
class Snapshot:
    """State of one target (module may be None for plain kernels) plus the global state."""

    modules: list[_ModState] = field(default_factory=list)
    globals: GlobalState | None = None

    def restore(self) -> None:
        """Put everything back; safe to call more than once."""
        if self.globals is not None:
            self.globals.restore()
        for s in self.modules:
            _put_module(s)


def snapshot(module: nn.Module | None) -> Snapshot:
    """Capture ``module``'s state (every submodule) and the global state."""
    g = global_state()
    mods = [] if module is None else [_grab_module(m) for m in module.modules()]
    return Snapshot(mods, g)


@contextlib.contextmanager
def preserved(module: nn.Module | None, base: Snapshot | None = None) -> Iterator[Snapshot]:
    """Context manager: snapshot on entry, restore on exit (also when the body raises).

    ``base``: a snapshot of ``module`` known to describe the state on entry (one taken, or last
    restored, with nothing changed since); it is restored on exit instead of taking a new one,
    which saves copying every parameter and buffer when many isolated steps run in a row.
    """
    snap = snapshot(module) if base is None else base
    try:
        yield snap
    finally:
        snap.restore()


def module_state_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Compare two :func:`module_state` dicts exactly (values bit-identical, same dtypes)."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                return False
            if x.dtype != y.dtype or x.shape != y.shape or x.device != y.device:
                return False
            if not torch.equal(x, y):
                # NaN-aware bitwise comparison
                if not (torch.isnan(x) == torch.isnan(y)).all() or not torch.equal(
                        torch.nan_to_num(x), torch.nan_to_num(y)):
                    return False
        elif x != y:
            return False
    return True


def module_state(module: nn.Module) -> dict[str, Any]:
    """Flat copy of parameters, grads, requires_grad flags, buffers and training flags (tests)."""
    out: dict[str, Any] = {}
    for n, p in module.named_parameters():
        out[f"param:{n}"] = p.detach().clone()
        out[f"grad:{n}"] = None if p.grad is None else p.grad.detach().clone()
        out[f"requires_grad:{n}"] = p.requires_grad
    for n, b in module.named_buffers():
        out[f"buffer:{n}"] = b.detach().clone()
    for n, m in module.named_modules():
        out[f"training:{n}"] = m.training
    return out


__all__.append("module_state")
