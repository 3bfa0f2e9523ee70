"""Keys attended per query in each Swin block at a pretrained size, for three Swin codes of
transformers: ``MaskFormerSwinModel`` (MaskFormer's backbone), ``SwinModel`` (classification Swin:
no shift and a window clamped to the feature map once the map is no larger than the window,
``SwinLayer.set_shift_and_window_size``) and ``SwinBackbone`` (``always_partition=True``: the
shifted window at every resolution, as the detection / segmentation Swin of Liu et al. 2021).

Config: the Swin-B backbone of facebook/maskformer-swin-base-ade (image 384, patch 4, window 12),
two blocks per stage; stage 4 is one 12×12 window.  Random weights: the −100 shifted-window mask,
not the weights, decides which attention weights fall to ≤ the smallest normal float32.

Run: ``python bench/swin_window_patterns.py`` (CPU, ~10 s).
"""
import torch
import torch.nn.functional as F
from transformers import MaskFormerSwinConfig, MaskFormerSwinModel, SwinBackbone, SwinConfig, SwinModel

MASKED = torch.finfo(torch.float32).tiny


def block_weights(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Attention weights (num_windows·B, heads, ws², ws²) of every block, in call order,
    recorded at ``torch.nn.functional.softmax`` (eager attention)."""
    for cfg in {id(mod.config): mod.config for mod in model.modules() if hasattr(mod, "config")}.values():
        cfg._attn_implementation = "eager"
    seen, softmax = [], F.softmax

    def recording(t, *a, **k):
        out = softmax(t, *a, **k)
        seen.append(out.detach())
        return out

    F.softmax = recording
    try:
        with torch.no_grad():
            model(x)
    finally:
        F.softmax = softmax
    return seen


def main() -> None:
    torch.manual_seed(0)
    kw = dict(image_size=384, patch_size=4, embed_dim=128, depths=[2, 2, 2, 2],
              num_heads=[4, 8, 16, 32], window_size=12)
    models = {"MaskFormerSwinModel": MaskFormerSwinModel(MaskFormerSwinConfig(**kw)),
              "SwinModel": SwinModel(SwinConfig(**kw)),
              "SwinBackbone": SwinBackbone(SwinConfig(**kw, out_features=["stage4"]))}
    x = torch.randn(1, 3, 384, 384)
    last = {}
    for name, model in models.items():
        print(name)
        weights = block_weights(model.eval(), x)
        for i, w in enumerate(weights):
            counts = sorted(set((w > MASKED).sum(-1).flatten().tolist()))
            print(f"  block {i}: weights {tuple(w.shape)}, keys attended per query {counts}")
        last[name] = weights[-1] > MASKED
    print("last block, MaskFormerSwinModel map == SwinBackbone map:",
          torch.equal(last["MaskFormerSwinModel"], last["SwinBackbone"]))


if __name__ == "__main__":
    main()
