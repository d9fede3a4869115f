"""What 5.25's linear attention layers did before the fix and still do with it (these tests pass on stock too): the
fix rewrites `update_conv_state`, `update_recurrent_state`, `reset` and the refusal of a positive `crop`, and these
pin the upstream behaviour it must keep. The rollbacks themselves are tested in `tests/v5_25/utils/test_cache_utils.py`.
"""

import pytest
import torch

import transformers
from cache_crop_fix.targets import target_for


pytestmark = pytest.mark.skipif(
    target_for(transformers.__version__).name != "v5_25", reason="5.25's linear attention layers"
)


def _columns(*values):
    return torch.tensor(values, dtype=torch.float64).view(1, 1, len(values))


def test_update_without_recording_pads_a_short_prefill_and_keeps_the_conv_states_in_place():
    from transformers.cache_utils import LinearAttentionLayer

    layer = LinearAttentionLayer()
    # One token with a kernel of 3: the conv sees the zeros before the first token
    assert layer.update_conv_state(_columns(1.0), conv_kernel_size=3)[0, 0].tolist() == [0.0, 0.0, 1.0]
    conv_states = layer.conv_states[0]
    assert conv_states[0, 0].tolist() == [0.0, 0.0, 1.0]
    assert layer.update_conv_state(_columns(2.0, 3.0))[0, 0].tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]
    # The last `kernel` columns, copied into the same tensor (a static address)
    assert layer.conv_states[0] is conv_states
    assert conv_states[0, 0].tolist() == [1.0, 2.0, 3.0]
    # A prefill at least as long as the kernel is returned as it is
    layer = LinearAttentionLayer()
    assert layer.update_conv_state(_columns(1.0, 2.0, 3.0), conv_kernel_size=2)[0, 0].tolist() == [1.0, 2.0, 3.0]
    assert layer.conv_states[0][0, 0].tolist() == [2.0, 3.0]


@pytest.mark.parametrize("record_past", [False, True])
def test_update_recurrent_state_stores_the_last_state_in_place_and_returns_it(record_past):
    from transformers.cache_utils import LinearAttentionLayer

    layer = LinearAttentionLayer()
    if record_past:
        layer.activate_past_recording(recurrent_states_to_keep=3)
    layer.update_conv_state(_columns(1.0), conv_kernel_size=2)
    cached = layer.update_recurrent_state(torch.full((1, 1), 1.0, dtype=torch.float64))
    assert cached is layer.recurrent_states[0] and cached.item() == 1.0
    layer.update_conv_state(_columns(2.0, 3.0))
    states = [torch.full((1, 1), value, dtype=torch.float64) for value in (2.0, 3.0)]
    assert layer.update_recurrent_state(states) is cached
    assert cached.item() == 3.0 and states[-1] is not cached


def test_reset_zeroes_the_initialized_states_in_place():
    from transformers.cache_utils import LinearAttentionLayer

    # State 1 is never updated (it stays `None`)
    layer = LinearAttentionLayer(number_of_states=2)
    layer.update_conv_state(_columns(1.0, 2.0, 3.0), conv_kernel_size=2)
    layer.update_recurrent_state(torch.full((1, 1), 3.0, dtype=torch.float64))
    conv_states, recurrent_states = layer.conv_states[0], layer.recurrent_states[0]
    layer.reset()
    assert layer.conv_states[0] is conv_states and conv_states.abs().sum().item() == 0.0
    assert layer.recurrent_states[0] is recurrent_states and recurrent_states.item() == 0.0
    assert (layer.conv_states[1], layer.recurrent_states[1], int(layer.get_seq_length())) == (None, None, 0)


@pytest.mark.parametrize("tokens_to_remove", [1, 3])
def test_positive_crop_is_refused_before_anything_changes(tokens_to_remove):
    from transformers.cache_utils import LinearAttentionLayer

    layer = LinearAttentionLayer()
    layer.activate_past_recording(recurrent_states_to_keep=3)
    layer.update_conv_state(_columns(1.0, 2.0, 3.0, 4.0), conv_kernel_size=2)
    layer.update_recurrent_state(torch.full((1, 1), 4.0, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="negative int"):
        layer.crop(tokens_to_remove)
    assert int(layer.get_seq_length()) == 4
    assert layer.conv_states[0][0, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert layer.recurrent_states[0].item() == 4.0


def test_reorder_cache_reorders_the_conv_and_recurrent_states():
    from transformers.cache_utils import LinearAttentionLayer

    # Beam search: a batch of 2 beams, the second one selected twice
    layer = LinearAttentionLayer()
    layer.update_conv_state(torch.tensor([[[1.0, 2.0]], [[11.0, 12.0]]], dtype=torch.float64), conv_kernel_size=2)
    layer.update_recurrent_state(torch.tensor([[2.0], [12.0]], dtype=torch.float64))
    layer.reorder_cache(torch.tensor([1, 1]))
    assert layer.conv_states[0][:, 0].tolist() == [[11.0, 12.0], [11.0, 12.0]]
    assert layer.recurrent_states[0][:, 0].tolist() == [12.0, 12.0]


def test_numpy_scalars_crop_like_python_ints():
    import numpy as np

    from transformers.cache_utils import Cache, LinearAttentionLayer

    layer = LinearAttentionLayer()
    layer.activate_past_recording(recurrent_states_to_keep=3)
    layer.update_conv_state(_columns(1.0, 2.0, 3.0), conv_kernel_size=2)
    layer.update_recurrent_state([torch.full((1, 1), value, dtype=torch.float64) for value in (2.0, 3.0)])
    cache = Cache(layers=[layer])
    # A bool is an int: `True` is a positive crop, refused as such
    for positive in (True, np.True_):
        with pytest.raises(RuntimeError, match="negative int"):
            cache.crop(positive)
    cache.crop(np.int64(-1))
    assert (int(cache.get_seq_length()), layer.recurrent_states[0].item()) == (2, 2.0)
