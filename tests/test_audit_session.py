"""Video trackers whose forward takes an inference session instead of tensors
(``forward(inference_session, frame_idx)``): run on clips ``(B, T, C, H, W)`` through
:class:`~attncheck.audit.hf.SessionTracked`, one session per clip, one object prompted by a mask
on frame 0, later frames attending to the memory of earlier ones.  A toy tracker of the same
calling convention keeps the tests cheap; the transformers tracker itself is behind ``slow``."""
import math
from dataclasses import dataclass

import pytest
import torch

pytest.importorskip("transformers")

from transformers.utils import ModelOutput  # noqa: E402

from attncheck.audit.hf import SessionTracked, session_class  # noqa: E402


@dataclass
class ToyOutput(ModelOutput):
    object_ids: list | None = None
    pred_masks: torch.Tensor | None = None
    object_score_logits: torch.Tensor | None = None


class ToySession:
    """The state a tracker keeps between frames: the frames, the prompts, the memory."""

    def __init__(self, video=None, video_height=None, video_width=None, dtype=None):
        self.frames, self.size, self.dtype = video, (video_height, video_width), dtype
        self.masks, self.memory, self.obj_with_new_inputs = {}, [], []

    def obj_id_to_idx(self, obj_id):
        return obj_id - 1

    def add_mask_inputs(self, obj_idx, frame_idx, inputs):
        self.masks[(obj_idx, frame_idx)] = inputs


class ToyTracker(torch.nn.Module):
    """Each frame's pixels (as tokens) attend to themselves and to the earlier frames' tokens;
    the prompt mask of frame 0 is added to that frame's tokens."""

    def __init__(self, channels=3, width=8):
        super().__init__()
        self.proj = torch.nn.Linear(channels, width)

    def forward(self, inference_session: ToySession, frame_idx: int | None = None):
        s = inference_session
        frame = s.frames[frame_idx]
        mask = s.masks.get((0, frame_idx)) if 1 in s.obj_with_new_inputs else None
        if mask is not None:
            frame = frame + mask[0]
        q = self.proj(frame.flatten(1).T)  # (H·W, width)
        kv = torch.cat([*s.memory, q])
        weights = torch.softmax(q @ kv.T / math.sqrt(q.shape[-1]), dim=-1)
        s.memory.append(q)
        out = (weights @ kv)[None]
        return ToyOutput(object_ids=[1], pred_masks=out, object_score_logits=out.mean(dim=(1, 2)))


def test_session_class_is_the_annotation_of_the_first_required_argument():
    assert session_class(ToyTracker) is ToySession
    assert session_class(torch.nn.Linear) is None  # first argument a tensor


def test_session_tracked_runs_each_clip_in_its_own_session_frame_by_frame():
    torch.manual_seed(0)
    m = SessionTracked(ToyTracker(), ToySession).eval()
    x = torch.randn(3, 2, 3, 4, 4)  # (B, T, C, H, W)
    out = m(x)
    assert out.shape == (3, 2, 16 * 8 + 1)  # (B, T, masks and object score flattened)
    frame = m.model(m._session(x[0]), frame_idx=0)  # the float outputs of frame 0, in order
    torch.testing.assert_close(out[0, 0], torch.cat([frame["pred_masks"].flatten(), frame["object_score_logits"]]))
    # clips do not share a session: each sample alone gives its batched output
    torch.testing.assert_close(m(x[1:2]), out[1:2])
    # frame 1 attends to frame 0's memory: changing frame 0 changes frame 1's output
    y = x.clone()
    y[:, 0] += 1
    assert not torch.allclose(m(y)[:, 1], out[:, 1])
    # the mask prompt (centred square of half the side) reached frame 0
    mask = m._session(x[0]).masks[(0, 0)]
    assert mask.shape == (1, 1, 4, 4) and mask.sum() == 4 and mask[0, 0, 1:3, 1:3].eq(1).all()


def test_session_tracked_refuses_images_and_single_frames():
    m = SessionTracked(ToyTracker(), ToySession)
    with pytest.raises(ValueError, match=r"tracks clips \(B, T ≥ 2, C, H, W\)"):
        m(torch.randn(2, 3, 4, 4))
    with pytest.raises(ValueError, match="T ≥ 2"):  # one frame: the prompt only, nothing tracked
        m(torch.randn(2, 1, 3, 4, 4))


@pytest.mark.slow
def test_sam2_video_tracker_is_audited_on_clips():
    from attncheck.audit.hf import build_hf

    (m,) = build_hf("hf:sam2_video", "sam2_video", sdpa=False)
    assert m.info["class"] == "Sam2VideoModel" and m.info["input_layout"] == "clip"
    x = m.make_inputs(2, generator=torch.Generator().manual_seed(0))
    assert x.dim() == 5 and m.forward(x).out.shape[:2] == x.shape[:2]
