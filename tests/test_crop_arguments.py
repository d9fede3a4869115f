"""`Cache.crop` takes an int, a numpy integer or the 0-d integer tensor `generate` passes; anything else raises a
`TypeError` before the cache changes (on every target; 5.25's `Cache.crop` reads a tensor argument on the host once,
which must not turn a string or a float into a number of tokens)."""

import numpy as np
import pytest
import torch

from transformers import DynamicCache

from .compat import TARGET


def _filled():
    cache = DynamicCache()
    states = torch.arange(10, dtype=torch.float32).reshape(1, 1, 10, 1)
    for layer_idx in range(2):
        cache.update(states, states, layer_idx)
    return cache


@pytest.mark.parametrize("argument", [torch.tensor(-2), np.int64(-2), -2], ids=["tensor", "numpy", "int"])
def test_integer_arguments_remove_tokens(argument):
    cache = _filled()
    cache.crop(argument)
    assert [int(layer.get_seq_length()) for layer in cache.layers] == [8, 8]


@pytest.mark.parametrize(
    "argument", ["-2", -2.0, None, torch.tensor(-2.0)], ids=["str", "float", "none", "float_tensor"]
)
def test_other_arguments_raise_type_error_before_anything_changes(argument):
    cache = _filled()
    with pytest.raises(TypeError):
        cache.crop(argument)
    assert [int(layer.get_seq_length()) for layer in cache.layers] == [10, 10]


@pytest.mark.parametrize("make_argument", [torch.tensor, np.int64], ids=["tensor", "numpy"])
def test_a_layer_takes_the_same_arguments(make_argument):
    # `crop` of a layer, called directly, converts its argument too, and refuses a positive value (5.14: a length)
    layer = _filled().layers[0]
    layer.crop(make_argument(-2))
    assert int(layer.get_seq_length()) == 8
    if TARGET.name != "v5_14":
        with pytest.raises(ValueError, match="positive value"):
            layer.crop(make_argument(1))
        assert int(layer.get_seq_length()) == 8


def _sliding_layers():
    """A recording dynamic sliding window beyond its window and a static one, as layers and in a cache (issue 32)."""
    from transformers import MistralConfig, StaticCache
    from transformers.cache_utils import DynamicSlidingWindowLayer, StaticSlidingWindowLayer

    dynamic = DynamicSlidingWindowLayer(sliding_window=4)
    dynamic.activate_past_recording()
    static = StaticSlidingWindowLayer(max_cache_len=4, sliding_window=4)
    common = {"hidden_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 8}
    config = MistralConfig(num_hidden_layers=1, sliding_window=4, **common)
    dynamic_cache, static_cache = DynamicCache(config=config), StaticCache(config=config, max_cache_len=4)
    dynamic_cache.activate_past_recording()
    layers = [(dynamic, 6), (static, 3), (dynamic_cache, 6), (static_cache, 3)]
    for layer, length in layers:
        is_cache = hasattr(layer, "layers")
        states = torch.ones(1, 1, length, 8 if is_cache else 1)
        layer.update(states, states, *([0] if is_cache else []))
    return layers


@pytest.mark.parametrize("make_argument", [torch.tensor, np.int64], ids=["tensor", "numpy"])
def test_counters_stay_python_ints(make_argument):
    if TARGET.name == "v5_14":
        pytest.skip("5.14 sliding windows do not record their past")
    for layer, length in _sliding_layers():
        layer.crop(make_argument(-1))
        owner = layer.layers[0] if hasattr(layer, "layers") else layer
        # The static layer's host counter (its `cumulative_length` is a tensor), else the dynamic one's
        counter = getattr(owner, "cumulative_length_int", owner.cumulative_length)
        assert type(counter) is int, (type(owner).__name__, type(counter))
        assert int(layer.get_seq_length()) == length - 1
