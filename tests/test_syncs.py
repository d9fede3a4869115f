"""`crop` never waits for the device: the host syncs it makes (`aten._local_scalar_dense`, what `.item()`, `int(t)` and
`bool(t)` of a tensor dispatch to) are counted with a `TorchDispatchMode`, on CPU (the same op an accelerator waits on).

Issue 21: `crop(0)` makes none, on every cache type; a partial or full rollback at most one per call, and none on
dynamic or static attention layers.
"""

import warnings
from unittest import mock

import pytest
import torch

import transformers
from cache_crop_fix.syncs import SyncCounter
from cache_crop_fix.targets import target_for


TARGET = target_for(transformers.__version__).name


def count_syncs(function) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with SyncCounter() as counter:
            function()
    return counter.count


def _states(count: int) -> torch.Tensor:
    return torch.arange(count, dtype=torch.float32).reshape(1, 1, count, 1) + 1


def _config(num_layers: int, sliding_window=None):
    from transformers import MistralConfig

    common = {"hidden_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 1}
    return MistralConfig(num_hidden_layers=num_layers, sliding_window=sliding_window, **common)


def _filled(kind: str, num_layers: int = 8, tokens: int = 10):
    from transformers import DynamicCache, StaticCache

    if kind == "dynamic":
        cache = DynamicCache()
    elif kind == "dynamic_sliding":
        cache = DynamicCache(config=_config(num_layers, sliding_window=16))
    elif kind == "dynamic_sliding_recorded":
        cache = DynamicCache(config=_config(num_layers, sliding_window=4))
        cache.activate_past_recording()
    elif kind == "static":
        cache = StaticCache(config=_config(num_layers), max_cache_len=16)
    else:  # static_sliding: the window is the whole cache, so that any crop can be honoured
        cache = StaticCache(config=_config(num_layers, sliding_window=16), max_cache_len=16)
    for layer_idx in range(num_layers):
        cache.update(_states(tokens), _states(tokens), layer_idx)
    return cache


KINDS = ["dynamic", "dynamic_sliding", "dynamic_sliding_recorded", "static", "static_sliding"]


@pytest.mark.parametrize("kind", KINDS)
def test_crop_zero_makes_no_host_sync(kind):
    cache = _filled(kind)
    argument = 0 if TARGET != "v5_14" else -0  # on 5.14 `crop(0)` is a full rollback
    assert count_syncs(lambda: cache.crop(argument)) == 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("tokens_to_remove", [-1, -2, -10, -100])
def test_rollback_makes_no_host_sync_on_attention_layers(kind, tokens_to_remove):
    if kind == "dynamic_sliding_recorded" and TARGET == "v5_14" and -tokens_to_remove < 10:
        pytest.skip("5.14 sliding window layers do not record their past: beyond the window they refuse")
    cache = _filled(kind)
    assert count_syncs(lambda: cache.crop(tokens_to_remove)) == 0
    expected = max(10 + tokens_to_remove, 0)
    assert int(cache.get_seq_length()) == expected


def test_generate_tensor_argument_is_read_once():
    # `generate` passes a 0-d tensor: it is read on the host at most once per call, not per layer
    cache = _filled("static")
    assert count_syncs(lambda: cache.crop(torch.tensor(-2))) <= 1
    assert int(cache.get_seq_length()) == 8


def _static_hybrid(linear_layer_type="hybrid"):
    from transformers import PreTrainedConfig, StaticCache

    config = PreTrainedConfig(layer_types=[linear_layer_type, "full_attention"] * 2, num_hidden_layers=4)
    config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim = 8, 1, 1, 1
    cache = StaticCache(config=config, max_cache_len=16)
    cache.activate_past_recording()
    for layer_idx, layer in enumerate(cache.layers):
        if hasattr(layer, "update"):
            cache.update(_states(10), _states(10), layer_idx)
        if hasattr(layer, "update_conv_state"):
            layer.update_conv_state(torch.ones(1, 2, 10), conv_kernel_size=2)
    return cache


@pytest.mark.parametrize("linear_layer_type", ["hybrid", "linear_attention"])
@pytest.mark.parametrize("tokens_to_remove", [0, -1, -10, -100])
def test_static_hybrid_reads_its_lengths_at_most_once(tokens_to_remove, linear_layer_type):
    # The linear attention part of a static hybrid layer, or a linear attention layer next to static attention layers,
    # needs the attention length on the host: the lengths are read together, once per call, e.g. with `tolist` (one
    # device-to-host copy, which on CPU dispatches no `_local_scalar_dense`: counted apart)
    cache = _static_hybrid(linear_layer_type)
    tolist = torch.Tensor.tolist
    reads = []

    def counted_tolist(tensor):
        reads.append(tensor.device)
        return tolist(tensor)

    with mock.patch.object(torch.Tensor, "tolist", counted_tolist):
        syncs = count_syncs(lambda: cache.crop(tokens_to_remove))
    # `crop(0)` removes nothing (on 5.14: a full rollback of every layer, whatever its length): nothing is read
    assert syncs + len(reads) <= (1 if tokens_to_remove else 0)
    if tokens_to_remove == 0 and TARGET == "v5_14":
        assert int(cache.get_seq_length()) == 0
    else:
        assert int(cache.get_seq_length()) == max(10 + tokens_to_remove, 0)


def test_compiled_static_decode_step_keeps_running_after_crops():
    """A crop moves the static counters in place: a compiled decode step is neither recompiled nor wrong after it."""
    compiled_graphs = []

    def backend(graph_module, example_inputs):
        compiled_graphs.append(graph_module)
        return graph_module.forward

    def decode_step(cache, states):
        return [cache.update(states, -states, layer_idx)[0] for layer_idx in range(len(cache.layers))]

    torch._dynamo.reset()
    compiled_step = torch.compile(decode_step, backend=backend, fullgraph=True)
    cache, reference = _filled("static", num_layers=2, tokens=6), _filled("static", num_layers=2, tokens=6)
    crops = [-1, -3, 2 if TARGET == "v5_14" else -2, -100]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step, argument in enumerate(crops):
            states = torch.full((1, 1, 1, 1), 100.0 + step)
            for got, expected in zip(compiled_step(cache, states), decode_step(reference, states)):
                torch.testing.assert_close(
                    got[..., : int(reference.get_seq_length()), :],
                    expected[..., : int(reference.get_seq_length()), :],
                    rtol=0,
                    atol=0,
                )
            assert int(cache.get_seq_length()) == int(reference.get_seq_length())
            cache.crop(argument)
            reference.crop(argument)
    assert len(compiled_graphs) == 1


@pytest.mark.parametrize("kind", ["static", "static_sliding"])
def test_crop_zero_of_static_layers_launches_no_kernel(kind):
    """`generate` calls `crop(0)` after every forward: on static layers it changes nothing, so it dispatches no op."""
    cache = _filled(kind)
    if TARGET == "v5_14":
        pytest.skip("on 5.14 `crop(0)` is a full rollback")
    with SyncCounter() as counter:
        cache.crop(0)
    assert counter.ops == []
    assert int(cache.get_seq_length()) == 10


@pytest.mark.parametrize("record", [False, True], ids=["plain", "recording"])
@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_hybrid_forward_makes_no_host_sync(kind, record):
    """A linear attention layer's update never reads a device tensor on the host: a Qwen3-Next prefill, then a decode
    step, make no sync (issue 33; a layer that read its count back from its tensor made 2 per forward)."""
    from tests.compat import CACHE_KWARG
    from tests.tiny_models import tiny_qwen3_next
    from transformers import DynamicCache, StaticCache

    model = tiny_qwen3_next()
    if kind == "static":
        cache = StaticCache(config=model.config, max_cache_len=16)
    else:
        cache = DynamicCache(config=model.config)
    if record:
        cache.activate_past_recording(**({"recurrent_states_to_keep": 2} if TARGET == "v5_25" else {}))
    input_ids = torch.arange(6).unsqueeze(0)
    with torch.no_grad():
        prefill = count_syncs(lambda: model(input_ids[:, :5], use_cache=True, **{CACHE_KWARG: cache}))
        position = torch.tensor([5])
        decode = count_syncs(
            lambda: model(input_ids[:, 5:], use_cache=True, cache_position=position, **{CACHE_KWARG: cache})
        )
    assert (prefill, decode) == (0, 0)
    assert int(cache.get_seq_length()) == 6
