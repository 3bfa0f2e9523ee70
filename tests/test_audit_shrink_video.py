"""The shrinker on video towers whose patch is a tubelet ``(frames, height, width)`` and that
declare no ``patch_size``: the image side is a few tubelets wide."""
import pytest

tf = pytest.importorskip("transformers")

from attncheck.audit.shrink import PATCHES_PER_SIDE, shrink_config  # noqa: E402


@pytest.mark.parametrize("model_type", ["vivit", "videoprism_vision_model"])
def test_image_side_is_a_whole_number_of_tubelets(model_type):
    default = tf.AutoConfig.for_model(model_type)
    tubelet = list(default.tubelet_size)
    c = shrink_config(default, 0)
    assert c.image_size == PATCHES_PER_SIDE * tubelet[1] < default.image_size
    assert list(c.tubelet_size) == tubelet  # the patch itself is kept
