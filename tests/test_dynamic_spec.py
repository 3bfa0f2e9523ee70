"""Target specs: PATH.py:NAME and package.module:NAME with classes, kernels and factories."""
import os

import pytest
import torch

from attncheck.dynamic.spec import SpecError, resolve

from _dynamic_helpers import FIX

DYN = os.path.join(FIX, "dynamic")


def test_path_class_kernel_and_factory():
    t = resolve(f"{DYN}/buggy_modules.py:NaNAttention")
    assert t.kind == "layer" and isinstance(t.module, torch.nn.Module) and t.call == "x"
    t = resolve(f"{DYN}/sdpa_kernels.py:sdpa_causal", causal=True)
    assert t.kind == "kernel" and t.causal is True and t.name.endswith("sdpa_causal")
    t = resolve(f"{DYN}/nanogpt_layer.py:make_causal_target")
    assert t.kind == "layer" and t.causal is True and t.spec.endswith(":make_causal_target")
    t = resolve(f"{DYN}/nanogpt_layer.py:make_causal_layer")
    assert t.embed_dim == 32


def test_package_module_spec():
    t = resolve("torch.nn.functional:scaled_dot_product_attention")
    assert t.kind == "kernel" and t.accepts_mask


@pytest.mark.parametrize("spec,needle", [
    ("no_colon", "bad target spec"),
    ("x.py:", "bad target spec"),
    ("does/not/exist.py:f", "not found"),
    ("no_such_package_xyz.mod:f", "cannot import module"),
    (f"{DYN}/buggy_modules.py:Missing", "has no attribute"),
    (f"{DYN}/buggy_modules.py:math", "not a module, kernel or factory"),
    ("torch.nn:Linear", "needs arguments"),
    ("os.path:join", "neither a kernel"),
    ("torch:tensor", "raised TypeError"),
])
def test_bad_specs(spec, needle):
    with pytest.raises(SpecError, match=needle):
        resolve(spec)


def test_import_error_in_file(tmp_path):
    p = tmp_path / "broken.py"
    p.write_text("import torch\nraise ImportError('missing dep')\n")
    with pytest.raises(SpecError, match="importing .*broken.py failed: ImportError: missing dep"):
        resolve(f"{p}:f")
    p2 = tmp_path / "factory.py"
    p2.write_text("def make():\n    raise ValueError('no config')\n\n"
                  "def make_int():\n    return 3\n")
    with pytest.raises(SpecError, match="raised ValueError: no config"):
        resolve(f"{p2}:make")
    with pytest.raises(SpecError, match="factory returned int"):
        resolve(f"{p2}:make_int")
