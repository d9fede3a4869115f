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
