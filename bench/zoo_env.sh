#!/usr/bin/env bash
# Build the virtual environment the transformers zoo sweep runs in (`attncheck audit hf:all`):
# CPU torch, transformers, and timm, which about a dozen model types need (TimmWrapper, TimmBackbone,
# backbones of Gemma 3n, EdgeTAM, FastVLM, PerceptionLM, PE Audio/Video). Not the CI environment:
# the tests skip the timm-backed types when timm cannot be imported.
#
# timm requires torchvision. The only torchvision wheel on PyPI for torch 2.13 is the CUDA build;
# beside the CPU torch wheel its compiled operators (`torchvision._C`) cannot load, and torchvision
# 0.28's `_meta_registrations.py` then fails at import because it registers fake kernels for
# `torchvision::nms` and `torchvision::qnms` without checking `extension._has_ops()` (its other
# registrations do check). This script guards those two registrations the same way; nothing the
# audited models run uses torchvision operators.
#
# Usage: bash bench/zoo_env.sh [VENV_DIR]   (default: .zoovenv at the repository root)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/.zoovenv}"
python3.11 -m venv "$venv"
pip="$venv/bin/pip"
"$pip" install -q torch==2.13.0
"$pip" install -q --no-deps torchvision==0.28.0
"$pip" install -q pillow numpy "transformers==5.24.*" scipy x-transformers einops
"$pip" install -q --no-deps timm
"$pip" install -q -e "$root[dev]"
meta="$("$venv/bin/python" -c 'import importlib.util as u; print(u.find_spec("torchvision").submodule_search_locations[0])')/_meta_registrations.py"
"$venv/bin/python" - "$meta" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
if "meta_qnms = torch.library.register_fake" not in text:
    for op in ("nms", "qnms"):
        decorator = f'@torch.library.register_fake("torchvision::{op}")\ndef meta_{op}('
        assert decorator in text, f"unexpected torchvision source: no fake registration of {op}"
        text = text.replace(decorator, f"def meta_{op}(")
    text += (
        "\n\nif torchvision.extension._has_ops():\n"
        '    meta_nms = torch.library.register_fake("torchvision::nms")(meta_nms)\n'
        '    meta_qnms = torch.library.register_fake("torchvision::qnms")(meta_qnms)\n'
    )
    open(path, "w").write(text)
PY
"$venv/bin/python" -c 'import timm, torchvision, transformers; print("timm", timm.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__)'
