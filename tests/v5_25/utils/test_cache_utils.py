# Copyright 2026 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

import unittest
import warnings
from unittest import mock

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_optimum_quanto, require_torch


if is_torch_available():
    import torch
    from torch._dynamo.testing import CompileCounter
    from torch.utils._python_dispatch import TorchDispatchMode

    from transformers import (
        LlamaConfig,
        Qwen3NextConfig,
    )
    from transformers.cache_utils import (
        Cache,
        CacheLayerMixin,
        DynamicCache,
        DynamicIndexedLayer,
        DynamicLayer,
        DynamicSlidingWindowLayer,
        EncoderDecoderCache,
        LinearAttentionAndFullAttentionLayer,
        LinearAttentionAndSlidingWindowAttentionLayer,
        LinearAttentionAndStaticFullAttentionLayer,
        LinearAttentionAndStaticSlidingWindowAttentionLayer,
        LinearAttentionLayer,
        QuantoQuantizedLayer,
        StaticIndexedLayer,
        StaticLayer,
        StaticSlidingWindowLayer,
    )


def _tokens(start, length):
    """Key/value states of `length` tokens, token `p` holding the value `p + 1`."""
    return torch.arange(start + 1, start + length + 1, dtype=torch.float64).view(1, 1, length, 1)


def _dispatched_ops(function):
    """The aten ops `function` dispatches: the kernels it launches, and its host syncs (`aten._local_scalar_dense`)."""
    ops = []

    class RecordOps(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops.append(func)
            return func(*args, **(kwargs or {}))

    with RecordOps():
        function()
    return ops


def _host_syncs(function):
    """How many times `function` reads a device tensor on the host: `int(t)`, `t.item()` and `bool(t)` dispatch
    `aten._local_scalar_dense` (what waits for an accelerator), `t.tolist()` dispatches nothing on CPU."""
    tolist, reads = torch.Tensor.tolist, []

    def counted_tolist(tensor):
        reads.append(tensor)
        return tolist(tensor)

    with mock.patch.object(torch.Tensor, "tolist", counted_tolist):
        ops = _dispatched_ops(function)
    return ops.count(torch.ops.aten._local_scalar_dense.default) + len(reads)


def _compiled(function):
    """`function` compiled in one graph (reading a device tensor on the host breaks it), and its frame counter: dynamo
    guards on the Python attributes it reads, so one that moved between calls compiles another frame."""
    torch._dynamo.reset()
    counter = CompileCounter()
    return torch.compile(function, backend=counter, fullgraph=True), counter


CLAMP_LAYERS = {
    "dynamic": lambda: DynamicLayer(),
    "dynamic_sliding": lambda: DynamicSlidingWindowLayer(sliding_window=4),
    "dynamic_indexed": lambda: DynamicIndexedLayer(),
    "static": lambda: StaticLayer(max_cache_len=8),
    "static_sliding": lambda: StaticSlidingWindowLayer(max_cache_len=4, sliding_window=4),
    "static_indexed": lambda: StaticIndexedLayer(max_cache_len=8),
}


def _assert_crop_is_clamped(test, name, removal):
    """Crops `removal` from a layer of 3 tokens: it keeps what is left, its static counters keep their address, and the
    next tokens are stored after the kept ones."""
    layer = CLAMP_LAYERS[name]()
    layer.update(_tokens(0, 3), _tokens(0, 3))
    indexed = hasattr(layer, "update_indexer")
    if indexed:
        layer.update_indexer(_tokens(0, 3).view(1, 3, 1))
    # The static counters are static addresses (`torch._dynamo.mark_static_address`): they move in place
    counters = {
        name: getattr(layer, name)
        for name in ("cumulative_length", "indexer_cumulative_length")
        if isinstance(getattr(layer, name, None), torch.Tensor)
    }
    addresses = {name: counter.data_ptr() for name, counter in counters.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer.crop(removal)
    kept = max(3 + removal, 0)
    test.assertEqual(int(layer.get_seq_length()), kept)
    for name, counter in counters.items():
        test.assertIs(getattr(layer, name), counter)
        test.assertEqual(counter.data_ptr(), addresses[name])
    # The next tokens are stored after the kept ones, in the indexer too
    keys, _ = layer.update(_tokens(10, 2), _tokens(10, 2))
    test.assertEqual(keys[0, 0, : kept + 2, 0].tolist(), [1.0, 2.0, 3.0][:kept] + [11.0, 12.0])
    if indexed:
        indexer_keys = layer.update_indexer(_tokens(10, 2).view(1, 2, 1))
        test.assertEqual(indexer_keys[0, : kept + 2, 0].tolist(), [1.0, 2.0, 3.0][:kept] + [11.0, 12.0])


STATIC_LAYERS = ("static", "static_sliding", "static_indexed")
# The static buffers and counters, at static addresses (`torch._dynamo.mark_static_address`)
STATIC_TENSORS = ("keys", "values", "cumulative_length", "indexer_keys", "indexer_cumulative_length")


def _update_static_layer(layer, states):
    """A forward over a static layer: its keys and values, and its indexer's keys if it has one."""
    layer.update(states, states)
    if isinstance(layer, StaticIndexedLayer):
        layer.update_indexer(states.view(1, -1, 1))


def _static_layer_of_3_tokens(name):
    layer = CLAMP_LAYERS[name]()
    _update_static_layer(layer, _tokens(0, 3))
    if isinstance(layer, StaticIndexedLayer):
        layer.indexer_position_ids = torch.arange(3).view(1, 1, 3)  # as Qwen4-Exp keeps them
    return layer


def _update_and_crop(layer, states):
    _update_static_layer(layer, states)
    layer.crop(-1)
    layer.crop(0)


@require_torch
class CropClampTest(unittest.TestCase):
    @parameterized.expand([("static",), ("static_sliding",), ("static_indexed",)])
    def test_oversized_removal_empties_a_static_layer(self, name):
        """Removing more tokens than a static layer holds empties it (its counters moving in place)."""
        layer = CLAMP_LAYERS[name]()
        layer.update(_tokens(0, 3), _tokens(0, 3))
        if name == "static_indexed":
            layer.update_indexer(_tokens(0, 3).view(1, 3, 1))
        cumulative_length = layer.cumulative_length
        layer.crop(-4)
        self.assertIs(layer.cumulative_length, cumulative_length)
        keys, _ = layer.update(_tokens(10, 2), _tokens(10, 2))
        self.assertEqual(keys[0, 0, :2, 0].tolist(), [11.0, 12.0])
        if name == "static_indexed":
            self.assertEqual(layer.update_indexer(_tokens(10, 2).view(1, 2, 1))[0, :2, 0].tolist(), [11.0, 12.0])

    def test_oversized_removal_empties_a_recording_sliding_window(self):
        """A full window that records its past (an assistant's cache) counts every token: its count stops at 0."""
        layer = DynamicSlidingWindowLayer(sliding_window=4)
        layer.activate_past_recording()
        layer.update(_tokens(0, 6), _tokens(0, 6))
        layer.crop(0)
        layer.update(_tokens(6, 2), _tokens(6, 2))
        layer.crop(-20)
        keys, _ = layer.update(_tokens(10, 2), _tokens(10, 2))
        self.assertEqual((layer.get_seq_length(), keys[0, 0, :, 0].tolist()), (2, [11.0, 12.0]))


@require_torch
class CropEdgesTest(unittest.TestCase):
    @parameterized.expand([(name, removal) for name in CLAMP_LAYERS for removal in (-1, -4)])
    def test_removal_is_clamped_to_what_the_layer_holds(self, name, removal):
        _assert_crop_is_clamped(self, name, removal)

    @parameterized.expand(list(CLAMP_LAYERS))
    def test_removal_beyond_64_bits_empties_the_layer(self, name):
        _assert_crop_is_clamped(self, name, -(2**70))

    @parameterized.expand([(name, removal) for name in CLAMP_LAYERS for removal in (-1, -4)])
    def test_layer_without_tokens_yet_stays_empty(self, name, removal):
        """As `early_initialization` leaves a layer (`torch.export` uses it): initialized, but without any token."""
        layer = CLAMP_LAYERS[name]()
        no_tokens = torch.zeros(1, 1, 0, 1, dtype=torch.float64)
        layer.lazy_initialization(no_tokens, no_tokens)
        layer.crop(removal)
        self.assertEqual(int(layer.get_seq_length()), 0)
        keys, _ = layer.update(_tokens(10, 2), _tokens(10, 2))
        self.assertEqual(keys[0, 0, :2, 0].tolist(), [11.0, 12.0])

    @parameterized.expand([(-1,), (-4,), (-(2**70),)])
    def test_cache_crops_the_layers_after_one_without_tokens_yet(self, removal):
        cache = DynamicCache(config=LlamaConfig(num_hidden_layers=2, hidden_size=8, num_attention_heads=1, head_dim=8))
        cache.early_initialization(1, 1, 1, torch.float64, torch.device("cpu"))
        cache.update(_tokens(0, 3), _tokens(0, 3), 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.crop(removal)
        self.assertEqual(cache.layers[0].get_seq_length(), 0)
        self.assertEqual(cache.layers[1].keys[0, 0, :, 0].tolist(), [1.0, 2.0, 3.0][: max(3 + removal, 0)])


def _recording_layer(recurrent_states_to_keep, **kwargs):
    layer = LinearAttentionLayer(**kwargs)
    layer.activate_past_recording(recurrent_states_to_keep=recurrent_states_to_keep)
    return layer


def _forward(layer, start, length, recurrent_states_to_keep, state_idx=0, offset=0.0):
    """What a model does in a forward of `length` tokens: conv states, then the states after its last tokens (the state
    after token `p` is `p + 1 + offset`)."""
    layer.update_conv_state(_tokens(start, length).view(1, 1, length), state_idx=state_idx, conv_kernel_size=2)
    kept = min(recurrent_states_to_keep, length)
    states = [torch.full((1, 1), start + p + 1 + offset, dtype=torch.float64) for p in range(length - kept, length)]
    layer.update_recurrent_state(states if kept > 1 else states[-1], state_idx=state_idx)


HYBRID_LAYERS = {
    "linear": lambda: LinearAttentionLayer(),
    "full": lambda: LinearAttentionAndFullAttentionLayer(),
    "sliding": lambda: LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=8),
    "static": lambda: LinearAttentionAndStaticFullAttentionLayer(max_cache_len=8),
    "static_sliding": lambda: LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=8, sliding_window=8),
}


def _hybrid_forward(layer, start, length, recurrent_states_to_keep):
    """A forward of a hybrid model's layer: its attention part (if any) sees the tokens too."""
    if isinstance(layer, CacheLayerMixin):
        layer.update(_tokens(start, length), _tokens(start, length))
    if isinstance(layer, LinearAttentionLayer):
        _forward(layer, start, length, recurrent_states_to_keep)


def _decode_step(layer, states, count_in_place):
    """A decode step of a model's layer (`states` of one token): conv states updated through the cache, or in place
    and counted with `increase_count`, then the recurrent state."""
    if isinstance(layer, CacheLayerMixin):
        layer.update(states, states)
    if count_in_place:
        layer.conv_states[0].copy_(states.view(1, 1, 1).expand_as(layer.conv_states[0]))
        layer.increase_count(0)
    else:
        layer.update_conv_state(states.view(1, 1, 1))
    layer.update_recurrent_state(states.view(1, 1))


def _kept_cache(layers, kept, recurrent_states_to_keep):
    """Layers that only saw the `kept` tokens, in one prefill, as `generate` leaves them (`crop(0)`)."""
    cache = Cache(layers=layers)
    cache.activate_past_recording(recurrent_states_to_keep=recurrent_states_to_keep)
    if kept:
        for layer in layers:
            _hybrid_forward(layer, 0, kept, recurrent_states_to_keep)
        cache.crop(0)
    return cache


@require_torch
class StaticLayerHotPathTest(unittest.TestCase):
    @parameterized.expand([(name,) for name in STATIC_LAYERS])
    def test_static_layer_updates_and_crops_without_host_sync(self, name):
        """A static layer never reads its counters on the host (a device sync), removing every token included."""
        layer = CLAMP_LAYERS[name]()

        def forwards_and_crops():
            _update_static_layer(layer, _tokens(0, 3))
            for removal in (0, -1, -100):
                layer.crop(removal)
            _update_static_layer(layer, _tokens(0, 2))

        self.assertEqual(_host_syncs(forwards_and_crops), 0)
        self.assertEqual(int(layer.get_seq_length()), 2)

    @parameterized.expand([("static",), ("static_indexed",)])
    def test_compiled_update_and_crop_of_a_static_layer_compile_once(self, name):
        """The static counters are tensors at static addresses: compiled updates and crops are never recompiled."""
        layer = CLAMP_LAYERS[name]()
        _update_static_layer(layer, _tokens(0, 3))
        counters = {
            attribute: (getattr(layer, attribute), getattr(layer, attribute).data_ptr())
            for attribute in ("cumulative_length", "indexer_cumulative_length")
            if hasattr(layer, attribute)
        }
        compiled, frames = _compiled(_update_and_crop)
        for start in (3, 4, 5):
            compiled(layer, _tokens(start, 2))
        self.assertEqual(layer.keys[0, 0, :6, 0].tolist(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        layer.crop(-100)
        compiled(layer, _tokens(0, 2))
        self.assertEqual((frames.frame_count, int(layer.get_seq_length())), (1, 1))
        for attribute, (counter, address) in counters.items():
            self.assertIs(getattr(layer, attribute), counter)
            self.assertEqual(counter.data_ptr(), address)

    @parameterized.expand([(name,) for name in STATIC_LAYERS])
    def test_crop_0_of_a_static_layer_dispatches_no_op(self, name):
        """`generate` calls `crop(0)` after every forward: a static layer launches no kernel for it."""
        layer = _static_layer_of_3_tokens(name)
        self.assertEqual(_dispatched_ops(lambda: layer.crop(0)), [])
        self.assertEqual(int(layer.get_seq_length()), 3)

    @parameterized.expand([(name, removal) for name in STATIC_LAYERS for removal in (-2, -5)])
    def test_static_crop_only_moves_its_counters(self, name, removal):
        """A static crop moves its counters in place (`sub_`, `clamp_`, or a sliding window's `fill_`) and writes no key,
        value or indexer slot."""
        layer = _static_layer_of_3_tokens(name)
        tensors = {attribute: getattr(layer, attribute, None) for attribute in STATIC_TENSORS}
        versions = {attribute: tensor._version for attribute, tensor in tensors.items() if tensor is not None}
        kernels = {op.overloadpacket.__name__ for op in _dispatched_ops(lambda: layer.crop(removal)) if not op.is_view}
        self.assertLessEqual(kernels, {"sub_", "clamp_", "fill_"})
        for attribute, tensor in tensors.items():
            self.assertIs(getattr(layer, attribute, None), tensor)
            if "cumulative_length" not in attribute and tensor is not None:
                self.assertEqual(tensor._version, versions[attribute], f"`crop` wrote `{attribute}`")
        self.assertEqual(int(layer.get_seq_length()), max(3 + removal, 0))


@require_torch
class LinearAttentionHistoryTest(unittest.TestCase):
    def test_recording_again_keeps_the_recorded_states(self):
        """The candidate generators record before every round: the states of the round before are still needed."""
        layer = _recording_layer(3)
        _forward(layer, 0, 3, 3)
        layer.activate_past_recording(recurrent_states_to_keep=3)
        layer.crop(-2)
        self.assertEqual(layer.recurrent_states[0].item(), 1.0)

    def test_reset_empties_the_history(self):
        layer = _recording_layer(3)
        _forward(layer, 0, 4, 3)
        layer.reset()
        self.assertEqual(layer.recurrent_states_history, {0: []})

    def assertSameLayer(self, layer, expected):
        length = int(expected.get_seq_length())
        self.assertEqual(int(layer.get_seq_length()), length)
        if isinstance(layer, CacheLayerMixin) and length:
            self.assertTrue(torch.equal(layer.keys[..., :length, :], expected.keys[..., :length, :]))
            self.assertTrue(torch.equal(layer.values[..., :length, :], expected.values[..., :length, :]))
        if isinstance(layer, LinearAttentionLayer):
            self.assertEqual(int(layer.cumulative_length_linear), int(expected.cumulative_length_linear))
            self.assertEqual(layer.has_previous_state, expected.has_previous_state)
            if expected.has_previous_state[0]:
                self.assertTrue(torch.equal(layer.conv_states[0], expected.conv_states[0]))
                self.assertTrue(torch.equal(layer.recurrent_states[0], expected.recurrent_states[0]))

    @parameterized.expand(
        [(name, crops) for name in HYBRID_LAYERS for crops in ((-1,), (-2,), (-3,), (-7,), (-100,), (-7, 0), (-7, -1))]
    )
    def test_hybrid_crop_of_several_tokens_is_the_layer_of_the_kept_tokens(self, name, crops):
        # A prefill of 4 tokens, then a verification of 3 (2 drafts) recording 3 states; the first crop through the cache
        # (a full rollback removes at least the 7 tokens), the next ones on the layer itself
        layer = HYBRID_LAYERS[name]()
        cache = Cache(layers=[layer])
        cache.activate_past_recording(recurrent_states_to_keep=3)
        _hybrid_forward(layer, 0, 4, 3)
        _hybrid_forward(layer, 4, 3, 3)
        # The static counters are static addresses: a crop moves them in place
        counters = {
            attribute: (counter, counter.data_ptr())
            for attribute in ("cumulative_length", "cumulative_length_linear")
            if isinstance(counter := getattr(layer, attribute, None), torch.Tensor)
        }
        cache.crop(crops[0])
        for removal in crops[1:]:
            layer.crop(removal)
        kept = max(7 + crops[0], 0)
        expected = _kept_cache([HYBRID_LAYERS[name]()], kept, 3).layers[0]
        self.assertSameLayer(layer, expected)
        # The next forward continues the kept tokens (a new sequence after a full rollback)
        _hybrid_forward(layer, kept, 2, 3)
        _hybrid_forward(expected, kept, 2, 3)
        self.assertSameLayer(layer, expected)
        for attribute, (counter, address) in counters.items():
            self.assertIs(getattr(layer, attribute), counter)
            self.assertEqual(counter.data_ptr(), address)

    @parameterized.expand(
        [
            ("verification", (4, 3), 3, (1, 2, 3, 7, 100)),
            ("several_forwards", (4, 1, 2), 3, (1, 3, 7)),
            ("decoding", (3, 1, 1, 1), 4, (2, 4, 6)),
            ("kv_sharing", (4, 3), 3, (2, 7)),
        ]
    )
    def test_qwen3_next_like_cache_is_the_cache_of_the_kept_tokens(
        self, layout, forwards, recurrent_states_to_keep, removals
    ):
        # Qwen3-Next's layout: a linear attention layer first, then attention layers (the third one is never updated
        # with KV sharing: the linear layer follows its own tokens, not the shortest layer)
        config = Qwen3NextConfig(
            num_hidden_layers=4, layer_types=["linear_attention"] + ["full_attention"] * 3, head_dim=16
        )
        for removed in removals:
            cache = DynamicCache(config=config)
            updated = [0, 1, 3] if layout == "kv_sharing" else [0, 1, 2, 3]
            cache.activate_past_recording(recurrent_states_to_keep=recurrent_states_to_keep)
            start = 0
            for length in forwards:
                for layer_idx in updated:
                    _hybrid_forward(cache.layers[layer_idx], start, length, recurrent_states_to_keep)
                start += length
            cache.crop(-removed)
            kept = max(start - removed, 0)
            expected = _kept_cache(DynamicCache(config=config).layers, kept, recurrent_states_to_keep)
            for layer_idx in updated:
                with self.subTest(removed=removed, layer_idx=layer_idx):
                    self.assertSameLayer(cache.layers[layer_idx], expected.layers[layer_idx])
            self.assertEqual(cache.get_seq_length(), kept)

    @parameterized.expand([(removed,) for removed in (1, 2, 3)])
    def test_crop_restores_the_state_after_the_kept_tokens(self, removed):
        # Assisted decoding: 2 drafts, a verification forward of 3 tokens after a prefill of 4
        layer = _recording_layer(3)
        _forward(layer, 0, 4, 3)
        _forward(layer, 4, 3, 3)
        address = layer.recurrent_states[0].data_ptr()
        layer.crop(-removed)
        self.assertEqual(layer.recurrent_states[0].item(), 7 - removed)
        self.assertEqual(layer.recurrent_states[0].data_ptr(), address)
        self.assertEqual(int(layer.get_seq_length()), 7 - removed)
        self.assertEqual(layer.conv_states[0][0, 0].tolist(), [6.0 - removed, 7.0 - removed])

    def test_forward_after_a_partial_crop_counts_its_tokens_from_the_kept_ones(self):
        # After a partial crop, a forward of 4 tokens with 3 per-token states: the state from before it is not a
        # rollback point (the token after it has no state), whatever the layer held before the crop
        layer = _recording_layer(3)
        _forward(layer, 0, 4, 3)
        _forward(layer, 4, 3, 3)
        layer.crop(-1)
        _forward(layer, 6, 4, 3)
        with self.assertRaisesRegex(ValueError, "Cannot remove 3 of the 10 tokens"):
            layer.crop(-3)
        self.assertEqual((int(layer.get_seq_length()), layer.recurrent_states[0].item()), (10, 10.0))
        layer.crop(-2)
        self.assertEqual((int(layer.get_seq_length()), layer.recurrent_states[0].item()), (8, 8.0))
        # and the host count followed both crops: removing the 8 tokens left is a full rollback
        layer.crop(-8)
        self.assertEqual((int(layer.get_seq_length()), layer.has_previous_state[0]), (0, False))

    @parameterized.expand([(states, prefill) for states in ("conv", "recurrent") for prefill in (3, 4)])
    def test_after_crop_0_only_the_tokens_of_the_next_forward_can_be_removed(self, states, prefill):
        # `generate` calls `crop(0)` after the prefill: the conv states keep `conv_kernel_size` columns, so a verification
        # of `prefill - 1` tokens can remove those tokens, not one more (with or without recurrent states)
        layer = _recording_layer(3)

        def forward(start, length):
            if states == "conv":
                layer.update_conv_state(_tokens(start, length).view(1, 1, length), conv_kernel_size=2)
            else:
                _forward(layer, start, length, 3)

        forward(0, prefill)
        layer.crop(0)
        forward(prefill, prefill - 1)
        total = 2 * prefill - 1
        with self.assertRaisesRegex(ValueError, f"Cannot remove {prefill} of the {total} tokens.*conv states"):
            layer.crop(-prefill)
        self.assertEqual(layer.conv_states[0].shape[-1], prefill + 1)
        layer.crop(-(prefill - 1))
        self.assertEqual(layer.conv_states[0][0, 0].tolist(), [prefill - 1.0, prefill])
        self.assertEqual(int(layer.get_seq_length()), prefill)
        if states == "recurrent":
            self.assertEqual(layer.recurrent_states[0].item(), prefill)

    def test_tokens_counted_by_increase_count_are_cropped(self):
        # Without recording, models that update the conv states in place (one-token decoding) count the token with
        # `increase_count`: a partial crop is then refused, and removing every token is a full rollback
        layer = LinearAttentionLayer()
        _forward(layer, 0, 3, 1)
        counter, address = layer.cumulative_length_linear, layer.cumulative_length_linear.data_ptr()
        for _ in range(2):
            layer.increase_count(0)
            layer.update_recurrent_state(torch.ones(1, 1, dtype=torch.float64))
        self.assertEqual(int(layer.get_seq_length()), 5)
        self.assertIs(layer.cumulative_length_linear, counter)
        self.assertEqual(counter.data_ptr(), address)
        with self.assertRaisesRegex(ValueError, "Cannot remove 3 of the 5 tokens"):
            layer.crop(-3)
        layer.crop(-5)
        self.assertEqual((int(layer.get_seq_length()), layer.has_previous_state[0]), (0, False))

    @parameterized.expand([((3, 1), 3), ((2,), 1)])
    def test_crop_into_the_first_kernel_columns_pads_the_conv_states(self, forwards, removed):
        # Every token is still in the recorded conv states: keeping 1 token leaves 1 column, padded to the kernel size
        # with the zeros the conv sees before the first token (also when the conv states are exactly the kernel size)
        layer = _recording_layer(3)
        start = 0
        for length in forwards:
            _forward(layer, start, length, 3)
            start += length
        layer.crop(-removed)
        self.assertEqual(layer.conv_states[0][0, 0].tolist(), [0.0, 1.0])
        self.assertEqual((int(layer.get_seq_length()), layer.recurrent_states[0].item()), (1, 1.0))

    def test_recorded_conv_states_hold_the_zeros_before_a_short_prefill(self):
        # A prefill shorter than the kernel: the next forward sees the zeros before the first token, as without recording
        # (a batch of 2 and 2 channels, as many as the kernel size, so that only the last dimension has the prefill's width)
        layer = _recording_layer(3)
        layer.update_conv_state(_tokens(0, 4).view(2, 2, 1), conv_kernel_size=2)
        full_conv_states = layer.update_conv_state(_tokens(4, 4).view(2, 2, 1))
        self.assertEqual(full_conv_states[1, 1].tolist(), [0.0, 4.0, 8.0])
        # `crop(0)` restricts them to the kernel size (their last dimension)
        layer.crop(0)
        self.assertEqual(layer.conv_states[0][1, 1].tolist(), [4.0, 8.0])

    def test_a_crop_forgets_the_states_it_did_not_restore(self):
        # Two tokens left, both in the conv states: only the recurrent history limits a second crop, and it is empty
        layer = _recording_layer(3)
        _forward(layer, 0, 1, 3)
        _forward(layer, 1, 2, 3)
        layer.crop(-1)
        with self.assertRaisesRegex(ValueError, "recurrent states \\(state 0\\) can only be rolled back by 0 token"):
            layer.crop(-1)
        self.assertEqual((int(layer.get_seq_length()), layer.recurrent_states[0].item()), (2, 2.0))

    @parameterized.expand([("fresh",), ("reset",)])
    def test_first_forward_longer_than_the_states_kept_refuses_what_it_cannot_restore(self, history):
        # 3 tokens, 2 per-token states: the state before the first token is not a rollback point, also after a reset
        layer = _recording_layer(2)
        if history == "reset":
            _forward(layer, 0, 1, 2)
            layer.reset()
        _forward(layer, 20, 3, 2)
        with self.assertRaisesRegex(ValueError, "Cannot remove 2 of the 3 tokens"):
            layer.crop(-2)
        layer.crop(-1)
        self.assertEqual(layer.recurrent_states[0].item(), 22.0)

    def test_state_written_in_place_during_a_forward_is_a_rollback_point(self):
        """Mamba-1 mixers update the cached state in place in a forward that continues the cache: the conv update that
        opens the forward copied the state from before it, so the whole forward can be removed."""
        layer = _recording_layer(3)
        _forward(layer, 0, 3, 3)
        layer.update_conv_state(_tokens(3, 3).view(1, 1, 3), conv_kernel_size=2)
        layer.recurrent_states[0].add_(1.0)  # the model's in-place update, before it hands its states over
        layer.update_recurrent_state([torch.full((1, 1), p + 1.0, dtype=torch.float64) for p in (3, 4, 5)])
        layer.crop(-3)
        self.assertEqual((layer.recurrent_states[0].item(), int(layer.get_seq_length())), (3.0, 3))

    def test_forward_longer_than_the_states_kept_copies_no_state(self):
        """The state from before a forward of more than `recurrent_states_to_keep` tokens is no rollback point: its conv
        update copies nothing (a recording forward copies the state once, only when it may be restored)."""
        layer = _recording_layer(2)
        _forward(layer, 0, 3, 2)
        ops = _dispatched_ops(lambda: layer.update_conv_state(_tokens(3, 3).view(1, 1, 3), conv_kernel_size=2))
        self.assertNotIn(torch.ops.aten.clone.default, ops)

    def test_reorder_cache_reorders_the_history(self):
        # Beam search: the states to restore follow their beam
        layer = _recording_layer(3)
        layer.update_conv_state(torch.zeros(2, 1, 1), conv_kernel_size=2)
        layer.update_recurrent_state(torch.tensor([[1.0], [101.0]]))
        layer.update_conv_state(torch.zeros(2, 1, 2))
        layer.update_recurrent_state([torch.tensor([[2.0], [102.0]]), torch.tensor([[3.0], [103.0]])])
        layer.reorder_cache(torch.tensor([1, 0]))
        layer.crop(-1)
        self.assertEqual(layer.recurrent_states[0][:, 0].tolist(), [102.0, 2.0])

    def test_forward_longer_than_the_states_kept_refuses_what_it_cannot_restore(self):
        # 3 tokens, 2 per-token states: the state before the forward is not the one after its first token
        layer = _recording_layer(2)
        _forward(layer, 0, 4, 2)
        _forward(layer, 4, 3, 2)
        with self.assertRaisesRegex(ValueError, "Cannot remove 2 of the 7 tokens of a `LinearAttentionLayer`"):
            layer.crop(-2)
        self.assertEqual((layer.recurrent_states[0].item(), int(layer.get_seq_length())), (7.0, 7))
        layer.crop(-1)
        self.assertEqual(layer.recurrent_states[0].item(), 6.0)

    @parameterized.expand([(2,), (1,)])
    def test_each_state_has_its_own_history(self, updated_states):
        # A state the model never updates (1 of 2) stays empty through partial and full rollbacks
        layer = _recording_layer(3, number_of_states=2)
        for start, length in ((0, 4), (4, 3)):
            for i in range(updated_states):
                _forward(layer, start, length, 3, state_idx=i, offset=100.0 * i)
        layer.crop(-2)
        self.assertEqual(
            [layer.recurrent_states[i].item() for i in range(updated_states)], [5.0, 105.0][:updated_states]
        )
        layer.crop(-5)
        for i in range(updated_states):
            self.assertEqual((layer.conv_states[i].abs().sum().item(), layer.recurrent_states[i].item()), (0.0, 0.0))
        self.assertEqual(layer.conv_states[1] is None, updated_states == 1)

    @parameterized.expand([(4, -(2**70)), (1, -1)])
    def test_removing_every_token_or_more_resets_the_layer(self, length, removal):
        layer = _recording_layer(3)
        _forward(layer, 0, length, 3)
        layer.crop(removal)
        self.assertEqual((int(layer.get_seq_length()), layer.recurrent_states[0].item()), (0, 0.0))
        self.assertFalse(layer.has_previous_state[0])
        _forward(layer, 0, 2, 3)
        self.assertEqual(layer.conv_states[0][0, 0].tolist(), [1.0, 2.0])

    def test_a_second_crop_refuses_before_changing_anything(self):
        layer = _recording_layer(3)
        _forward(layer, 0, 4, 3)
        _forward(layer, 4, 3, 3)
        layer.crop(0)
        with self.assertRaisesRegex(ValueError, "can only be rolled back by 0 token"):
            layer.crop(-1)
        self.assertEqual((int(layer.get_seq_length()), layer.recurrent_states[0].item()), (7, 7.0))
        self.assertEqual(layer.conv_states[0].shape[-1], 2)

    def test_reset_forgets_the_previous_sequence(self):
        layer = _recording_layer(3)
        _forward(layer, 0, 4, 3)
        layer.reset()
        _forward(layer, 20, 2, 3)
        layer.crop(-1)
        self.assertEqual(layer.recurrent_states[0].item(), 21.0)

    def test_history_is_bounded(self):
        layer = _recording_layer(3)
        for start in range(10):
            _forward(layer, start, 1, 3)
        self.assertEqual(len(layer.recurrent_states_history[0]), 3)
        # also when a forward hands over several states
        layer = _recording_layer(3)
        for start, length in ((0, 4), (4, 3), (7, 3)):
            _forward(layer, start, length, 3)
        self.assertEqual(len(layer.recurrent_states_history[0]), 3)
        layer = LinearAttentionLayer()
        layer.activate_past_recording()
        self.assertEqual(layer.recurrent_states_to_keep, 1)

    def test_hybrid_layers_crop_both_parts_or_neither(self):
        for layer in (LinearAttentionAndFullAttentionLayer(), LinearAttentionAndStaticFullAttentionLayer(8)):
            layer.activate_past_recording(recurrent_states_to_keep=3)
            layer.update(_tokens(0, 5), _tokens(0, 5))
            _forward(layer, 0, 5, 3)
            with self.assertRaises(ValueError):
                layer.crop(-4)
            self.assertEqual(int(layer.get_seq_length()), 5)
            layer.crop(-2)
            self.assertEqual((int(layer.get_seq_length()), layer.recurrent_states[0].item()), (3, 3.0))
        # A cache checks its linear attention layers before cropping any layer
        cache = Cache(layers=[DynamicLayer(), _recording_layer(3)])
        cache.layers[0].update(_tokens(0, 5), _tokens(0, 5))
        _forward(cache.layers[1], 0, 5, 3)
        with self.assertRaises(ValueError):
            cache.crop(-4)
        self.assertEqual([int(layer.get_seq_length()) for layer in cache.layers], [5, 5])
        # A static sliding window that wrapped around without room for the tokens to remove cannot bring back the states
        # it overwrote (its window of 4 holds the 3 tokens before the last one: 1 can be removed)
        layer = LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=8, sliding_window=4)
        for position in range(6):
            layer.update(_tokens(position, 1), _tokens(position, 1))
        self.assertFalse(layer.is_croppable)
        with self.assertRaisesRegex(ValueError, "overwr"):
            layer.crop(-2)

    @parameterized.expand([(name, record) for name in HYBRID_LAYERS for record in (False, True)])
    def test_crop_0_after_a_forward_launches_no_kernel(self, name, record):
        """`generate` calls `crop(0)` after every forward: it dispatches no op, or only views of recorded conv states."""
        layer = HYBRID_LAYERS[name]()
        if record:
            layer.activate_past_recording(recurrent_states_to_keep=3)
        _hybrid_forward(layer, 0, 4, 3)
        ops = _dispatched_ops(lambda: layer.crop(0))
        self.assertEqual([op for op in ops if not (record and op.is_view)], [])
        self.assertEqual(_dispatched_ops(lambda: layer.crop(0)), [])
        self.assertEqual(int(layer.get_seq_length()), 4)

    @parameterized.expand([(name, record) for name in HYBRID_LAYERS for record in (False, True)])
    def test_forwards_and_crops_make_no_host_sync(self, name, record):
        """A layer never reads its length on the device (a host sync) to update or crop: it counts on the host while
        recording, and keeps the device length at its static address."""
        layer = HYBRID_LAYERS[name]()
        if record:
            layer.activate_past_recording(recurrent_states_to_keep=3)
        counter = layer.cumulative_length_linear

        def forwards_and_crops():
            _hybrid_forward(layer, 0, 4, 3)
            layer.crop(0)
            _hybrid_forward(layer, 4, 3, 3)
            for removal in (-1, -100) if record else (0,):
                layer.crop(removal)

        self.assertEqual(_host_syncs(forwards_and_crops), 0)
        self.assertIs(layer.cumulative_length_linear, counter)
        self.assertEqual(int(layer.get_seq_length()), 0 if record else 7)

    @parameterized.expand([(name, in_place) for name in ("linear", "static") for in_place in (False, True)])
    def test_compiled_decode_step_without_recording_compiles_once(self, name, in_place):
        """Without recording, no host count moves: a compiled decode step is never recompiled (dynamo guards on them)."""
        layer = HYBRID_LAYERS[name]()
        _hybrid_forward(layer, 0, 4, 1)
        address = layer.cumulative_length_linear.data_ptr()
        compiled, frames = _compiled(_decode_step)
        for position in range(4, 8):
            compiled(layer, _tokens(position, 1), in_place)
        self.assertEqual((frames.frame_count, int(layer.get_seq_length())), (1, 8))
        self.assertEqual((layer.recurrent_states[0].item(), layer.cumulative_length_linear.data_ptr()), (8.0, address))

    def test_recording_forward_compiles_in_one_graph(self):
        """A recording forward compiles in one graph: its copy of the state from before it included."""
        layer = _recording_layer(3)
        _forward(layer, 0, 4, 3)
        layer.crop(0)
        compiled, frames = _compiled(_forward)
        compiled(layer, 4, 3, 3)
        layer.crop(-3)
        self.assertEqual((frames.frame_count, layer.recurrent_states[0].item()), (1, 4.0))

    @parameterized.expand([(1,), (2,), (3,)])
    def test_recording_under_inference_mode_rolls_back(self, removed):
        """A layer recording under `torch.inference_mode()` (inference tensors) rolls back as under `no_grad`."""
        with torch.inference_mode():
            layer = _recording_layer(3)
            _forward(layer, 0, 4, 3)
            layer.crop(0)
            _forward(layer, 4, 3, 3)
            layer.crop(-removed)
        self.assertTrue(torch.is_inference(layer.recurrent_states[0]))
        self.assertEqual((layer.recurrent_states[0].item(), int(layer.get_seq_length())), (7 - removed, 7 - removed))

    def test_state_written_in_place_under_inference_mode_is_no_rollback_point(self):
        """A model that writes its cached state in place (Mamba-1's per-token path) under `torch.inference_mode()`: the
        state from before the forward is the one restored, not the overwritten one."""
        with torch.inference_mode():
            layer = _recording_layer(3)
            _forward(layer, 0, 3, 3)
            layer.crop(0)
            layer.update_conv_state(_tokens(3, 3).view(1, 1, 3))
            layer.recurrent_states[0].add_(1.0)  # the forward's first token, written in place
            layer.update_recurrent_state([torch.full((1, 1), p + 1.0, dtype=torch.float64) for p in (3, 4, 5)])
            layer.crop(-3)
        self.assertEqual((layer.recurrent_states[0].item(), int(layer.get_seq_length())), (3.0, 3))


@require_torch
class RecurrentStatesHistoryTest(unittest.TestCase):
    def test_each_state_has_its_own_history(self):
        layer = _recording_layer(3, number_of_states=2)
        _forward(layer, 0, 3, 3, state_idx=0)
        _forward(layer, 0, 3, 3, state_idx=1, offset=100.0)
        layer.crop(-1)
        self.assertEqual([layer.recurrent_states[i].item() for i in range(2)], [2.0, 102.0])


def _recording_static_hybrid_layer_of_3_tokens(kind):
    if kind == "full":
        layer = LinearAttentionAndStaticFullAttentionLayer(max_cache_len=8)
    else:
        layer = LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=8, sliding_window=8)
    layer.activate_past_recording(recurrent_states_to_keep=3)
    layer.update(_tokens(0, 3), _tokens(0, 3))
    _forward(layer, 0, 3, 3)
    return layer


@require_torch
class StaticHybridLayerCropTest(unittest.TestCase):
    @parameterized.expand([("full",), ("sliding",)])
    def test_attention_part_forgets_the_removed_tokens(self, kind):
        """A static hybrid layer crops its attention part too: the next tokens are stored after the kept ones."""
        layer = _recording_static_hybrid_layer_of_3_tokens(kind)
        layer.crop(-1)
        keys, _ = layer.update(_tokens(10, 1), _tokens(10, 1))
        self.assertEqual(keys[0, 0, :3, 0].tolist(), [1.0, 2.0, 11.0])
        self.assertEqual(layer.recurrent_states[0].item(), 2.0)

    @parameterized.expand([("full",), ("sliding",)])
    def test_attention_part_crops_in_place_without_writing_a_slot(self, kind):
        """The attention part of a static hybrid layer crops as a static layer: its counter moves in place, no slot is
        written (the next tokens overwrite the freed ones)."""
        layer = _recording_static_hybrid_layer_of_3_tokens(kind)
        tensors = {attribute: getattr(layer, attribute) for attribute in ("keys", "values", "cumulative_length")}
        versions = {attribute: tensor._version for attribute, tensor in tensors.items()}
        layer.crop(-2)
        for attribute, tensor in tensors.items():
            self.assertIs(getattr(layer, attribute), tensor)
        for attribute in ("keys", "values"):
            self.assertEqual(tensors[attribute]._version, versions[attribute], f"`crop` wrote `{attribute}`")
        self.assertEqual(int(layer.get_seq_length()), 1)

    def test_sliding_hybrid_layer_reports_whether_its_window_can_be_cropped(self):
        """A window shorter than `max_cache_len` may overwrite the states to restore: the hybrid layer says so, as a
        `StaticSlidingWindowLayer` does, so that `generate` refuses assisted decoding instead of cropping it."""
        layer_class = LinearAttentionAndStaticSlidingWindowAttentionLayer
        self.assertFalse(layer_class(max_cache_len=8, sliding_window=4).is_croppable)
        self.assertTrue(layer_class(max_cache_len=4, sliding_window=4).is_croppable)


def _next_token_window(layer, position):
    """Feeds token `position` to a sliding window layer: the values its attention sees, by position (the slots the mask
    keeps)."""
    kv_length, kv_offset = layer.get_mask_sizes(1)
    keys, _ = layer.update(_tokens(position, 1), _tokens(position, 1))
    window = range(position - layer.sliding_window + 1, position + 1)
    return {kv_offset + slot: keys[0, 0, slot, 0].item() for slot in range(kv_length) if kv_offset + slot in window}


def _window_of(position, sliding_window=4):
    return {p: p + 1.0 for p in range(max(position - sliding_window + 1, 0), position + 1)}


@require_torch
class StaticSlidingWindowRollbackTest(unittest.TestCase):
    def test_recording_makes_room_for_the_tokens_to_remove(self):
        """Room for 3 tokens to remove: 2 slots more than the window (the window's own last slot is not needed)."""
        layer = StaticSlidingWindowLayer(max_cache_len=32, sliding_window=4)
        self.assertFalse(layer.is_croppable)
        layer.activate_past_recording(recurrent_states_to_keep=3)
        self.assertEqual((layer.max_cache_len, layer.is_croppable), (6, True))
        # At most `max_cache_len`
        layer = StaticSlidingWindowLayer(max_cache_len=5, sliding_window=4)
        layer.activate_past_recording(recurrent_states_to_keep=3)
        self.assertEqual(layer.max_cache_len, 5)

    @parameterized.expand([(removal, chunk) for removal in (1, 2, 3) for chunk in (1, 4)])
    def test_crop_restores_the_window_of_the_kept_tokens(self, removal, chunk):
        """Past the window, tokens added `chunk` at a time (4: drafts verified together): after each rollback, the next
        token sees exactly the kept tokens of its window."""
        layer = StaticSlidingWindowLayer(max_cache_len=32, sliding_window=4)
        layer.activate_past_recording(recurrent_states_to_keep=3)
        layer.update(_tokens(0, 9), _tokens(0, 9))
        length = 9
        for _ in range(3):
            for position in range(length, length + 4, chunk):
                layer.update(_tokens(position, chunk), _tokens(position, chunk))
            layer.crop(-removal)
            length += 4 - removal
            self.assertEqual(layer.get_seq_length(), length)
            self.assertEqual(_next_token_window(layer, length), _window_of(length))
            length += 1

    def test_room_made_once_the_window_wrapped_keeps_the_stored_tokens(self):
        """A cache that already holds tokens (a second turn) moves them to its larger states."""
        layer = StaticSlidingWindowLayer(max_cache_len=32, sliding_window=4)
        layer.update(_tokens(0, 9), _tokens(0, 9))
        layer.activate_past_recording(recurrent_states_to_keep=3)
        layer.update(_tokens(9, 4), _tokens(9, 4))
        layer.crop(-3)
        self.assertEqual(_next_token_window(layer, 10), _window_of(10))

    def test_crop_beyond_the_room_raises_before_anything_changes(self):
        """Room for 2 tokens: removing 3 would need a token whose states were overwritten."""
        layer = StaticSlidingWindowLayer(max_cache_len=32, sliding_window=4)
        layer.activate_past_recording(recurrent_states_to_keep=2)
        layer.update(_tokens(0, 9), _tokens(0, 9))
        keys = layer.keys.clone()
        with self.assertRaisesRegex(ValueError, "Cannot remove 3 of the 9 tokens"):
            layer.crop(-3)
        self.assertEqual(layer.get_seq_length(), 9)
        self.assertTrue(torch.equal(layer.keys, keys))
        layer.crop(-9)
        self.assertEqual(_next_token_window(layer, 0), _window_of(0))


@require_torch
class StaticIndexedLayerPositionsCropTest(unittest.TestCase):
    def test_indexer_positions_follow_the_kept_tokens(self):
        """Qwen4-Exp keeps the (3-D) positions of the cached tokens in `indexer_position_ids`."""
        layer = StaticIndexedLayer(max_cache_len=8)
        layer.update(_tokens(0, 3), _tokens(0, 3))
        layer.indexer_position_ids = torch.arange(3).expand(3, 1, 3)  # as the model sets them
        layer.crop(-1)
        self.assertEqual(layer.indexer_position_ids.tolist(), [[[0, 1]]] * 3)
        layer.crop(-5)
        self.assertEqual(layer.indexer_position_ids.shape, (3, 1, 0))


def _full_recording_window():
    """A sliding window of 4 that recorded 6 tokens, then `crop(0)` as `generate` does: it holds the last 3."""
    layer = DynamicSlidingWindowLayer(sliding_window=4)
    layer.activate_past_recording()
    layer.update(_tokens(0, 6), _tokens(0, 6))
    layer.crop(0)
    return layer


@require_torch
class RefusedCropTest(unittest.TestCase):
    def assertRefusedUnchanged(self, cache, removal):
        before = [(int(layer.get_seq_length()), layer.keys.clone()) for layer in cache.layers]
        with self.assertRaises(ValueError):
            cache.crop(removal)
        for (length, keys), layer in zip(before, cache.layers):
            self.assertEqual(int(layer.get_seq_length()), length)
            torch.testing.assert_close(layer.keys, keys)

    def test_empty_sliding_window_refuses_a_positive_value(self):
        """A `DynamicSlidingWindowLayer` that holds nothing has nothing to remove, but a positive value still raises."""
        layer = DynamicSlidingWindowLayer(sliding_window=4)
        layer.crop(-2)
        with self.assertRaisesRegex(ValueError, "positive value"):
            layer.crop(3)

    def test_sliding_window_refuses_to_keep_fewer_tokens_than_its_window(self):
        cache = Cache(layers=[DynamicLayer(), _full_recording_window()])
        cache.layers[0].update(_tokens(0, 6), _tokens(0, 6))
        self.assertRefusedUnchanged(cache, -1)
        # Removing every token is possible
        cache.crop(-6)
        self.assertEqual([int(layer.get_seq_length()) for layer in cache.layers], [0, 0])

    @parameterized.expand([(0,), (-1,)])
    def test_sliding_window_layer_never_updated_crops_nothing(self, removal):
        # e.g. a layer that shares another layer's states (KV sharing), or a reset one; `generate` crops it too
        layer = DynamicSlidingWindowLayer(sliding_window=4)
        layer.crop(removal)
        self.assertEqual((layer.get_seq_length(), layer.keys), (0, None))

    @parameterized.expand([(4,), (6,)])
    def test_crops_beyond_the_window_of_a_recording_sliding_layer(self, prefill):
        layer = DynamicSlidingWindowLayer(sliding_window=4)
        layer.activate_past_recording()
        layer.update(_tokens(0, prefill), _tokens(0, prefill))
        # `crop(0)` keeps the `sliding_window - 1` tokens the next forward needs, in both states
        layer.crop(0)
        kept = [prefill - 2.0, prefill - 1.0, float(prefill)]
        self.assertEqual([layer.keys[0, 0, :, 0].tolist(), layer.values[0, 0, :, 0].tolist()], [kept] * 2)
        # A partial crop keeps the `sliding_window - 1` tokens before the removed ones, in both states: of the 3 tokens
        # added since `crop(0)`, all can be removed, not one more (the layer checks its own crops)
        layer.update(_tokens(prefill, 3), _tokens(prefill, 3))
        error = f"Cannot remove 4 of the {prefill + 3} tokens .* window of 4 .* holds the last 6 only"
        with self.assertRaisesRegex(ValueError, error):
            layer.crop(-4)
        layer.crop(-3)
        self.assertEqual([layer.keys[0, 0, :, 0].tolist(), layer.values[0, 0, :, 0].tolist()], [kept] * 2)
        self.assertEqual(layer.get_seq_length(), prefill)
        # Removing more than every token empties it
        layer.crop(-100)
        self.assertEqual((layer.get_seq_length(), layer.keys.shape[-2], layer.values.shape[-2]), (0, 0, 0))
        keys, values = layer.update(_tokens(10, 2), _tokens(10, 2))
        self.assertEqual([keys[0, 0, :, 0].tolist(), values[0, 0, :, 0].tolist()], [[11.0, 12.0]] * 2)

    @parameterized.expand([(kind, length) for kind in ("dynamic", "hybrid") for length in (4, 6)])
    def test_sliding_window_without_recording_can_remove_nothing_or_everything(self, kind, length):
        # A full window that does not record holds its last 3 tokens (a hybrid layer's linear part holds no state)
        if kind == "dynamic":
            layer = DynamicSlidingWindowLayer(sliding_window=4)
        else:
            layer = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=4)
        layer.update(_tokens(0, length), _tokens(0, length))
        layer.crop(0)
        for removal in (-1, 1 - length):
            with self.assertRaisesRegex(RuntimeError, "does not track past states"):
                layer.crop(removal)
        self.assertEqual(
            (layer.get_seq_length(), layer.keys[0, 0, :, 0].tolist()), (length, [length - 2.0, length - 1.0, length])
        )
        layer.crop(-length)
        self.assertEqual((layer.get_seq_length(), layer.keys.shape[-2], layer.values.shape[-2]), (0, 0, 0))

    @parameterized.expand([(8, 6), (4, 6), (4, 5)])
    def test_static_sliding_window_that_wrapped_around_refuses(self, max_cache_len, length):
        # With `max_cache_len=4`, `is_croppable` is `True`, yet a cache of sliding layers only goes on past the window
        # (one token past it already overwrote the first one). Without room for the tokens to remove (see
        # `activate_past_recording`), its 4 slots hold the 3 tokens the next one needs and one more: 1 can be removed
        layer = StaticSlidingWindowLayer(max_cache_len=max_cache_len, sliding_window=4)
        for position in range(length):
            layer.update(_tokens(position, 1), _tokens(position, 1))
        self.assertRefusedUnchanged(Cache(layers=[layer]), -2)
        # The layer checks its own crops too: only nothing or every token can be removed
        with self.assertRaisesRegex(ValueError, f"Cannot remove {length - 1} of the {length} tokens"):
            layer.crop(1 - length)
        layer.crop(0)
        # Nothing changed: every token seen, and the tensor counter stops at the window
        self.assertEqual((layer.get_seq_length(), int(layer.cumulative_length)), (length, 4))
        layer.crop(-length)
        self.assertEqual((layer.get_seq_length(), int(layer.cumulative_length)), (0, 0))

    @parameterized.expand(
        [(kind, refusing) for kind in ("dynamic", "static") for refusing in ("linear_part", "sliding_part")]
    )
    def test_hybrid_sliding_layer_checks_both_parts_before_cropping_either(self, kind, refusing):
        if kind == "dynamic":
            layer = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=4)
        else:
            # A cache of sliding layers only goes on past `max_cache_len`: room for 1 token to remove, not 3
            layer = LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=5, sliding_window=4)
        if refusing == "linear_part":
            # 3 tokens with 2 per-token states: the linear part cannot remove 2, the window (not full) could
            layer.activate_past_recording(recurrent_states_to_keep=2)
            layer.update(_tokens(0, 3), _tokens(0, 3))
            _forward(layer, 0, 3, 2)
            removal, error = -2, "recurrent states"
        elif kind == "dynamic":
            # A full window that does not record (the linear part holds its kernel's 4 tokens: it could)
            layer.update(_tokens(0, 4), _tokens(0, 4))
            layer.update_conv_state(_tokens(0, 4).view(1, 1, 4), conv_kernel_size=4)
            removal, error = -1, "does not track past states"
        else:
            # A window that wrapped around (the linear part recorded the states of its last 3 tokens: it could)
            layer.activate_past_recording(recurrent_states_to_keep=3)
            for position in range(6):
                layer.update(_tokens(position, 1), _tokens(position, 1))
                _forward(layer, position, 1, 3)
            removal, error = -3, "overwr"
        before = (
            int(layer.get_seq_length()),
            layer.keys.clone(),
            int(layer.cumulative_length_linear),
            layer.conv_states[0].clone(),
        )
        with self.assertRaisesRegex((ValueError, RuntimeError), error):
            layer.crop(removal)
        after = (int(layer.get_seq_length()), layer.keys, int(layer.cumulative_length_linear), layer.conv_states[0])
        self.assertEqual((after[0], after[2]), (before[0], before[2]))
        self.assertTrue(torch.equal(after[1], before[1]) and torch.equal(after[3], before[3]))

    def test_recording_hybrid_sliding_layer_removes_the_tokens_added_since_the_last_crop(self):
        # Both parts can remove the 3 tokens of the last forward: the crop of one part does not make the other refuse
        layer = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=4)
        layer.activate_past_recording(recurrent_states_to_keep=3)
        _hybrid_forward(layer, 0, 6, 3)
        layer.crop(0)
        _hybrid_forward(layer, 6, 3, 3)
        layer.crop(-3)
        self.assertEqual(
            (layer.get_seq_length(), layer.num_tokens_linear, layer.recurrent_states[0].item()), (6, 6, 6.0)
        )
        self.assertEqual(
            [layer.keys[0, 0, :, 0].tolist(), layer.conv_states[0][0, 0].tolist()], [[4.0, 5.0, 6.0], [5.0, 6.0]]
        )

    @require_optimum_quanto
    def test_quantized_layer_refuses(self):
        layer = QuantoQuantizedLayer(residual_length=2, q_group_size=16)
        layer.update(torch.ones(1, 1, 3, 64), torch.ones(1, 1, 3, 64))
        for removal in (-1, -2):
            with self.assertRaisesRegex(ValueError, f"cannot remove {-removal} of its 3 tokens"):
                layer.crop(removal)
        layer.crop(0)
        self.assertEqual(layer.get_seq_length(), 3)
        # Removing every token empties both parts: the next tokens start a new sequence (of one token, then removed)
        layer.crop(-3)
        keys, _ = layer.update(2 * torch.ones(1, 1, 1, 64), 2 * torch.ones(1, 1, 1, 64))
        self.assertEqual((layer.get_seq_length(), keys.shape[-2], keys.unique().tolist()), (1, 1, [2.0]))
        layer.crop(-1)
        self.assertEqual((layer.get_seq_length(), layer.keys, layer._quantized_keys), (0, None, None))


@require_torch
class EncoderDecoderCacheCropTest(unittest.TestCase):
    @parameterized.expand([(0,), (-2,), (-100,)])
    def test_encoder_decoder_cache_crops_only_the_self_attention_tokens(self, removal):
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        cache.self_attention_cache.update(_tokens(0, 3), _tokens(0, 3), layer_idx=0)
        cache.cross_attention_cache.update(_tokens(10, 5), _tokens(10, 5), layer_idx=0)
        cache.crop(removal)
        self.assertTrue(torch.equal(cache.self_attention_cache.layers[0].keys, _tokens(0, max(3 + removal, 0))))
        self.assertTrue(torch.equal(cache.cross_attention_cache.layers[0].keys, _tokens(10, 5)))
        self.assertEqual(cache.get_seq_length(), max(3 + removal, 0))
