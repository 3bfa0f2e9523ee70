"""Submodules their parent model runs only when given a prompt (SAM 3's geometry encoder on box
prompts, SAM's mask embedding on mask prompts), models that stack a prompt image with the input
image (SegGPT), and video trackers that detect their objects from a text prompt (SAM 3 video).
Toy modules of the same conventions keep the tests cheap."""
from dataclasses import dataclass

import pytest
import torch

pytest.importorskip("transformers")

from transformers import PretrainedConfig  # noqa: E402
from transformers.utils import ModelOutput  # noqa: E402

from attncheck.audit.hf import (SessionTracked, _first_accepted_layout, _first_conv_call,  # noqa: E402
                                _prompted_call, documented_input)
from attncheck.audit.model import AuditModel, Forward  # noqa: E402


class BoxEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 8)

    def forward(self, box_embeddings, img_feats):
        return self.proj(box_embeddings) + img_feats.mean()


class Detector(torch.nn.Module):
    """Runs its box encoder only when given boxes (as SAM 3 runs its geometry encoder)."""

    def __init__(self):
        super().__init__()
        self.config = PretrainedConfig(image_size=8, num_channels=3)
        self.box_encoder = BoxEncoder()

    def forward(self, pixel_values, input_boxes=None, input_boxes_labels=None):
        r"""
        input_boxes (`torch.Tensor` of shape `(batch_size, num_boxes, 4)`, *optional*):
            Normalized boxes.
        input_boxes_labels (`torch.LongTensor` of shape `(batch_size, num_boxes)`, *optional*):
            Box labels.
        """
        if input_boxes is None:
            return pixel_values.mean()
        return self.box_encoder(input_boxes, pixel_values)


def _parent(module):
    return AuditModel(spec="toy", module=module, forward_fn=lambda x, **kw: Forward(out=module(x)[None]),
                      kind="vision", input_kind="pixels", image_shape=(3, 8, 8))


def test_prompt_arguments_are_built_from_their_documented_shapes_only_when_asked():
    m, g = Detector(), torch.Generator().manual_seed(0)
    assert documented_input(m, "input_boxes", m.config, g) is None  # num_boxes, 4: not an image dim
    box = documented_input(m, "input_boxes", m.config, g, prompts=True)
    assert box.shape == (1, 1, 4)
    x0, y0, x1, y1 = box[0, 0].tolist()  # a valid box read as corners, or as centre and size
    assert 0 < x0 < x1 < 1 and 0 < y0 < y1 < 1


def test_a_submodule_called_only_with_a_prompt_is_recorded_with_one():
    m = Detector()
    rec = _prompted_call(_parent(m), m.box_encoder)
    assert rec is not None and rec["box_embeddings"].shape == (1, 1, 4)
    assert rec["img_feats"].shape == (1, 3, 8, 8)
    assert _prompted_call(_parent(m), torch.nn.Linear(1, 1)) is None  # never called, whatever the prompt


def test_a_mask_embedding_gets_a_map_for_its_first_convolution():
    conv = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 2, stride=2), torch.nn.GELU())
    rec = _first_conv_call(conv, _parent(Detector()))
    assert list(rec) == ["input"] and rec["input"].shape == (1, 1, 8, 8)
    assert _first_conv_call(BoxEncoder(), _parent(Detector())) is None  # a linear layer first, two inputs


class PromptStacker(torch.nn.Module):
    """Stacks the prompt image above the input image (as SegGPT does); its config declares the
    stacked size, and it refuses any other, reporting the size it got."""

    main_input_name = "pixel_values"

    def __init__(self):
        super().__init__()
        self.config = PretrainedConfig(image_size=8, num_channels=3)
        self.proj = torch.nn.Linear(3, 8)

    def forward(self, pixel_values, prompt_pixel_values, output_attentions=False):
        r"""
        prompt_pixel_values (`torch.FloatTensor` of shape `(batch_size, num_channels, height, width)`):
            The prompt image.
        """
        x = torch.cat([prompt_pixel_values, pixel_values], dim=2)
        if tuple(x.shape[2:]) != (8, 8):
            raise ValueError(f"Input image size ({x.shape[2]}*{x.shape[3]}) doesn't match model (8*8).")
        h = self.proj(x.flatten(2).transpose(1, 2))
        w = torch.softmax(h @ h.transpose(1, 2) / 8 ** 0.5, dim=-1)
        return ModelOutput(last_hidden_state=w @ h)


def test_a_model_that_stacks_its_images_is_fed_images_of_the_reported_ratio():
    model = PromptStacker().eval()
    adapter, x0 = _first_accepted_layout("toy", model, "vision", torch.float32)
    assert model.attncheck_image_side == (4, 8)  # fed 8×8, it reported 16×8: half the height
    assert x0.shape[-2:] == (4, 8)
    assert adapter.forward(x0).out.shape[0] == 2


@dataclass
class ToyOutput(ModelOutput):
    pred_masks: torch.Tensor | None = None


class PromptSession:
    """A detecting tracker's session: text prompts by id, besides mask prompts."""

    def __init__(self, video=None):
        self.frames, self.masks = video, {}
        self.prompts, self.prompt_input_ids, self.prompt_attention_masks = {}, {}, {}

    def add_prompt(self, text):
        self.prompts[len(self.prompts)] = text
        return len(self.prompts) - 1

    def obj_id_to_idx(self, obj_id):
        return obj_id - 1

    def add_mask_inputs(self, obj_idx, frame_idx, inputs):
        self.masks[(obj_idx, frame_idx)] = inputs


class DetectingTracker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = PretrainedConfig()
        self.config.vocab_size = 100
        self.embed = torch.nn.Embedding(100, 3)

    def forward(self, inference_session: PromptSession, frame_idx: int | None = None):
        s = inference_session
        if not s.prompts:
            raise ValueError("No prompts available for detection.")
        text = self.embed(s.prompt_input_ids[0]).mean(1)  # (1, 3)
        return ToyOutput(pred_masks=s.frames[frame_idx] * text[0, :, None, None])


def test_a_detecting_tracker_gets_a_text_prompt_and_no_mask():
    m = SessionTracked(DetectingTracker(), PromptSession)
    session = m._session(torch.randn(2, 3, 4, 4))
    assert session.masks == {}  # the detector finds the objects itself
    ids, mask = session.prompt_input_ids[0], session.prompt_attention_masks[0]
    assert ids.shape == mask.shape and ids.shape[0] == 1 and mask.eq(1).all()
    assert ids.min() >= 0 and ids.max() < 100
    out = m(torch.randn(2, 2, 3, 4, 4))
    assert out.shape == (2, 2, 3 * 4 * 4)


def test_a_floating_prompt_follows_the_dtype_of_the_model():
    # a float32 box fed to float64 (or float16) weights is refused by the parent: the prompt is
    # made in the model's dtype, as the audit's other inputs are
    m = Detector().double()
    rec = _prompted_call(_parent(m), m.box_encoder)
    assert rec is not None and rec["box_embeddings"].dtype == torch.float64
