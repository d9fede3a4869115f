# Copyright 2026 The HuggingFace Team. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`crop(tokens_to_remove)` on every cache layer type: a removal of more tokens than a layer holds empties it, every
layer either crops exactly (its tensors, side tensors, lengths and mask sizes describe the kept tokens, and the next
update lands right after them) or refuses with a clear error before anything changed, and `Cache.crop` changes no
layer if one refuses.

Token `p` is stored with the code `p + 1` (in float64), so that an empty (zeroed) static slot is told apart from a
token.
"""

import unittest
import warnings
from unittest import mock

import numpy as np
from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import CaptureLogger, require_torch
from transformers.utils import is_optimum_quanto_available, logging


if is_torch_available():
    import torch

    from transformers import (
        DeepseekV4Config,
        DeepseekV4ForCausalLM,
        DynamicCache,
        EncoderDecoderCache,
        GenerationConfig,
        Lfm2Config,
        Lfm2ForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Qwen3NextConfig,
        Qwen3NextForCausalLM,
        StaticCache,
    )
    from transformers.cache_utils import (
        BaseQuantizedLayer,
        Cache,
        CacheLayerMixin,
        DummyLayer,
        DynamicIndexedLayer,
        DynamicLayer,
        DynamicSlidingWindowLayer,
        Fp8QuantizedLayer,
        LinearAttentionAndFullAttentionLayer,
        LinearAttentionAndSlidingWindowAttentionLayer,
        LinearAttentionAndStaticFullAttentionLayer,
        LinearAttentionAndStaticSlidingWindowAttentionLayer,
        LinearAttentionLayer,
        QuantizedLayer,
        QuantoQuantizedLayer,
        StaticIndexedLayer,
        StaticLayer,
        StaticSlidingWindowLayer,
    )
    from transformers.generation import candidate_generator
    from transformers.generation.candidate_generator import AssistedCandidateGenerator
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4CSACache, DeepseekV4HCACache
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import (
        MiniMaxM3VLSparseCacheLayer,
        MiniMaxM3VLSparseStaticCacheLayer,
    )
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import (
        UnlimitedOcrDynamicReferenceSlidingWindowLayer,
        UnlimitedOcrStaticReferenceSlidingWindowLayer,
    )


def _exact_quantized_layer(**kwargs):
    """A `QuantizedLayer` whose quantization is exact, to check its crop token by token without a backend."""

    class ExactQuantizedLayer(QuantizedLayer):
        def _quantize(self, tensor, axis):
            return tensor.clone()

        def _dequantize(self, q_tensor):
            return q_tensor

    return ExactQuantizedLayer(**kwargs)


WINDOW = 4
MAX_CACHE_LEN = 8
KERNEL = 2  # conv kernel of the linear attention layers

# (argument of `crop`, expected length of a 3-token layer after it)
CROP_CASES = [(0, 3), (-1, 2), (-3, 0), (-5, 0)]


def _tokens(start, length):
    """Key states `[1, 1, length, 1]` holding the codes `start + 1 ... start + length`."""
    return torch.arange(start + 1, start + length + 1, dtype=torch.float64).reshape(1, 1, length, 1)


def _conv_inputs(start, length):
    """Conv inputs `[1, 2, length]` (2 channels) of the tokens `start ... start + length - 1`."""
    return torch.arange(start + 1, start + length + 1, dtype=torch.float64).expand(1, 2, length).contiguous()


def _fill(layer, num_tokens, start=0, step=None):
    """Appends the tokens `start ... start + num_tokens - 1` to an attention `layer`, `step` tokens per update."""
    step = step or num_tokens
    for first in range(start, start + num_tokens, step):
        states = _tokens(first, min(step, start + num_tokens - first))
        layer.update(states, states.clone())
        if isinstance(layer, (DynamicIndexedLayer, StaticIndexedLayer)):
            layer.update_indexer(states[:, 0])
            positions = torch.arange(first, first + states.shape[-2]).reshape(1, 1, -1)
            previous = layer.indexer_position_ids
            layer.indexer_position_ids = positions if previous is None else torch.cat([previous, positions], dim=-1)


def _snapshot(layer):
    """A copy of every tensor and counter of `layer`, to check that a refused crop changed nothing."""
    state = {}
    for name, value in vars(layer).items():
        if isinstance(value, torch.Tensor):
            state[name] = value.clone()
        elif isinstance(value, dict):
            state[name] = {key: v.clone() if isinstance(v, torch.Tensor) else v for key, v in value.items()}
        elif isinstance(value, (int, bool)) or value is None:
            state[name] = value
    return state


def _hybrid_forward(layer, start, length):
    """A forward over `length` tokens: the attention part (if any) and the conv states (no recurrent states) see them."""
    if isinstance(layer, CacheLayerMixin):
        layer.update(_tokens(start, length), _tokens(start, length))
    if isinstance(layer, LinearAttentionLayer):
        layer.update_conv_state(_conv_inputs(start, length), conv_kernel_size=KERNEL)


def _kept_layer(make_layer, kept):
    """A layer that only saw the `kept` tokens, in one forward, as `generate` leaves it (`crop(0)`)."""
    layer = make_layer()
    Cache(layers=[layer]).activate_past_recording()
    if kept:
        _hybrid_forward(layer, 0, kept)
        layer.crop(0)
    return layer


class CropTestCase(unittest.TestCase):
    def assertExactlyEqual(self, actual, expected):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)

    def assertSameLayer(self, layer, expected):
        """`layer` holds the states of `expected` (the attention states of its tokens and the linear attention ones)."""
        length = int(expected.get_seq_length()) if isinstance(expected, CacheLayerMixin) else None
        if length is not None:
            self.assertEqual(int(layer.get_seq_length()), length)
            if length:
                self.assertExactlyEqual(layer.keys[..., :length, :], expected.keys[..., :length, :])
                self.assertExactlyEqual(layer.values[..., :length, :], expected.values[..., :length, :])
        if isinstance(layer, LinearAttentionLayer):
            self.assertEqual(layer.has_previous_state, expected.has_previous_state)
            if expected.has_previous_state[0]:
                self.assertExactlyEqual(layer.conv_states[0], expected.conv_states[0])

    def assertCropsLikeTheKeptTokens(self, make_layer, crops):
        """A prefill of 2 tokens then an update of 3, recorded: the crops (the first one through a `Cache`, the next ones
        on the layer) leave the layer that saw the kept tokens, and the next forward goes on from there."""
        layer = make_layer()
        cache = Cache(layers=[layer])
        cache.activate_past_recording()
        _hybrid_forward(layer, 0, 2)
        cache.crop(0)
        _hybrid_forward(layer, 2, 3)
        counters = {
            name: (counter, counter.data_ptr())
            for name in ("cumulative_length", "indexer_cumulative_length")
            if isinstance(counter := getattr(layer, name, None), torch.Tensor)
        }
        cache.crop(crops[0])
        for tokens_to_remove in crops[1:]:
            layer.crop(tokens_to_remove)
        kept = max(5 + crops[0], 0)
        expected = _kept_layer(make_layer, kept)
        self.assertSameLayer(layer, expected)
        _hybrid_forward(layer, kept, 2)
        _hybrid_forward(expected, kept, 2)
        self.assertSameLayer(layer, expected)
        # Static counters are static addresses: they move in place
        for name, (counter, address) in counters.items():
            self.assertIs(getattr(layer, name), counter)
            self.assertEqual(counter.data_ptr(), address)

    def assertIsCroppableTellsWhetherCropSucceeds(self, cache):
        """`is_croppable` is True exactly when removing the last token succeeds (a refused crop changes nothing)."""
        is_croppable = cache.is_croppable
        try:
            cache.crop(-1)
            succeeded = True
        except (ValueError, RuntimeError):
            succeeded = False
        self.assertEqual(is_croppable, succeeded)

    def assertUnchanged(self, layer, snapshot):
        for name, value in _snapshot(layer).items():
            expected = snapshot[name]
            if isinstance(value, torch.Tensor):
                self.assertExactlyEqual(value, expected)
            elif isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(item, torch.Tensor):
                        self.assertExactlyEqual(item, expected[key])
                    else:
                        self.assertEqual(item, expected[key], f"{name}[{key}]")
            else:
                self.assertEqual(value, expected, name)

    def assertRefusesPartialCropsButRollsBackFully(self, cache, hybrid):
        """
        Not recording, the conv states of `hybrid` (the last layer of `cache`) cannot remove a token: the refusal changes
        no layer, not even the ones checked before it. Removing every token is a full rollback, which resets them.
        """
        for layer in cache.layers:
            _fill(layer, 2)
        hybrid.update_conv_state(_conv_inputs(0, 2), conv_kernel_size=KERNEL)
        before = [_snapshot(layer) for layer in cache.layers]
        with self.assertRaisesRegex(RuntimeError, "does not record"):
            cache.crop(-1)
        for layer, snapshot in zip(cache.layers, before):
            self.assertUnchanged(layer, snapshot)

        cache.crop(-2)
        self.assertFalse(hybrid.has_previous_state[0])

    def assertHybridLayerKeepsItsFirstToken(self, make_layer):
        """
        With a conv kernel of 1, the recorded conv states of a hybrid layer can remove all but the first token: a partial
        crop, not a full rollback, through the Cache and on the layer itself.
        """
        for through_cache in (True, False):
            layer = make_layer()
            cache = Cache(layers=[layer])
            cache.activate_past_recording()
            _fill(layer, 3)
            layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=1)
            (cache if through_cache else layer).crop(-2)
            self.assertEqual(int(layer.get_seq_length()), 1)
            # A static layer keeps all its slots: the first one holds the kept token
            keys = layer.keys[:, :, :1] if isinstance(layer, StaticLayer) else layer.keys
            self.assertExactlyEqual(keys, _tokens(0, 1))
            self.assertTrue(layer.has_previous_state[0])
            self.assertExactlyEqual(layer.conv_states[0], _conv_inputs(0, 1))


@require_torch
class DynamicLayersCropTest(CropTestCase):
    """Dynamic layers remove the last tokens, at most all of them, with their side tensors."""

    def _layer(self, layer_name):
        if layer_name == "sliding":
            return DynamicSlidingWindowLayer(sliding_window=WINDOW)
        if layer_name == "indexed":
            return DynamicIndexedLayer()
        return DynamicLayer()

    def assertLayerHolds(self, layer, length):
        """Checks that every piece of state of `layer` describes exactly the tokens `0 ... length - 1`."""
        self.assertEqual(layer.get_seq_length(), length)
        if isinstance(layer, DynamicSlidingWindowLayer):
            # The window shows the last `WINDOW - 1` tokens
            first = max(length - WINDOW + 1, 0)
            # While recording, one more token is kept when it was still there: the one a later `crop(-1)` brings back
            # into the window
            first_stored = length - layer.keys.shape[-2]
            self.assertIn(first_stored, {first, max(length - WINDOW, 0)} if layer.record_past else {first})
            self.assertEqual(layer.cumulative_length, length)
            self.assertExactlyEqual(layer.keys, _tokens(first_stored, length - first_stored))
            expected_mask_sizes = (min(length, WINDOW - 1) + 1, first)
        else:
            self.assertExactlyEqual(layer.keys, _tokens(0, length))
            expected_mask_sizes = (length + 1, 0)
        self.assertExactlyEqual(layer.values, layer.keys)
        self.assertEqual(layer.get_mask_sizes(1), expected_mask_sizes)
        if isinstance(layer, DynamicIndexedLayer):
            self.assertExactlyEqual(layer.indexer_keys, _tokens(0, length)[:, 0])
            self.assertExactlyEqual(layer.indexer_position_ids, torch.arange(length).reshape(1, 1, -1))

    def assertAppendsAfter(self, layer, length):
        """The next update returns the kept tokens followed by the new one."""
        _, query_offset = layer.get_mask_sizes(1)
        if isinstance(layer, DynamicSlidingWindowLayer):
            first = max(length - WINDOW + 1, 0)
        else:
            first = 0
        keys, _ = layer.update(_tokens(length, 1), _tokens(length, 1))
        self.assertExactlyEqual(keys[..., -(length + 1 - first) :, :], _tokens(first, length + 1 - first))
        if isinstance(layer, DynamicIndexedLayer):
            layer.update_indexer(_tokens(length, 1)[:, 0])
            layer.indexer_position_ids = torch.cat([layer.indexer_position_ids, torch.tensor([[[length]]])], dim=-1)
        if getattr(layer, "record_past", False):
            # A recording layer keeps its past until the next `crop`, which restricts it back to the window
            layer.crop(0)
        self.assertLayerHolds(layer, length + 1)

    @parameterized.expand(
        [(layer_name, *case) for layer_name in ("dynamic", "sliding", "indexed") for case in CROP_CASES]
    )
    def test_crop_keeps_the_right_tokens(self, layer_name, tokens_to_remove, expected_length):
        layer = self._layer(layer_name)
        _fill(layer, 3)
        layer.crop(tokens_to_remove)
        self.assertLayerHolds(layer, expected_length)
        self.assertAppendsAfter(layer, expected_length)

    @parameterized.expand([(layer_name,) for layer_name in ("dynamic", "sliding", "indexed")])
    def test_crop_of_the_only_token(self, layer_name):
        layer = self._layer(layer_name)
        _fill(layer, 1)
        layer.crop(-1)
        self.assertLayerHolds(layer, 0)
        self.assertAppendsAfter(layer, 0)

    @parameterized.expand([(0, 7), (-1, 6), (-3, 4), (-7, 0), (-9, 0)])
    def test_sliding_window_with_recorded_past_beyond_the_window(self, tokens_to_remove, expected_length):
        # 3 tokens, then 4 recorded ones: beyond the window, they can be rolled back (or all tokens, at once)
        layer = self._layer("sliding")
        _fill(layer, 3)
        layer.activate_past_recording()
        _fill(layer, 4, start=3, step=1)
        layer.crop(tokens_to_remove)
        self.assertLayerHolds(layer, expected_length)
        self.assertAppendsAfter(layer, expected_length)

    def test_sliding_window_refuses_tokens_it_dropped(self):
        layer = self._layer("sliding")
        _fill(layer, 7, step=1)
        self.assertFalse(layer.is_croppable)
        before = _snapshot(layer)
        # Keeping a single token needs a dropped one too
        for tokens_to_remove in (-1, -6):
            with self.assertRaises(ValueError) as context:
                layer.crop(tokens_to_remove)
            self.assertIn("DynamicSlidingWindowLayer", str(context.exception))
            self.assertIn("activate_past_recording", str(context.exception))
            self.assertIn("only the tokens added since then can be removed", str(context.exception))
            self.assertUnchanged(layer, before)

        # Removing nothing, or everything, needs no dropped token
        layer.crop(0)
        self.assertLayerHolds(layer, 7)
        layer.crop(-7)
        self.assertLayerHolds(layer, 0)
        self.assertAppendsAfter(layer, 0)

    @parameterized.expand([("dynamic",), ("sliding",), ("indexed",)])
    def test_huge_removal_empties_silently(self, layer_name):
        layer = self._layer(layer_name)
        _fill(layer, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            layer.crop(-(2**70))
        self.assertLayerHolds(layer, 0)
        self.assertAppendsAfter(layer, 0)

    def test_sliding_window_recording_keeps_the_token_the_next_crop_needs(self):
        # A recording layer that filled its window: after `crop(0)`, it still says it is croppable, and it is
        layer = self._layer("sliding")
        layer.activate_past_recording()
        _fill(layer, 6, step=1)
        layer.crop(0)
        self.assertTrue(layer.is_croppable)
        layer.crop(-1)
        self.assertLayerHolds(layer, 5)
        self.assertAppendsAfter(layer, 5)

    def test_sliding_window_refuses_more_than_it_recorded(self):
        layer = self._layer("sliding")
        _fill(layer, 6, step=1)
        layer.activate_past_recording()
        _fill(layer, 2, start=6, step=1)
        self.assertTrue(layer.is_croppable)
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "Only the 2 token"):
            layer.crop(-3)
        self.assertUnchanged(layer, before)
        layer.crop(-2)
        self.assertLayerHolds(layer, 6)

    @parameterized.expand([("dynamic",), ("sliding",), ("indexed",)])
    def test_crop_of_a_layer_never_updated(self, layer_name):
        layer = self._layer(layer_name)
        for tokens_to_remove in (0, -1):
            layer.crop(tokens_to_remove)
            self.assertEqual(layer.get_seq_length(), 0)

    @parameterized.expand([("dynamic",), ("indexed",)])
    def test_crop_of_a_single_token(self, layer_name):
        # A layer of one token of size 1: its states hold a single element
        layer = self._layer(layer_name)
        _fill(layer, 1)
        layer.crop(-1)
        self.assertLayerHolds(layer, 0)
        self.assertAppendsAfter(layer, 0)

    def test_sliding_window_refuses_the_first_dropped_token(self):
        # One token more than the window: the first token was dropped, and removing any token needs it back
        layer = self._layer("sliding")
        _fill(layer, WINDOW, step=1)
        self.assertFalse(layer.is_croppable)
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "activate_past_recording"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)

    @parameterized.expand([(name, removal) for name in ("dynamic", "sliding", "indexed") for removal in (-1, -4)])
    def test_layer_without_tokens_yet_stays_empty(self, layer_name, tokens_to_remove):
        # As `early_initialization` leaves a layer (`torch.export` uses it): initialized, but without any token
        layer = self._layer(layer_name)
        no_tokens = torch.zeros(1, 1, 0, 1, dtype=torch.float64)
        layer.lazy_initialization(no_tokens, no_tokens)
        layer.crop(tokens_to_remove)
        self.assertEqual(layer.get_seq_length(), 0)
        _fill(layer, 2)
        self.assertLayerHolds(layer, 2)


@require_torch
class CropArgumentsTest(CropTestCase):
    """What `crop` accepts, and the clear errors for what it refuses."""

    def _cache(self):
        cache = DynamicCache()
        states = _tokens(0, 5)
        cache.update(states, states.clone(), layer_idx=0)
        return cache

    @parameterized.expand(
        [
            ("int", lambda value: value),
            ("tensor_int64", lambda value: torch.tensor(value)),
            ("tensor_int32", lambda value: torch.tensor(value, dtype=torch.int32)),
        ]
    )
    def test_integer_like_arguments(self, _, make_argument):
        # `generate` passes 0-d integer tensors
        cache = self._cache()
        cache.crop(make_argument(-2))
        self.assertEqual(cache.get_seq_length(), 3)
        cache.crop(make_argument(0))
        self.assertEqual(cache.get_seq_length(), 3)
        cache.crop(make_argument(-9))
        self.assertEqual(cache.get_seq_length(), 0)

    @parameterized.expand(
        [
            ("bool", False, "False"),
            ("float", -1.0, "-1.0"),
            ("str", "-1", "'-1'"),
            ("none", None, "None"),
            ("multi_element_tensor", [-1, -2], "shape (2,)"),
            ("one_element_tensor", [-1], "shape (1,)"),
            ("bool_tensor", True, "tensor(True)"),
            ("float_tensor", -1.5, "tensor(-1.5000"),
        ]
    )
    def test_wrong_types_raise_a_clear_error_and_change_nothing(self, name, argument, described_as):
        if name.endswith("tensor"):
            argument = torch.tensor(argument, dtype=torch.float64 if name == "float_tensor" else None)
        cache = self._cache()
        before = _snapshot(cache.layers[0])
        with self.assertRaises(TypeError) as context:
            cache.crop(argument)
        self.assertIn(described_as, str(context.exception))
        self.assertIn("tokens_to_remove", str(context.exception))
        self.assertUnchanged(cache.layers[0], before)

    @parameterized.expand([("int", lambda value: value), ("tensor", lambda value: torch.tensor(value))])
    def test_one_is_a_positive_value(self, _, make_argument):
        cache = self._cache()
        before = _snapshot(cache.layers[0])
        with self.assertRaisesRegex(ValueError, "positive value"):
            cache.crop(make_argument(1))
        self.assertUnchanged(cache.layers[0], before)

    @parameterized.expand([("dynamic",), ("static",), ("linear",)])
    def test_positive_values_raise_and_change_nothing(self, layer_name):
        layer = {"dynamic": DynamicLayer(), "static": StaticLayer(MAX_CACHE_LEN)}.get(layer_name)
        cache = Cache(layers=[DynamicLayer(), layer or LinearAttentionLayer()])
        _fill(cache.layers[0], 3)
        if layer is not None:
            _fill(layer, 3)
        before = _snapshot(cache.layers[0])
        with self.assertRaisesRegex(ValueError, "positive value"):
            cache.crop(2)
        self.assertUnchanged(cache.layers[0], before)


@require_torch
class CacheCropTest(CropTestCase):
    """`Cache.crop` checks every layer before cropping any, and `is_croppable` says whether it would succeed."""

    def test_refused_crop_changes_no_layer(self):
        # The sliding layer, checked last, refuses: the full attention layer must not be cropped either
        cache = Cache(layers=[DynamicLayer(), DynamicSlidingWindowLayer(sliding_window=WINDOW)])
        for layer in cache.layers:
            _fill(layer, 6, step=1)
        before = [_snapshot(layer) for layer in cache.layers]
        self.assertFalse(cache.is_croppable)
        with self.assertRaisesRegex(ValueError, "DynamicSlidingWindowLayer"):
            cache.crop(-1)
        for layer, snapshot in zip(cache.layers, before):
            self.assertUnchanged(layer, snapshot)

    @parameterized.expand([(-1,), (-4,)])
    def test_layers_without_tokens_yet_are_left_empty(self, tokens_to_remove):
        # `early_initialization` (used by `torch.export`) initializes the layers without any token
        cache = Cache(layers=[DynamicLayer(), DynamicLayer()])
        cache.early_initialization(1, 1, 1, torch.float64, torch.device("cpu"))
        # The second layer gets its tokens first: a layer without tokens does not stop the crop of the next ones
        _fill(cache.layers[1], 5)
        cache.crop(tokens_to_remove)
        self.assertEqual(cache.layers[0].get_seq_length(), 0)
        self.assertExactlyEqual(cache.layers[1].keys, _tokens(0, 5 + tokens_to_remove))
        keys, _ = cache.update(_tokens(0, 2), _tokens(0, 2), 0)
        self.assertExactlyEqual(keys, _tokens(0, 2))

    def test_recurrent_states_refuse_partial_crops_but_roll_back_fully(self):
        linear_layer = LinearAttentionLayer()
        linear_layer.activate_past_recording()
        linear_layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        linear_layer.update_recurrent_state(torch.ones(1, 2, 3, dtype=torch.float64))
        cache = Cache(layers=[DynamicLayer(), linear_layer])
        _fill(cache.layers[0], 3)
        before = [_snapshot(layer) for layer in cache.layers]
        self.assertFalse(cache.is_croppable)

        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("LinearAttentionLayer", str(context.exception))
        self.assertIn("cache.crop(-cache.get_seq_length())", str(context.exception))
        for layer, snapshot in zip(cache.layers, before):
            self.assertUnchanged(layer, snapshot)

        # Removing every token resets the linear attention states, as on a new cache
        cache.crop(-5)
        self.assertEqual(cache.get_seq_length(), 0)
        self.assertFalse(linear_layer.has_previous_state[0])
        self.assertEqual(linear_layer.recurrent_states[0].abs().sum().item(), 0)
        self.assertIsNone(cache.get_conv_state(1))

    def test_full_rollback_of_a_one_token_cache_resets_the_recurrent_states(self):
        linear_layer = LinearAttentionLayer()
        linear_layer.activate_past_recording()
        linear_layer.update_conv_state(_conv_inputs(0, 1), conv_kernel_size=KERNEL)
        linear_layer.update_recurrent_state(torch.ones(1, 2, 3, dtype=torch.float64))
        cache = Cache(layers=[DynamicLayer(), linear_layer])
        _fill(cache.layers[0], 1)
        cache.crop(-1)
        self.assertEqual(cache.get_seq_length(), 0)
        self.assertFalse(linear_layer.has_previous_state[0])
        self.assertEqual(linear_layer.recurrent_states[0].abs().sum().item(), 0)

    @parameterized.expand(
        [
            ("sliding_beyond_window", lambda: DynamicSlidingWindowLayer(sliding_window=WINDOW), False),
            ("sliding_recorded", lambda: DynamicSlidingWindowLayer(sliding_window=WINDOW), True),
            ("linear_not_recorded", LinearAttentionLayer, False),
            ("linear_recorded", LinearAttentionLayer, True),
            ("dummy", DummyLayer, False),
        ]
    )
    def test_is_croppable_tells_whether_crop_succeeds(self, _, make_layer, record_past):
        layer = make_layer()
        cache = Cache(layers=[DynamicLayer(), layer])
        if record_past:
            cache.activate_past_recording()
        _fill(cache.layers[0], 6, step=1)
        if isinstance(layer, LinearAttentionLayer):
            layer.update_conv_state(_conv_inputs(0, 6), conv_kernel_size=KERNEL)
        elif not isinstance(layer, DummyLayer):
            _fill(layer, 6, step=1)
        self.assertIsCroppableTellsWhetherCropSucceeds(cache)

    def test_empty_attention_part_is_not_a_full_rollback(self):
        # The attention layers hold no token yet, the linear attention layer holds conv states: removing nothing keeps
        # them (back to the kernel size), it does not reset them
        linear_layer = LinearAttentionLayer()
        linear_layer.activate_past_recording()
        linear_layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        cache = Cache(layers=[DynamicLayer(), linear_layer])
        cache.crop(0)
        self.assertExactlyEqual(linear_layer.conv_states[0], _conv_inputs(3 - KERNEL, KERNEL))

        # Removing tokens removes them from the linear attention layer only
        linear_layer = LinearAttentionLayer()
        linear_layer.activate_past_recording()
        linear_layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        cache = Cache(layers=[DynamicLayer(), linear_layer])
        cache.crop(-1)
        self.assertExactlyEqual(linear_layer.conv_states[0], _conv_inputs(0, KERNEL))

    @parameterized.expand([(-6,), (-(2**62),), (-(2**62 + 1),), (-(2**70),)])
    def test_huge_removal_from_a_dynamic_cache_empties_it_silently(self, tokens_to_remove):
        cache = DynamicCache()
        for layer_idx in range(2):
            cache.update(_tokens(0, 3), _tokens(0, 3), layer_idx)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.crop(tokens_to_remove)
        for layer in cache.layers:
            self.assertEqual(layer.get_seq_length(), 0)
            self.assertEqual(layer.keys.shape, (1, 1, 0, 1))
            self.assertEqual(layer.values.shape, (1, 1, 0, 1))

    @parameterized.expand([(0,), (-1,), (-9,)])
    def test_dynamic_layers_never_updated_are_left_alone(self, tokens_to_remove):
        # e.g. the layers that share the states of another one: only the first layer holds tokens
        cache = Cache(layers=[DynamicLayer(), DynamicLayer()])
        _fill(cache.layers[0], 3)
        cache.crop(tokens_to_remove)
        self.assertEqual(cache.layers[0].get_seq_length(), max(3 + tokens_to_remove, 0))
        self.assertFalse(cache.layers[1].is_initialized)
        self.assertIsNone(cache.layers[1].keys)

    @parameterized.expand([("full",), ("sliding",)])
    def test_hybrid_layer_refusal_changes_no_layer_but_a_full_rollback_is_honoured(self, name):
        if name == "full":
            hybrid = LinearAttentionAndFullAttentionLayer()
        else:
            hybrid = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW)
        cache = Cache(layers=[DynamicLayer(), hybrid])
        self.assertRefusesPartialCropsButRollsBackFully(cache, hybrid)
        self.assertEqual([int(layer.get_seq_length()) for layer in cache.layers], [0, 0])

    @parameterized.expand([("full",), ("sliding",)])
    def test_hybrid_layer_keeps_its_first_token(self, name):
        if name == "full":
            self.assertHybridLayerKeepsItsFirstToken(LinearAttentionAndFullAttentionLayer)
        else:
            self.assertHybridLayerKeepsItsFirstToken(
                lambda: LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW)
            )

    @parameterized.expand([(-3, 2), (-5, 0), (-9, 0)])
    def test_linear_attention_layers_follow_the_longest_attention_layer(self, tokens_to_remove, expected_length):
        # Attention layers of different lengths (the second one holds only the last 2 tokens): the linear attention
        # layer saw the 5 tokens of the longest, so removing 3 keeps its first 2; removing 5 is a full rollback
        linear_layer = LinearAttentionLayer()
        cache = Cache(layers=[linear_layer, DynamicLayer(), DynamicLayer()])
        cache.activate_past_recording()
        _hybrid_forward(linear_layer, 0, 5)
        _fill(cache.layers[1], 5)
        _fill(cache.layers[2], 2, start=3)
        cache.crop(tokens_to_remove)
        self.assertSameLayer(linear_layer, _kept_layer(LinearAttentionLayer, expected_length))
        self.assertEqual([layer.get_seq_length() for layer in cache.layers[1:]], [expected_length, 0])

    @parameterized.expand([(0, 5), (-2, 3), (-9, 0)])
    def test_encoder_decoder_cache_crops_only_self_attention(self, tokens_to_remove, expected_length):
        self_attention_cache, cross_attention_cache = DynamicCache(), DynamicCache()
        states = _tokens(0, 5)
        self_attention_cache.update(states, states.clone(), layer_idx=0)
        cross_attention_cache.update(states, states.clone(), layer_idx=0)
        cache = EncoderDecoderCache(self_attention_cache, cross_attention_cache)
        cache.crop(tokens_to_remove)
        self.assertEqual(cache.get_seq_length(), expected_length)
        self.assertExactlyEqual(self_attention_cache.layers[0].keys, _tokens(0, expected_length))
        self.assertExactlyEqual(cross_attention_cache.layers[0].keys, states)
        with self.assertRaises(TypeError):
            cache.crop(-1.0)


@require_torch
class LinearAttentionCropTest(CropTestCase):
    """Linear attention layers roll their recorded conv states back, or refuse; hybrids crop both parts."""

    def _layer(self, record_past=True):
        layer = LinearAttentionLayer()
        if record_past:
            layer.activate_past_recording()
        return layer

    def test_layer_never_updated(self):
        # e.g. a layer of a cache whose model did not run yet
        layer = self._layer()
        for tokens_to_remove in (0, -1):
            layer.crop(tokens_to_remove)
        self.assertFalse(layer.is_conv_states_initialized[0])
        self.assertFalse(layer.is_croppable)

    @parameterized.expand([(0, 3), (-1, 2)])
    def test_recorded_conv_states_roll_back(self, tokens_to_remove, expected_length):
        layer = self._layer()
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        self.assertTrue(layer.is_croppable)
        layer.crop(tokens_to_remove)
        # The `KERNEL` conv states before the removed tokens, which the next conv step reads
        self.assertExactlyEqual(layer.conv_states[0], _conv_inputs(expected_length - KERNEL, KERNEL))
        returned = layer.update_conv_state(_conv_inputs(expected_length, 1))
        self.assertExactlyEqual(returned, _conv_inputs(expected_length - KERNEL, KERNEL + 1))

    def test_conv_states_shorter_than_the_kernel_are_padded(self):
        layer = self._layer()
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=4)
        layer.crop(0)
        self.assertExactlyEqual(layer.conv_states[0], torch.nn.functional.pad(_conv_inputs(0, 3), (1, 0)))

    @parameterized.expand([("not_recorded", False, 1), ("longer_than_recorded", True, 2)])
    def test_refuses_what_it_did_not_record(self, _, record_past, tokens_to_remove):
        layer = self._layer(record_past)
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        before = _snapshot(layer)
        with self.assertRaisesRegex(RuntimeError, "LinearAttentionLayer") as context:
            layer.crop(-tokens_to_remove)
        self.assertIn("cache.", str(context.exception))
        self.assertUnchanged(layer, before)

    @parameterized.expand([("full", LinearAttentionAndFullAttentionLayer), ("sliding", None)])
    def test_hybrid_layers_crop_both_parts(self, _, layer_class):
        if layer_class is None:
            layer = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW)
        else:
            layer = layer_class()
        layer.activate_past_recording()
        _fill(layer, 3)
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        self.assertTrue(layer.is_croppable)

        layer.crop(-1)
        self.assertEqual(layer.get_seq_length(), 2)
        self.assertExactlyEqual(layer.keys, _tokens(0, 2))
        self.assertExactlyEqual(layer.conv_states[0], _conv_inputs(0, KERNEL))

        # Removing more tokens than the attention part holds is a full rollback: the conv states are reset too
        layer.crop(-5)
        self.assertEqual(layer.get_seq_length(), 0)
        self.assertEqual(layer.get_mask_sizes(1)[0], 1)
        self.assertFalse(layer.has_previous_state[0])
        keys, _ = layer.update(_tokens(0, 1), _tokens(0, 1))
        self.assertExactlyEqual(keys, _tokens(0, 1))

    @parameterized.expand(
        # A cache of linear attention layers alone has no length: it cannot tell a full rollback
        [("linear", crops) for crops in ((-1,), (-2,), (-3,))]
        + [
            (name, crops)
            for name in ("full", "sliding")
            for crops in ((-1,), (-2,), (-3,), (-5,), (-9,), (-5, 0), (-5, -1))
        ]
    )
    def test_crop_of_several_recorded_tokens(self, name, crops):
        make_layer = {
            "linear": LinearAttentionLayer,
            "full": LinearAttentionAndFullAttentionLayer,
            "sliding": lambda: LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=8),
        }[name]
        self.assertCropsLikeTheKeptTokens(make_layer, crops)

    def test_hybrid_layer_refuses_both_parts_before_changing_either(self):
        layer = LinearAttentionAndFullAttentionLayer()
        layer.activate_past_recording()
        _fill(layer, 3)
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        layer.update_recurrent_state(torch.ones(1, 2, 3, dtype=torch.float64))
        before = _snapshot(layer)
        self.assertFalse(layer.is_croppable)
        with self.assertRaisesRegex(RuntimeError, "recurrent states"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)

    def test_hybrid_sliding_layer_refuses_what_its_window_dropped(self):
        # Recorded from the 7th token on: the window dropped the tokens to keep, and so did the conv states
        layer = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW)
        for position in range(8):
            if position == 6:
                layer.activate_past_recording()
            _hybrid_forward(layer, position, 1)
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "window"):
            layer.crop(-3)
        self.assertUnchanged(layer, before)

    def test_hybrid_layer_with_an_empty_attention_part_keeps_its_conv_states(self):
        # Removing nothing from a layer whose attention part is empty is not a full rollback
        layer = LinearAttentionAndFullAttentionLayer()
        layer.activate_past_recording()
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        layer.crop(0)
        self.assertTrue(layer.is_conv_states_initialized[0])
        self.assertExactlyEqual(layer.conv_states[0], _conv_inputs(3 - KERNEL, KERNEL))

    def test_refusal_says_that_no_token_was_recorded_since_the_last_crop(self):
        layer = self._layer()
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        layer.crop(0)
        before = _snapshot(layer)
        with self.assertRaisesRegex(RuntimeError, r"only 0 token\(s\)"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)

    def test_conv_states_of_a_batch_shorter_than_the_kernel_are_padded(self):
        # As many sequences and channels as the kernel size: the states are padded to the kernel along the tokens only
        layer = self._layer()
        conv_inputs = _conv_inputs(0, 3)[:, :1].expand(4, 4, 3).contiguous()
        layer.update_conv_state(conv_inputs, conv_kernel_size=4)
        layer.crop(0)
        self.assertExactlyEqual(layer.conv_states[0], torch.nn.functional.pad(conv_inputs, (1, 0)))

    def test_layer_never_updated_without_recording(self):
        layer = self._layer(record_past=False)
        layer.crop(-1)
        self.assertFalse(layer.is_conv_states_initialized[0])

    def test_refusal_when_fewer_tokens_than_the_kernel_were_seen(self):
        layer = self._layer()
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=4)
        before = _snapshot(layer)
        with self.assertRaisesRegex(RuntimeError, r"only 0 token\(s\)"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)

    def test_every_conv_state_is_checked_and_cropped(self):
        # A layer of two conv states, the first of which was never updated
        layer = LinearAttentionLayer(number_of_states=2)
        layer.activate_past_recording()
        layer.update_conv_state(_conv_inputs(0, 3), state_idx=1, conv_kernel_size=KERNEL)
        before = _snapshot(layer)
        with self.assertRaises(RuntimeError):
            layer.crop(-2)
        self.assertUnchanged(layer, before)
        layer.crop(-1)
        self.assertFalse(layer.is_conv_states_initialized[0])
        self.assertExactlyEqual(layer.conv_states[1], _conv_inputs(0, KERNEL))

    def test_every_conv_state_is_restricted_to_the_kernel(self):
        # The first conv states are at their minimal size already, the second ones hold recorded states
        layer = LinearAttentionLayer(number_of_states=2)
        layer.activate_past_recording()
        layer.update_conv_state(_conv_inputs(0, KERNEL), state_idx=0, conv_kernel_size=KERNEL)
        layer.update_conv_state(_conv_inputs(0, 3), state_idx=1, conv_kernel_size=KERNEL)
        layer.crop(0)
        self.assertExactlyEqual(layer.conv_states[0], _conv_inputs(0, KERNEL))
        self.assertExactlyEqual(layer.conv_states[1], _conv_inputs(3 - KERNEL, KERNEL))

    def test_conv_states_at_their_minimal_size_are_kept_in_place(self):
        # Not recording: the conv states are a fixed buffer (a static address, e.g. for CUDA graphs)
        layer = self._layer(record_past=False)
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        conv_states = layer.conv_states[0]
        layer.crop(0)
        self.assertIs(layer.conv_states[0], conv_states)
        self.assertExactlyEqual(conv_states, _conv_inputs(3 - KERNEL, KERNEL))

    def test_hybrid_layer_with_one_token_rolls_back_fully(self):
        layer = LinearAttentionAndFullAttentionLayer()
        layer.activate_past_recording()
        _fill(layer, 1)
        layer.update_conv_state(_conv_inputs(0, 1), conv_kernel_size=KERNEL)
        layer.update_recurrent_state(torch.ones(1, 2, 3, dtype=torch.float64))
        layer.has_previous_state[0] = True
        layer.crop(-1)
        self.assertEqual(layer.get_seq_length(), 0)
        self.assertFalse(layer.has_previous_state[0])
        self.assertEqual(layer.recurrent_states[0].abs().sum().item(), 0)

    def test_hybrid_sliding_layer_not_recording_is_not_croppable(self):
        # Its sliding window part could remove a token, its conv states could not
        layer = LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW)
        _fill(layer, 2)
        layer.update_conv_state(_conv_inputs(0, 2), conv_kernel_size=KERNEL)
        self.assertFalse(layer.is_croppable)
        with self.assertRaises(RuntimeError):
            layer.crop(-1)


@require_torch
class StaticLayersCropTest(CropTestCase):
    """Static layers move their write positions back, at most to the start, and zero the freed slots."""

    def _layer(self, layer_name):
        if layer_name == "sliding":
            return StaticSlidingWindowLayer(max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW)
        if layer_name == "indexed":
            return StaticIndexedLayer(max_cache_len=MAX_CACHE_LEN)
        if layer_name == "hybrid":
            layer = LinearAttentionAndStaticFullAttentionLayer(max_cache_len=MAX_CACHE_LEN)
            layer.activate_past_recording()
            return layer
        return StaticLayer(max_cache_len=MAX_CACHE_LEN)

    def assertLayerHolds(self, layer, length):
        self.assertEqual(int(layer.get_seq_length()), length)
        self.assertExactlyEqual(layer.keys[:, :, :length], _tokens(0, length))
        self.assertExactlyEqual(layer.values[:, :, :length], _tokens(0, length))
        if isinstance(layer, StaticSlidingWindowLayer):
            self.assertEqual(layer.get_mask_sizes(1), (WINDOW, max(length - WINDOW + 1, 0)))
            self.assertEqual(int(layer.cumulative_length), length)
        if isinstance(layer, StaticIndexedLayer):
            self.assertExactlyEqual(layer.indexer_keys[:, :length], _tokens(0, length)[:, 0])
            self.assertEqual(int(layer.indexer_cumulative_length), length)
            self.assertExactlyEqual(layer.indexer_position_ids, torch.arange(length).reshape(1, 1, -1))

    @parameterized.expand(
        [(layer_name, *case) for layer_name in ("static", "sliding", "indexed", "hybrid") for case in CROP_CASES]
    )
    def test_crop_keeps_the_right_tokens(self, layer_name, tokens_to_remove, expected_length):
        layer = self._layer(layer_name)
        _fill(layer, 3)
        if layer_name == "hybrid":
            layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
            tokens_to_remove = max(tokens_to_remove, -1) if expected_length else tokens_to_remove
            expected_length = 3 + tokens_to_remove if expected_length else 0
        counters = [getattr(layer, name, None) for name in ("cumulative_length", "indexer_cumulative_length")]
        layer.crop(tokens_to_remove)
        self.assertLayerHolds(layer, expected_length)
        # Static addresses: the counters move in place
        for counter, name in zip(counters, ("cumulative_length", "indexer_cumulative_length")):
            self.assertIs(getattr(layer, name, None), counter)

        # The next update lands right after the kept tokens
        _fill(layer, 1, start=expected_length)
        self.assertLayerHolds(layer, expected_length + 1)

    @parameterized.expand(
        [
            (name, crops)
            for name in ("static", "sliding", "hybrid", "hybrid_sliding")
            for crops in ((-1,), (-3,), (-5,), (-9,), (-5, 0), (-5, -1))
        ]
    )
    def test_crop_of_several_tokens_moves_the_counters_in_place(self, name, crops):
        make_layer = {
            "static": lambda: StaticLayer(max_cache_len=MAX_CACHE_LEN),
            "sliding": lambda: StaticSlidingWindowLayer(max_cache_len=WINDOW * 2, sliding_window=WINDOW * 2),
            "hybrid": lambda: LinearAttentionAndStaticFullAttentionLayer(max_cache_len=MAX_CACHE_LEN),
            "hybrid_sliding": lambda: LinearAttentionAndStaticSlidingWindowAttentionLayer(
                max_cache_len=MAX_CACHE_LEN, sliding_window=MAX_CACHE_LEN
            ),
        }[name]
        self.assertCropsLikeTheKeptTokens(make_layer, crops)

    def test_static_hybrid_sliding_layer_refuses_what_its_window_overwrote(self):
        # Recorded from the start: the conv states could remove the token, the window overwrote the ones to keep
        layer = LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=WINDOW, sliding_window=WINDOW)
        layer.activate_past_recording()
        for position in range(8):
            _hybrid_forward(layer, position, 1)
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "window"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)

    def test_static_hybrid_with_sliding_window_crops_its_attention_part(self):
        layer = LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=WINDOW, sliding_window=WINDOW)
        layer.activate_past_recording()
        _fill(layer, 3)
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        self.assertTrue(layer.is_croppable)
        layer.crop(-1)
        self.assertEqual(layer.get_seq_length(), 2)
        self.assertExactlyEqual(layer.keys[:, :, :2], _tokens(0, 2))
        self.assertExactlyEqual(layer.conv_states[0], _conv_inputs(0, KERNEL))

    @parameterized.expand([("static",), ("sliding",), ("indexed",)])
    def test_huge_removal_empties_silently(self, layer_name):
        layer = self._layer(layer_name)
        _fill(layer, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            layer.crop(-(2**70))
        self.assertLayerHolds(layer, 0)

    def test_huge_removal_from_a_static_cache(self):
        config = LlamaConfig(
            num_hidden_layers=2, hidden_size=8, num_attention_heads=1, num_key_value_heads=1, head_dim=1
        )
        cache = StaticCache(config=config, max_cache_len=8)
        for layer_idx in range(2):
            cache.update(_tokens(0, 3), _tokens(0, 3), layer_idx)
        cache.crop(-(2**70))
        self.assertEqual(int(cache.get_seq_length()), 0)

    def test_sliding_window_refuses_overwritten_tokens(self):
        layer = self._layer("sliding")
        _fill(layer, 6, step=1)
        self.assertFalse(layer.is_croppable)
        before = _snapshot(layer)
        with self.assertRaises(ValueError) as context:
            layer.crop(-1)
        self.assertIn("StaticSlidingWindowLayer", str(context.exception))
        self.assertIn("crop(-cache.get_seq_length())", str(context.exception))
        self.assertUnchanged(layer, before)

        layer.crop(-6)
        self.assertLayerHolds(layer, 0)
        _fill(layer, 2)
        self.assertLayerHolds(layer, 2)

    @parameterized.expand([("beyond_window", MAX_CACHE_LEN, 6), ("within_window", WINDOW, 3)])
    def test_is_croppable_tells_whether_crop_succeeds(self, _, max_cache_len, num_tokens):
        cache = Cache(layers=[StaticLayer(MAX_CACHE_LEN), StaticSlidingWindowLayer(max_cache_len, WINDOW)])
        for layer in cache.layers:
            _fill(layer, num_tokens, step=1)
        self.assertIsCroppableTellsWhetherCropSucceeds(cache)

    def test_is_croppable_while_within_the_window(self):
        layer = StaticSlidingWindowLayer(max_cache_len=WINDOW, sliding_window=WINDOW)
        _fill(layer, WINDOW)
        self.assertTrue(layer.is_croppable)
        _fill(layer, 1, start=WINDOW)
        self.assertFalse(layer.is_croppable)
        # One token beyond the window: the first one was overwritten, and keeping any token needs it
        with self.assertRaisesRegex(ValueError, "overwritten"):
            layer.crop(-1)

    def test_sliding_window_filled_to_its_size_crops(self):
        # Exactly full, never beyond: the states to keep are all there
        layer = StaticSlidingWindowLayer(max_cache_len=WINDOW, sliding_window=WINDOW)
        _fill(layer, WINDOW, step=1)
        layer.crop(-1)
        self.assertEqual(int(layer.get_seq_length()), WINDOW - 1)
        self.assertExactlyEqual(layer.keys[:, :, : WINDOW - 1], _tokens(0, WINDOW - 1))

    def test_sliding_window_beyond_its_window_removes_nothing(self):
        layer = StaticSlidingWindowLayer(max_cache_len=WINDOW, sliding_window=WINDOW)
        _fill(layer, WINDOW + 2, step=1)
        before = _snapshot(layer)
        layer.crop(0)
        self.assertUnchanged(layer, before)

    def test_static_hybrid_layer_with_recurrent_states_rolls_back_fully(self):
        layer = self._layer("hybrid")
        _fill(layer, 3)
        layer.update_conv_state(_conv_inputs(0, 3), conv_kernel_size=KERNEL)
        layer.update_recurrent_state(torch.ones(1, 2, 3, dtype=torch.float64))
        layer.crop(-3)
        self.assertLayerHolds(layer, 0)
        self.assertEqual(layer.recurrent_states[0].abs().sum().item(), 0)

    @parameterized.expand([("full",), ("sliding",)])
    def test_static_hybrid_layer_refusal_changes_no_layer_but_a_full_rollback_is_honoured(self, name):
        # `Cache.crop` reads the length of the static hybrid layer for its check
        if name == "full":
            hybrid = LinearAttentionAndStaticFullAttentionLayer(max_cache_len=MAX_CACHE_LEN)
        else:
            hybrid = LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=WINDOW, sliding_window=WINDOW)
        cache = Cache(layers=[StaticLayer(max_cache_len=MAX_CACHE_LEN), hybrid])
        self.assertRefusesPartialCropsButRollsBackFully(cache, hybrid)
        for layer in cache.layers:
            self.assertLayerHolds(layer, 0)

    @parameterized.expand([("full",), ("sliding",)])
    def test_static_hybrid_layer_keeps_its_first_token(self, name):
        if name == "full":
            self.assertHybridLayerKeepsItsFirstToken(
                lambda: LinearAttentionAndStaticFullAttentionLayer(max_cache_len=MAX_CACHE_LEN)
            )
        else:
            self.assertHybridLayerKeepsItsFirstToken(
                lambda: LinearAttentionAndStaticSlidingWindowAttentionLayer(
                    max_cache_len=MAX_CACHE_LEN, sliding_window=MAX_CACHE_LEN
                )
            )

    @parameterized.expand([("full",), ("sliding",)])
    def test_static_hybrid_layer_not_recording_is_not_croppable(self, name):
        if name == "full":
            layer = LinearAttentionAndStaticFullAttentionLayer(max_cache_len=MAX_CACHE_LEN)
        else:
            layer = LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=WINDOW, sliding_window=WINDOW)
        _fill(layer, 2)
        layer.update_conv_state(_conv_inputs(0, 2), conv_kernel_size=KERNEL)
        self.assertFalse(layer.is_croppable)
        # Its attention part could remove a token, its conv states could not: neither part changes
        before = _snapshot(layer)
        with self.assertRaisesRegex(RuntimeError, "does not record"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)


@require_torch
class QuantizedLayersCropTest(CropTestCase):
    """Quantized layers crop their quantized states and `cumulative_length`, or refuse."""

    def _dequantized(self, layer):
        """What the next update shows of the cached tokens."""
        if isinstance(layer, Fp8QuantizedLayer):
            return layer._dequantize(layer._quantized_keys)
        return torch.cat([layer._dequantize(layer._quantized_keys), layer.keys], dim=-2)

    def _fp8_layer(self):
        layer = Fp8QuantizedLayer()
        _fill(layer, 3)
        _fill(layer, 2, start=3, step=1)
        return layer

    def test_is_croppable_tells_whether_crop_succeeds(self):
        # A `QuantizedLayer` says False: whether it can remove a token depends on when its residual states are flushed
        self.assertIsCroppableTellsWhetherCropSucceeds(Cache(layers=[self._fp8_layer()]))

    @parameterized.expand([(0, 5), (-1, 4), (-4, 1), (-5, 0), (-9, 0)])
    def test_fp8_layer(self, tokens_to_remove, expected_length):
        layer = self._fp8_layer()
        before = self._dequantized(layer)
        self.assertTrue(layer.is_croppable)
        layer.crop(tokens_to_remove)
        self.assertEqual(layer.get_seq_length(), expected_length)
        self.assertEqual(layer.get_mask_sizes(1), (expected_length + 1, 0))
        if expected_length:
            self.assertExactlyEqual(self._dequantized(layer), before[..., :expected_length, :])
        keys, _ = layer.update(_tokens(expected_length, 1), _tokens(expected_length, 1))
        self.assertEqual(keys.shape[-2], expected_length + 1)
        self.assertEqual(layer.get_seq_length(), expected_length + 1)
        if expected_length == 0:
            # As on a new layer: the first update is returned as it is
            self.assertExactlyEqual(keys, _tokens(0, 1))

    def _residual_layer(self, layer_class=None, **kwargs):
        # 3 quantized tokens, then 2 residual ones (kept in original precision)
        layer = (layer_class or _exact_quantized_layer)(residual_length=4, **kwargs)
        _fill(layer, 3)
        _fill(layer, 2, start=3, step=1)
        return layer

    @parameterized.expand([(0, 5), (-1, 4), (-2, 3), (-5, 0), (-9, 0)])
    def test_quantized_layer(self, tokens_to_remove, expected_length):
        layer = self._residual_layer()
        layer.crop(tokens_to_remove)
        self.assertEqual(layer.get_seq_length(), expected_length)
        self.assertEqual(layer.get_mask_sizes(1), (expected_length + 1, 0))
        keys, _ = layer.update(_tokens(expected_length, 1), _tokens(expected_length, 1))
        self.assertExactlyEqual(keys, _tokens(0, expected_length + 1))
        self.assertEqual(layer.get_seq_length(), expected_length + 1)

    def test_quantized_layer_keeps_its_only_quantized_token(self):
        # Every token but the first is residual: removing them all but the first is not a full rollback
        layer = _exact_quantized_layer(residual_length=4)
        _fill(layer, 1)
        _fill(layer, 2, start=1, step=1)
        layer.crop(-2)
        self.assertEqual(layer.get_seq_length(), 1)
        keys, _ = layer.update(_tokens(1, 1), _tokens(1, 1))
        self.assertExactlyEqual(keys, _tokens(0, 2))

    def test_quantized_layer_refuses_quantized_tokens(self):
        layer = self._residual_layer()
        self.assertFalse(layer.is_croppable)
        before = _snapshot(layer)
        with self.assertRaises(ValueError) as context:
            layer.crop(-3)
        self.assertIn("ExactQuantizedLayer", str(context.exception))
        self.assertIn("only the last 2", str(context.exception))
        self.assertUnchanged(layer, before)

    @parameterized.expand([(-1, 4), (-2, 3)])
    def test_quantized_layer_crops_the_values_too(self, tokens_to_remove, expected_length):
        layer = self._residual_layer()
        layer.crop(tokens_to_remove)
        _, values = layer.update(_tokens(expected_length, 1), _tokens(expected_length, 1))
        self.assertExactlyEqual(values, _tokens(0, expected_length + 1))

    def test_fp8_layer_crops_the_values_too(self):
        layer = self._fp8_layer()
        self.assertIs(layer.is_croppable, True)
        before = layer._dequantize(layer._quantized_values)
        layer.crop(-2)
        self.assertExactlyEqual(layer._dequantize(layer._quantized_values), before[..., :3, :])

    def test_quantized_layer_with_an_empty_residual_part(self):
        # Right after the residual states were quantized, they are an empty tensor: every token is quantized
        layer = _exact_quantized_layer(residual_length=4)
        _fill(layer, 3)
        layer.crop(0)
        self.assertEqual(layer.get_seq_length(), 3)
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "only the last 0"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)

    def test_layer_of_another_backend_removes_nothing_or_everything(self):
        # A backend that keeps only quantized states, in a layout of its own: they cannot be cut
        class BackendQuantizedLayer(BaseQuantizedLayer):
            def _quantize(self, tensor):
                return tensor.clone()

            def _dequantize(self, q_tensor):
                return q_tensor

            def update(self, key_states, value_states, *args, **kwargs):
                self._quantized_keys, self._quantized_values = self._quantize(key_states), self._quantize(value_states)
                self.cumulative_length += key_states.shape[-2]
                return key_states, value_states

        layer = BackendQuantizedLayer()
        layer.update(_tokens(0, 3), _tokens(0, 3))
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "BackendQuantizedLayer"):
            layer.crop(-1)
        self.assertUnchanged(layer, before)
        with self.assertRaises(ValueError):
            layer.crop(-2)
        layer.crop(0)
        self.assertEqual(layer.get_seq_length(), 3)
        self.assertExactlyEqual(layer._quantized_keys, _tokens(0, 3))
        layer.crop(-3)
        self.assertEqual(layer.get_seq_length(), 0)
        self.assertIsNone(layer._quantized_keys)
        # Removing the only token removes everything
        layer.update(_tokens(0, 1), _tokens(0, 1))
        layer.crop(-1)
        self.assertEqual(layer.get_seq_length(), 0)
        self.assertIsNone(layer._quantized_keys)

    @unittest.skipUnless(is_optimum_quanto_available(), "needs optimum-quanto")
    def test_quanto_layer(self):
        layer = self._residual_layer(QuantoQuantizedLayer, q_group_size=1)
        before = self._dequantized(layer)
        layer.crop(-1)
        self.assertEqual(layer.get_seq_length(), 4)
        self.assertExactlyEqual(self._dequantized(layer), before[..., :4, :])
        with self.assertRaises(ValueError):
            layer.crop(-2)
        layer.crop(-4)
        self.assertEqual(layer.get_seq_length(), 0)
        keys, _ = layer.update(_tokens(0, 2), _tokens(0, 2))
        self.assertExactlyEqual(keys, _tokens(0, 2))


@require_torch
class ModelCacheLayersCropTest(CropTestCase):
    """The cache layers of DeepSeek-V4, MiniMax-M3-VL and UnlimitedOcr crop their own states too, or refuse."""

    def _deepseek_layer(self, layer_class):
        config = DeepseekV4Config(
            sliding_window=WINDOW,
            compress_rates={"heavily_compressed_attention": 2, "compressed_sparse_attention": 2},
        )
        layer = layer_class(config)
        _fill(layer, 3)
        # The compressor closes a window of 2 tokens (one entry) and buffers the third token
        source = _tokens(0, 3).reshape(1, 3, 1, 1)
        chunk, chunk_gate, _ = layer.store_compression_weights("compressor", source, source.clone())
        if layer_class is DeepseekV4CSACache:
            layer.update_overlap_state("compressor", chunk.reshape(1, 1, 2, 1), chunk_gate.reshape(1, 1, 2, 1), 1)
        layer.update_compressor_states("compressor", chunk[:, :1])
        return layer

    @parameterized.expand([("hca", "DeepseekV4HCACache"), ("csa", "DeepseekV4CSACache")])
    def test_deepseek_v4_compressor_rolls_back_with_the_window(self, _, class_name):
        layer_class = DeepseekV4HCACache if class_name == "DeepseekV4HCACache" else DeepseekV4CSACache
        layer = self._deepseek_layer(layer_class)
        self.assertFalse(layer.is_croppable)

        layer.crop(-1)
        self.assertEqual(layer.get_seq_length(), 2)
        self.assertExactlyEqual(layer.keys, _tokens(0, 2))
        self.assertIs(layer.values, layer.keys)
        self.assertEqual(layer.buffer_kv["compressor"].shape[1], 0)
        self.assertEqual(layer.entry_count["compressor"], 1)
        # The new third token is buffered alone, right after the closed window
        source = _tokens(2, 1).reshape(1, 1, 1, 1)
        chunk, _, first_window_position = layer.store_compression_weights("compressor", source, source.clone())
        self.assertEqual((chunk.shape[1], first_window_position), (0, 2))
        self.assertExactlyEqual(layer.buffer_kv["compressor"], source)

    @parameterized.expand([("hca",), ("csa",)])
    def test_deepseek_v4_refuses_closed_windows_and_rolls_back_fully(self, name):
        layer = self._deepseek_layer(DeepseekV4HCACache if name == "hca" else DeepseekV4CSACache)
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "already compressed"):
            layer.crop(-2)
        self.assertUnchanged(layer, before)

        layer.crop(-5)
        self.assertEqual(layer.get_seq_length(), 0)
        self.assertEqual(layer.entry_count["compressor"], 0)
        self.assertIsNone(layer.compressed_kv["compressor"])
        self.assertIsNone(layer.buffer_kv["compressor"])
        if name == "csa":
            self.assertIsNone(layer.overlap_kv["compressor"])
        self.assertTrue(layer.is_croppable)

    def _deepseek_layer_with_a_long_buffer(self):
        # A window of 8, a compressor closing windows of 4 tokens: of 6 tokens, 4 are compressed and 2 buffered
        config = DeepseekV4Config(
            sliding_window=8,
            compress_rates={"heavily_compressed_attention": 4, "compressed_sparse_attention": 4},
        )
        layer = DeepseekV4HCACache(config)
        _fill(layer, 6)
        source = _tokens(0, 6).reshape(1, 6, 1, 1)
        chunk, _, _ = layer.store_compression_weights("compressor", source, source.clone())
        layer.update_compressor_states("compressor", chunk[:, :1])
        return layer

    def test_deepseek_v4_rolls_back_buffered_tokens(self):
        layer = self._deepseek_layer_with_a_long_buffer()
        self.assertEqual(layer.buffer_kv["compressor"].shape[1], 2)
        before = _snapshot(layer)
        with self.assertRaisesRegex(ValueError, "only buffers the last 2"):
            layer.crop(-3)
        self.assertUnchanged(layer, before)

        layer.crop(-1)
        self.assertEqual(layer.get_seq_length(), 5)
        self.assertExactlyEqual(layer.buffer_kv["compressor"], _tokens(4, 1).reshape(1, 1, 1, 1))
        self.assertEqual(layer.buffer_gate["compressor"].shape[1], 1)
        layer.crop(-1)
        self.assertEqual(layer.buffer_kv["compressor"].shape[1], 0)
        self.assertEqual(layer.entry_count["compressor"], 1)
        # Every buffered token is removed: the next one was compressed, but all of them can go
        with self.assertRaisesRegex(ValueError, "already compressed"):
            layer.crop(-1)
        layer.crop(-4)
        self.assertEqual(layer.get_seq_length(), 0)
        self.assertEqual(layer.entry_count["compressor"], 0)

    def test_deepseek_v4_is_not_croppable_once_its_window_is_full(self):
        config = DeepseekV4Config(
            sliding_window=WINDOW,
            compress_rates={"heavily_compressed_attention": 8, "compressed_sparse_attention": 8},
        )
        layer = DeepseekV4HCACache(config)
        _fill(layer, WINDOW - 1, step=1)
        self.assertTrue(layer.is_croppable)
        _fill(layer, 1, start=WINDOW - 1)
        self.assertFalse(layer.is_croppable)
        with self.assertRaises(ValueError):
            layer.crop(-1)

    def test_deepseek_v4_assistant_cache_is_emptied_after_each_round(self):
        # As an assistant, DeepSeek-V4's compressed layers (a window of 4, overflowed by the prompt) cannot remove the
        # rejected drafts: every round empties their window and compressor states, and assisted decoding stays greedy
        config = DeepseekV4Config(
            **AssistedDecodingCropTest.COMMON,
            moe_intermediate_size=16,
            num_hidden_layers=2,
            q_lora_rank=16,
            o_lora_rank=16,
            index_n_heads=2,
            index_head_dim=8,
            index_topk=4,
            n_routed_experts=2,
            num_experts_per_tok=1,
            layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
            compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
            sliding_window=4,
            experts_implementation="eager",  # float64
        )
        assistant = DeepseekV4ForCausalLM(config).to(torch.float64).eval()
        assistant.generation_config.num_assistant_tokens = 3
        assistant.generation_config.assistant_confidence_threshold = 0.0
        main_model = AssistedDecodingCropTest._models()[0].to(torch.float64)
        input_ids = torch.tensor([[5, 9, 2, 7, 1, 3]])
        kwargs = {"max_new_tokens": 8, "do_sample": False}
        greedy = main_model.generate(input_ids, **kwargs)

        rounds = []
        original_update = AssistedCandidateGenerator._update_past_and_masks

        def update_past_and_masks(generator, *args, **kwargs):
            has_cache = original_update(generator, *args, **kwargs)
            if has_cache:
                for layer in generator.assistant_kwargs["cache"].layers:
                    states = [*layer.buffer_kv.values(), *layer.compressed_kv.values()]
                    rounds.append(
                        (layer.get_seq_length(), sum(layer.entry_count.values()), all(s is None for s in states))
                    )
            return has_cache

        with mock.patch.object(AssistedCandidateGenerator, "_update_past_and_masks", update_past_and_masks):
            assisted = main_model.generate(input_ids, assistant_model=assistant, **kwargs)
        self.assertEqual(assisted.tolist(), greedy.tolist())
        self.assertGreater(len(rounds), 2)
        self.assertEqual(set(rounds), {(0, 0, True)})  # no token, no compressed entry, no compressor state

    @parameterized.expand(CROP_CASES)
    def test_minimax_m3_vl_index_keys_move_with_the_states(self, tokens_to_remove, expected_length):
        layer = MiniMaxM3VLSparseCacheLayer()
        _fill(layer, 3)
        layer.update_index(_tokens(0, 3))
        layer.crop(tokens_to_remove)
        self.assertExactlyEqual(layer.keys, _tokens(0, expected_length))
        self.assertExactlyEqual(layer.idx_keys, _tokens(0, expected_length))
        self.assertExactlyEqual(layer.update_index(_tokens(expected_length, 1)), _tokens(0, expected_length + 1))

    def test_minimax_m3_vl_layer_without_index_keys(self):
        layer = MiniMaxM3VLSparseCacheLayer()
        _fill(layer, 3)
        layer.crop(-1)
        self.assertIsNone(layer.idx_keys)
        self.assertEqual(layer.get_seq_length(), 2)

    @parameterized.expand(CROP_CASES)
    def test_minimax_m3_vl_static_index_keys_move_with_the_states(self, tokens_to_remove, expected_length):
        layer = MiniMaxM3VLSparseStaticCacheLayer(max_cache_len=MAX_CACHE_LEN)
        _fill(layer, 3)
        layer.update_index(_tokens(0, 3))
        index_position = layer.idx_cumulative_length
        layer.crop(tokens_to_remove)
        self.assertEqual(int(layer.get_seq_length()), expected_length)
        # A static address: moved in place
        self.assertIs(layer.idx_cumulative_length, index_position)
        self.assertEqual(int(layer.idx_cumulative_length), expected_length)
        self.assertExactlyEqual(layer.keys[:, :, :expected_length], _tokens(0, expected_length))
        self.assertExactlyEqual(layer.idx_keys[:, :, :expected_length], _tokens(0, expected_length))
        _fill(layer, 1, start=expected_length)
        self.assertExactlyEqual(
            layer.update_index(_tokens(expected_length, 1))[:, :, : expected_length + 1],
            _tokens(0, expected_length + 1),
        )
        self.assertExactlyEqual(layer.keys[:, :, : expected_length + 1], _tokens(0, expected_length + 1))

    def test_minimax_m3_vl_static_index_keys_behind_the_keys_are_left_alone(self):
        layer = MiniMaxM3VLSparseStaticCacheLayer(max_cache_len=MAX_CACHE_LEN)
        _fill(layer, 3)
        layer.update_index(_tokens(0, 1))
        layer.crop(-1)
        self.assertEqual(int(layer.get_seq_length()), 2)
        self.assertEqual(int(layer.idx_cumulative_length), 1)
        self.assertExactlyEqual(layer.idx_keys[:, :, :1], _tokens(0, 1))

    def _reference_sliding_layer(self, is_static):
        if is_static:
            layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW)
        else:
            layer = UnlimitedOcrDynamicReferenceSlidingWindowLayer(sliding_window=WINDOW)
        # A prefill of 3 (reference) tokens, then 2 decoded ones in the sliding window
        _fill(layer, 3)
        _fill(layer, 2, start=3, step=1)
        return layer

    @parameterized.expand(
        [(is_static, *case) for is_static in (False, True) for case in [(0, 5), (-1, 4), (-3, 2), (-9, 0)]]
    )
    def test_unlimited_ocr_reference_sliding_layers(self, is_static, tokens_to_remove, expected_length):
        layer = self._reference_sliding_layer(is_static)
        layer.crop(tokens_to_remove)
        self.assertEqual(layer.get_seq_length(), expected_length)
        prefill_length = min(expected_length, 3)
        self.assertEqual(layer.prefill_cumulative_length, prefill_length)
        if is_static:
            self.assertEqual(int(layer.cumulative_length), expected_length - prefill_length)
            self.assertExactlyEqual(layer.prefill_keys[..., :prefill_length, :], _tokens(0, prefill_length))
            self.assertEqual(layer.all_keys[..., prefill_length:3, :].abs().sum().item(), 0)
            # The freed sliding slots are cleared too
            self.assertEqual(layer.keys[..., expected_length - prefill_length :, :].abs().sum().item(), 0)
        else:
            self.assertExactlyEqual(layer.prefill_keys, _tokens(0, prefill_length))
            self.assertExactlyEqual(layer.keys, _tokens(3, expected_length - prefill_length))
        self.assertExactlyEqual(layer.prefill_values, layer.prefill_keys)
        self.assertExactlyEqual(layer.values, layer.keys)

        # The next token lands right after the kept ones: in the prefill if it was cut, else in the sliding window
        keys, _ = layer.update(_tokens(expected_length, 1), _tokens(expected_length, 1))
        self.assertEqual(layer.get_seq_length(), expected_length + 1)
        self.assertExactlyEqual(keys[..., : expected_length + 1, :], _tokens(0, expected_length + 1))

    @parameterized.expand([(False,), (True,)])
    def test_unlimited_ocr_refuses_tokens_its_window_dropped(self, is_static):
        layer = self._reference_sliding_layer(is_static)
        # 5 more decoded tokens: beyond the sliding window
        _fill(layer, 5, start=5, step=1)
        before = _snapshot(layer)
        with self.assertRaises(ValueError):
            layer.crop(-1)
        self.assertUnchanged(layer, before)

    def test_unlimited_ocr_static_layer_is_croppable_while_within_its_window(self):
        # 3 prefill slots, 4 sliding window slots
        layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=7, sliding_window=WINDOW)
        self.assertIs(layer.is_croppable, False)
        _fill(layer, 3)
        _fill(layer, WINDOW, start=3, step=1)
        self.assertIs(layer.is_croppable, True)
        # Exactly full: the kept tokens are all there
        layer.crop(-1)
        self.assertExactlyEqual(layer.keys[:, :, : WINDOW - 1], _tokens(3, WINDOW - 1))
        _fill(layer, 2, start=2 + WINDOW, step=1)
        self.assertIs(layer.is_croppable, False)


@require_torch
class AssistedDecodingCropTest(unittest.TestCase):
    """Assisted decoding rolls the assistant cache back to the tokens it keeps, or fully if a layer refuses."""

    COMMON = {
        "vocab_size": 32,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "pad_token_id": 0,
        "bos_token_id": None,
        "eos_token_id": None,
    }

    @staticmethod
    def _models():
        torch.manual_seed(0)
        common = AssistedDecodingCropTest.COMMON
        main_model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **common)).eval()
        assistants = {
            "attention": LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **common)).eval(),
            # Gated delta net layers hold recurrent states, which cannot remove the rejected tokens
            "linear_attention": Qwen3NextForCausalLM(
                Qwen3NextConfig(
                    num_hidden_layers=2,
                    layer_types=["linear_attention", "full_attention"],
                    linear_num_value_heads=2,
                    linear_num_key_heads=1,
                    linear_key_head_dim=8,
                    linear_value_head_dim=8,
                    linear_conv_kernel_dim=2,
                    num_experts=2,
                    num_experts_per_tok=1,
                    moe_intermediate_size=16,
                    shared_expert_intermediate_size=16,
                    **common,
                )
            ).eval(),
            # Short convolution layers hold conv states only, which remove the rejected tokens
            "conv": Lfm2ForCausalLM(
                Lfm2Config(num_hidden_layers=2, layer_types=["conv", "full_attention"], conv_L_cache=3, **common)
            ).eval(),
        }
        return main_model, assistants

    @parameterized.expand(
        [
            ("attention", [5]),
            ("attention", [5, 6, 7, 8]),
            ("linear_attention", [5]),
            ("linear_attention", [5, 6, 7, 8]),
        ]
    )
    def test_assisted_generation_matches_greedy(self, assistant_name, prompt):
        main_model, assistants = self._models()
        input_ids = torch.tensor([prompt])
        greedy = main_model.generate(input_ids, max_new_tokens=8, do_sample=False)
        assisted = main_model.generate(
            input_ids, max_new_tokens=8, do_sample=False, assistant_model=assistants[assistant_name]
        )
        self.assertEqual(assisted.tolist(), greedy.tolist())

    @parameterized.expand([("attention", [5]), ("attention", [5, 6, 7, 8]), ("linear_attention", [5, 6, 7, 8])])
    def test_assistant_cache_keeps_the_accepted_tokens(self, assistant_name, prompt):
        _, assistants = self._models()
        input_ids = torch.tensor([prompt])
        # The assistant drafts 4 tokens per round, whatever its confidence
        assistant = assistants[assistant_name]
        assistant.generation_config.num_assistant_tokens = 4
        assistant.generation_config.assistant_confidence_threshold = 0.0
        generation_config = GenerationConfig(max_length=32, min_length=0, do_sample=False)
        generator = AssistedCandidateGenerator(input_ids, assistant, generation_config, {})
        candidates, _ = generator.get_candidates(input_ids)
        self.assertEqual(candidates.shape[-1], len(prompt) + 4)

        # The main model accepts one candidate and corrects the next one: the assistant keeps every token but the
        # newest one (which it has not processed), or rolls back fully when its layers cannot remove a few tokens
        accepted = torch.cat([candidates[:, : len(prompt) + 1], torch.tensor([[31]])], dim=-1)
        generator._update_past_and_masks(accepted)
        cache = generator.assistant_kwargs["cache"]
        if assistant_name == "attention":
            expected_length = accepted.shape[-1] - 2
        elif hasattr(cache.layers[0], "history"):
            # Recurrent states with a history (see `LinearAttentionHistoryTest`): only the rejected drafts are removed
            expected_length = accepted.shape[-1] - 1
        else:
            expected_length = 0
        self.assertEqual(cache.get_seq_length(), expected_length)

        candidates, _ = generator.get_candidates(accepted)
        self.assertEqual(candidates[:, : accepted.shape[-1]].tolist(), accepted.tolist())

    @staticmethod
    def _generator(assistant, input_ids, model_kwargs=None):
        # The assistant drafts 4 tokens per round, whatever its confidence
        assistant.generation_config.num_assistant_tokens = 4
        assistant.generation_config.assistant_confidence_threshold = 0.0
        generation_config = GenerationConfig(max_length=32, min_length=0, do_sample=False)
        return AssistedCandidateGenerator(input_ids, assistant, generation_config, model_kwargs or {})

    def test_sliding_window_assistant_cache_after_each_round(self):
        # A window of 3, full from the prompt on: each round removes the rejected drafts (none, 2 or 3 of 4) and the
        # assistant keeps every accepted token but the last two (the correction and the token before it, re-encoded)
        config = MistralConfig(**self.COMMON, num_hidden_layers=1, sliding_window=3)
        assistant = MistralForCausalLM(config).to(torch.float64).eval()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = self._generator(assistant, input_ids)
        for num_accepted in (1, 2, 4, 0):
            candidates, _ = generator.get_candidates(input_ids)
            input_ids = torch.cat([candidates[:, : input_ids.shape[-1] + num_accepted], torch.tensor([[31]])], dim=-1)
            generator._update_past_and_masks(input_ids)
            layer = generator.assistant_kwargs["cache"].layers[0]
            length = input_ids.shape[-1] - 2
            self.assertEqual(layer.get_seq_length(), length)
            # The tokens the window stores are the last ones of the kept tokens, as a fresh forward computes them
            fresh = assistant(input_ids[:, :length], past_key_values=DynamicCache()).past_key_values.layers[0]
            stored = layer.keys.shape[-2]
            self.assertGreaterEqual(stored, 2)
            torch.testing.assert_close(layer.keys, fresh.keys[..., length - stored :, :])
            torch.testing.assert_close(layer.values, fresh.values[..., length - stored :, :])

    @parameterized.expand([("linear_attention",), ("conv",)])
    def test_assistant_states_are_restricted_when_every_draft_is_accepted(self, assistant_name):
        _, assistants = self._models()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = self._generator(assistants[assistant_name], input_ids)
        candidates, _ = generator.get_candidates(input_ids)
        # Every draft is accepted, and the main model adds one token: nothing to remove, but the conv states recorded
        # during the round are dropped (`crop(0)`), back to the kernel size
        accepted = torch.cat([candidates, torch.tensor([[31]])], dim=-1)
        generator._update_past_and_masks(accepted)
        cache = generator.assistant_kwargs["cache"]
        self.assertEqual(cache.get_seq_length(), accepted.shape[-1] - 2)
        linear_layer = cache.layers[0]
        self.assertEqual(linear_layer.conv_states[0].shape[-1], linear_layer.conv_kernel_size[0])

    def test_assistant_attention_mask_follows_the_accepted_tokens(self):
        _, assistants = self._models()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        # A left-padded prompt: the padding stays masked for the assistant
        attention_mask = torch.tensor([[0, 1, 1, 1]])
        generator = self._generator(assistants["attention"], input_ids, {"attention_mask": attention_mask})
        candidates, _ = generator.get_candidates(input_ids)
        accepted = torch.cat([candidates[:, :5], torch.tensor([[31]])], dim=-1)
        # Position and token type ids, as a model that takes them would have them
        length = generator.assistant_kwargs["attention_mask"].shape[-1]
        generator.assistant_kwargs["position_ids"] = torch.arange(length).unsqueeze(0)
        generator.assistant_kwargs["token_type_ids"] = torch.zeros(1, length, dtype=torch.long)
        generator._update_past_and_masks(accepted)
        self.assertEqual(generator.assistant_kwargs["attention_mask"].tolist(), [[0, 1, 1, 1, 1, 1]])
        self.assertEqual(generator.assistant_kwargs["position_ids"].tolist(), [[0, 1, 2, 3, 4, 5]])
        self.assertEqual(generator.assistant_kwargs["token_type_ids"].tolist(), [[0] * 6])

    def test_assistant_cache_removes_the_tokens_to_re_encode(self):
        # `remove_from_pkv`: tokens whose cached states the assistant must compute again (e.g. retokenized ones)
        _, assistants = self._models()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = self._generator(assistants["attention"], input_ids)
        candidates, _ = generator.get_candidates(input_ids)
        accepted = torch.cat([candidates[:, :5], torch.tensor([[31]])], dim=-1)
        generator._update_past_and_masks(accepted, remove_from_pkv=2)
        self.assertEqual(generator.assistant_kwargs["cache"].get_seq_length(), accepted.shape[-1] - 4)

    def test_assistant_cache_behind_the_accepted_tokens_is_kept(self):
        # The assistant has not processed the last accepted tokens yet: nothing to remove, it processes them next
        _, assistants = self._models()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = self._generator(assistants["attention"], input_ids)
        candidates, _ = generator.get_candidates(input_ids)
        cache = generator.assistant_kwargs["cache"]
        cached_length = cache.get_seq_length()
        accepted = torch.cat([candidates, torch.tensor([[30, 31]])], dim=-1)
        self.assertEqual(accepted.shape[-1] - 2, cached_length + 1)
        generator._update_past_and_masks(accepted)
        self.assertEqual(cache.get_seq_length(), cached_length)

    @parameterized.expand([("attention",), ("linear_attention",)])
    def test_assistant_cache_keeps_no_token_to_add(self, assistant_name):
        # `num_added_tokens`: the last tokens of `input_ids` are new to the assistant, which processes them next
        _, assistants = self._models()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = self._generator(assistants[assistant_name], input_ids)
        candidates, _ = generator.get_candidates(input_ids)
        accepted = torch.cat([candidates[:, :5], torch.tensor([[31]])], dim=-1)
        generator._update_past_and_masks(accepted, num_added_tokens=2)
        cache_length = generator.assistant_kwargs["cache"].get_seq_length()
        # Linear attention layers cannot remove these tokens exactly (they are not the drafts of an update): the
        # assistant cache is rolled back fully
        self.assertEqual(cache_length, accepted.shape[-1] - 3 if assistant_name == "attention" else 0)


# Linear attention history: a model-like forward pass over a cache made of one linear attention layer (a causal conv
# of `HISTORY_KERNEL_SIZE` and a recurrent state that sums the tokens, like a gated delta rule without decay) and one
# attention layer. While the cache records its past, 5.24's models hand every update of the conv states to
# `update_conv_state` (new tokens only); the recurrent states are handed over as a new tensor, or written in place by a
# single-token kernel (Mamba2's `selective_state_update`). Token values are small integers in float64: every state is
# exact.
HISTORY_KERNEL_SIZE = 3


def _linear_forward(cache, token_values, in_place_recurrent=False):
    tokens = torch.tensor(token_values, dtype=torch.float64).reshape(1, 1, -1).expand(1, 2, -1)
    for layer_idx, layer in enumerate(cache.layers):
        if not isinstance(layer, LinearAttentionLayer):
            keys = tokens[:, :1, :, None]
            cache.update(keys, keys.clone(), layer_idx)
            continue
        has_previous_state = cache.has_previous_state(layer_idx)
        cache.update_conv_state(tokens.clone(), layer_idx=layer_idx, conv_kernel_size=HISTORY_KERNEL_SIZE)
        if has_previous_state and in_place_recurrent and len(token_values) == 1:
            layer.recurrent_states[0].add_(tokens.sum(dim=-1))
        elif has_previous_state:
            cache.update_recurrent_state(layer.recurrent_states[0] + tokens.sum(dim=-1), layer_idx=layer_idx)
        else:
            cache.update_recurrent_state(tokens.sum(dim=-1), layer_idx=layer_idx)


def _history_cache(linear_first=True, history_length=None, attention_layer=True):
    layers = [LinearAttentionLayer(), DynamicLayer()] if attention_layer else [LinearAttentionLayer()]
    cache = Cache(layers=layers if linear_first else layers[::-1])
    if history_length is None:
        cache.activate_past_recording()
    else:
        cache.activate_past_recording(history_length=history_length)
    return cache


def _linear_states(cache):
    """The conv states the next forward pass uses (the last `HISTORY_KERNEL_SIZE`, left-padded), and the recurrent
    states."""
    layer = next(layer for layer in cache.layers if isinstance(layer, LinearAttentionLayer))
    conv_states = layer.conv_states[0]
    conv_states = torch.nn.functional.pad(conv_states, (max(HISTORY_KERNEL_SIZE - conv_states.shape[-1], 0), 0))
    return conv_states[..., -HISTORY_KERNEL_SIZE:].tolist(), layer.recurrent_states[0].tolist()


def _expected_linear_states(token_values):
    """The states of a fresh cache after one forward pass over `token_values`."""
    cache = _history_cache()
    _linear_forward(cache, token_values)
    return _linear_states(cache)


@require_torch
class LinearAttentionHistoryTest(unittest.TestCase):
    @parameterized.expand([(True,), (False,)])
    def test_crop_restores_the_states_before_the_last_updates(self, linear_first):
        # A prompt of 4 tokens, then 4 drafted tokens, one per forward pass (like an assistant model)
        tokens = [1, 2, 3, 4, 5, 6, 7, 8]
        for tokens_to_remove in range(1, 5):
            cache = _history_cache(linear_first, history_length=5)
            _linear_forward(cache, tokens[:4])
            for token in tokens[4:]:
                _linear_forward(cache, [token])

            cache.crop(-tokens_to_remove)
            kept = tokens[: len(tokens) - tokens_to_remove]
            self.assertEqual(cache.get_seq_length(), len(kept))
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept))

            # The cache goes on from there: two tokens at once, then one
            _linear_forward(cache, [9, 10])
            _linear_forward(cache, [11])
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept + [9, 10, 11]))
            # And can be rolled back again, by the tokens of one or of both updates
            cache.crop(-3)
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept))

    @parameterized.expand([(3, [1, 2, 3, 4]), (4, [1, 2, 3]), (7, []), (100, [])])
    def test_qwen3_next_like_cache_rolls_back_whole_updates(self, tokens_to_remove, kept):
        # Qwen3-Next's layout: a linear attention layer first, then attention layers; a prompt, one decoded token, then
        # a verification of 3 tokens: removing the tokens of the last updates restores the cache of the kept tokens
        config = Qwen3NextConfig(num_hidden_layers=4, layer_types=["linear_attention"] + ["full_attention"] * 3)
        cache = DynamicCache(config=config)
        cache.activate_past_recording(history_length=3)
        for token_values in ([1, 2, 3], [4], [5, 6, 7]):
            _linear_forward(cache, token_values)
        cache.crop(-tokens_to_remove)
        self.assertEqual(cache.get_seq_length(), len(kept))
        if kept:
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept))
        else:
            self.assertFalse(cache.layers[0].has_previous_state[0])
        # The next forward goes on from the kept tokens (a new sequence after a full rollback)
        _linear_forward(cache, [9, 10])
        self.assertEqual(_linear_states(cache), _expected_linear_states(kept + [9, 10]))
        expected_keys = torch.tensor(kept + [9, 10], dtype=torch.float64).reshape(1, 1, -1, 1)
        for layer in cache.layers[1:]:
            self.assertEqual(layer.keys.tolist(), expected_keys.tolist())

    def test_exact_states_values(self):
        cache = _history_cache(history_length=3)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        _linear_forward(cache, [4])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), ([[[1.0, 2.0, 3.0]] * 2], [[6.0, 6.0]]))
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), ([[[0.0, 1.0, 2.0]] * 2], [[3.0, 3.0]]))
        # `crop(0)` removes nothing
        cache.crop(0)
        self.assertEqual(_linear_states(cache), ([[[0.0, 1.0, 2.0]] * 2], [[3.0, 3.0]]))

    @parameterized.expand([(-2,), (-4,)])
    def test_crop_within_an_update_raises_and_changes_nothing(self, tokens_to_remove):
        cache = _history_cache(history_length=5)
        _linear_forward(cache, [1, 2, 3])
        _linear_forward(cache, [4, 5])
        _linear_forward(cache, [6])
        before = _linear_states(cache)

        # The last updates added 1, then 2, then 3 tokens: 1, 3 or 6 tokens can be removed, but not 2 or 4
        with self.assertRaises(RuntimeError) as context:
            cache.crop(tokens_to_remove)
        message = str(context.exception)
        self.assertIn("LinearAttentionLayer", message)
        self.assertIn("[3, 2, 1]", message)
        self.assertIn("crop(-cache.get_seq_length())", message)
        self.assertEqual(cache.get_seq_length(), 6)
        self.assertEqual(_linear_states(cache), before)

        cache.crop(-3)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2, 3]))

    def test_history_is_bounded(self):
        cache = _history_cache(history_length=2)
        _linear_forward(cache, [1, 2])
        for token in [3, 4, 5, 6]:
            _linear_forward(cache, [token])
        layer = cache.layers[0]
        self.assertEqual(len(layer.history), 2)

        with self.assertRaises(RuntimeError):
            cache.crop(-3)
        cache.crop(-2)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2, 3, 4]))
        self.assertEqual(len(layer.history), 0)
        with self.assertRaises(RuntimeError):
            cache.crop(-1)

    def test_full_rollback_resets_and_clears_the_history(self):
        cache = _history_cache(history_length=3)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        kept_recurrent_states = cache.layers[0].history[-1][3]
        cache.crop(-3)
        layer = cache.layers[0]
        self.assertEqual(cache.get_seq_length(), 0)
        self.assertFalse(layer.has_previous_state[0])
        self.assertEqual(len(layer.history), 0)
        self.assertEqual(layer.recurrent_states[0].abs().sum().item(), 0)
        # The tensors the model handed over are replaced, never zeroed
        self.assertEqual(kept_recurrent_states.tolist(), [[3.0, 3.0]])

        # A new prompt, then a rollback within it
        _linear_forward(cache, [5, 6])
        _linear_forward(cache, [7])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), _expected_linear_states([5, 6]))

    def test_states_are_kept_without_copy(self):
        cache = _history_cache(history_length=3)
        layer = cache.layers[0]
        _linear_forward(cache, [1, 2])
        conv_states, recurrent_states = layer.conv_states[0], layer.recurrent_states[0]
        _linear_forward(cache, [3])
        # The history holds the very tensors of before the update: the model handed over new ones
        num_tokens, kept_conv_states, _, kept_recurrent_states, _ = layer.history[-1]
        self.assertEqual(num_tokens, 1)
        self.assertIs(kept_conv_states, conv_states)
        self.assertIs(kept_recurrent_states, recurrent_states)

    def test_recurrent_states_written_in_place_are_copied_once_noticed(self):
        cache = _history_cache(history_length=4)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3], in_place_recurrent=True)
        before = _linear_states(cache)
        # The states before the update were written in place: they cannot be restored, and nothing changes
        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("recurrent states", str(context.exception))
        self.assertEqual(_linear_states(cache), before)

        # From the next update on, the layer copies them
        _linear_forward(cache, [4], in_place_recurrent=True)
        _linear_forward(cache, [5], in_place_recurrent=True)
        self.assertIsNot(cache.layers[0].history[-1][3], cache.layers[0].recurrent_states[0])
        cache.crop(-2)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2, 3]))
        with self.assertRaises(RuntimeError):
            cache.crop(-1)

    @parameterized.expand([("recorded", True), ("not_recorded", False)])
    def test_without_history_recurrent_states_cannot_be_rolled_back(self, _, record_past):
        # Without recording the conv states refuse too: the error names what makes the crop possible, a history
        cache = _history_cache() if record_past else Cache(layers=[LinearAttentionLayer(), DynamicLayer()])
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        self.assertFalse(cache.is_croppable)
        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("history_length", str(context.exception))

    def test_conv_only_layers_keep_no_history(self):
        cache = Cache(layers=[LinearAttentionLayer(), DynamicLayer()])
        cache.activate_past_recording(history_length=4)
        layer = cache.layers[0]
        for token_values in ([1, 2, 3, 4], [5], [6]):
            tokens = torch.tensor(token_values, dtype=torch.float64).reshape(1, 1, -1)
            cache.update_conv_state(tokens, layer_idx=0, conv_kernel_size=HISTORY_KERNEL_SIZE)
            cache.update(tokens[:, :, :, None], tokens[:, :, :, None], 1)
        self.assertEqual(len(layer.history), 0)
        self.assertTrue(cache.is_croppable)
        # Their recorded conv states roll back by any number of recorded tokens
        cache.crop(-2)
        self.assertEqual(layer.conv_states[0].tolist(), [[[2.0, 3.0, 4.0]]])

    @parameterized.expand(
        [(kind, removal) for kind in ("conv", "recurrent") for removal in ("-3", "-5", "numpy", "tensor", "-2**70")]
    )
    def test_layer_recording_from_its_first_token_is_emptied_by_removing_them_all(self, kind, removal):
        """A layer that recorded every token it holds knows their number: removing them all (or more, as any integer)
        empties it, as a full rollback of the cache does, without a history."""
        removal = {"numpy": np.int64(-5), "tensor": torch.tensor(-5), "-2**70": -(2**70)}.get(removal, removal)
        layer = LinearAttentionLayer()
        layer.activate_past_recording()
        layer.update_conv_state(torch.tensor([[[1.0, 2.0, 3.0]]]), conv_kernel_size=2)
        if kind == "recurrent":
            layer.update_recurrent_state(torch.ones(1, 1))
        layer.crop(int(removal) if isinstance(removal, str) else removal)
        self.assertFalse(layer.has_previous_state[0])
        # The next tokens start a new sequence, as in a layer that never saw the removed ones
        self.assertEqual(layer.update_conv_state(torch.tensor([[[9.0]]]), conv_kernel_size=2).tolist(), [[[9.0]]])

    def test_is_croppable_with_history(self):
        cache = _history_cache(history_length=2)
        _linear_forward(cache, [1, 2])
        self.assertTrue(cache.is_croppable)

    def test_states_created_under_inference_mode_are_not_trusted(self):
        # In-place writes to inference tensors leave no trace in their version counter: the history refuses them
        with torch.inference_mode():
            cache = _history_cache(history_length=3)
            _linear_forward(cache, [1, 2])
            _linear_forward(cache, [3])
            with self.assertRaises(RuntimeError) as context:
                cache.crop(-1)
        self.assertIn("inference_mode", str(context.exception))

    def test_reorder_cache_forgets_the_history(self):
        cache = _history_cache(history_length=3)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        cache.reorder_cache(torch.tensor([0]))
        self.assertEqual(len(cache.layers[0].history), 0)
        with self.assertRaises(RuntimeError):
            cache.crop(-1)

    def test_history_of_one_update(self):
        cache = _history_cache(history_length=1)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2]))

    def test_states_are_kept_without_copy_over_several_updates(self):
        # Recurrent states written in place before they are handed over (as a model's own ops may do) are not
        # written in place after: the history keeps each of them as it is, whatever its version counter
        cache = _history_cache(history_length=4)
        layer = cache.layers[0]
        _linear_forward(cache, [1, 2])
        handed_over = [layer.recurrent_states[0]]
        for token in [3, 4, 5]:
            recurrent_states = layer.recurrent_states[0] + token
            recurrent_states.mul_(1)
            handed_over.append(recurrent_states)
            tokens = torch.full((1, 2, 1), float(token), dtype=torch.float64)
            cache.update_conv_state(tokens, layer_idx=0, conv_kernel_size=HISTORY_KERNEL_SIZE)
            cache.update_recurrent_state(recurrent_states, layer_idx=0)
            cache.update(tokens[:, :1, :, None], tokens[:, :1, :, None].clone(), 1)
        self.assertEqual([entry[3] is None for entry in layer.history], [True, False, False, False])
        for entry, recurrent_states in zip(list(layer.history)[1:], handed_over):
            self.assertIs(entry[3], recurrent_states)
        cache.crop(-2)
        self.assertIs(layer.recurrent_states[0], handed_over[1])

    def test_rollback_to_before_the_first_update(self):
        # A layer rolled back by every update it has seen has no past: its next update is a first one again
        cache = _history_cache(history_length=3, attention_layer=False)
        layer = cache.layers[0]
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        layer.crop(-3)
        self.assertFalse(layer.has_previous_state[0])
        _linear_forward(cache, [5, 6])
        self.assertEqual(_linear_states(cache), _expected_linear_states([5, 6]))

    def test_rollback_after_crop_zero_of_a_short_prefill(self):
        # `crop(0)` pads a prefill shorter than the kernel to the kernel size: the history still restores the states
        # from before that prefill (here conv states that were written in place before they were handed over)
        cache = _history_cache(history_length=3, attention_layer=False)
        layer = cache.layers[0]
        conv_states = torch.zeros(1, 2, 2, dtype=torch.float64).add_(1)
        cache.update_conv_state(conv_states, layer_idx=0, conv_kernel_size=HISTORY_KERNEL_SIZE)
        cache.update_recurrent_state(conv_states.sum(dim=-1), layer_idx=0)
        cache.crop(0)
        self.assertEqual(layer.conv_states[0].tolist(), [[[0.0, 1.0, 1.0]] * 2])
        cache.crop(-2)
        self.assertFalse(layer.has_previous_state[0])

    def test_reset_replaces_the_states_and_clears_the_history(self):
        cache = _history_cache(history_length=3)
        layer = cache.layers[0]
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        conv_states, recurrent_states = layer.conv_states[0], layer.recurrent_states[0]
        cache.reset()
        # New zero tensors of the working size: the tensors the model handed over, which it may still hold, keep
        # their values
        self.assertEqual(layer.conv_states[0].tolist(), [[[0.0] * HISTORY_KERNEL_SIZE] * 2])
        self.assertEqual(layer.recurrent_states[0].tolist(), [[0.0, 0.0]])
        self.assertEqual(conv_states.tolist(), [[[1.0, 2.0, 3.0]] * 2])
        self.assertEqual(recurrent_states.tolist(), [[6.0, 6.0]])
        self.assertEqual(len(layer.history), 0)
        self.assertFalse(layer.has_previous_state[0])

        # A layer never updated has nothing to reset
        cache = _history_cache(history_length=3)
        cache.reset()
        self.assertFalse(cache.layers[0].is_conv_states_initialized[0])
        self.assertFalse(cache.layers[0].is_recurrent_states_initialized[0])

    def test_reorder_cache_reorders_the_states(self):
        cache = _history_cache(history_length=3, attention_layer=False)
        layer = cache.layers[0]
        # A batch of 2, 2 channels and 3 tokens: every state differs from the others
        conv_states = torch.arange(12, dtype=torch.float64).reshape(2, 2, 3)
        cache.update_conv_state(conv_states, layer_idx=0, conv_kernel_size=HISTORY_KERNEL_SIZE)
        recurrent_states = torch.arange(4, dtype=torch.float64).reshape(2, 2)
        cache.update_recurrent_state(recurrent_states, layer_idx=0)
        cache.reorder_cache(torch.tensor([1, 0]))
        self.assertEqual(layer.conv_states[0].tolist(), conv_states[[1, 0]].tolist())
        self.assertEqual(layer.recurrent_states[0].tolist(), [[2.0, 3.0], [0.0, 1.0]])
        self.assertEqual(len(layer.history), 0)

    @parameterized.expand([(False,), (True,)])
    def test_first_update_of_the_conv_states(self, record_past):
        # Without past recording, a prefill shorter than the kernel is left-padded with zeros; recorded, it is kept as
        # it is. A longer prefill is kept whole in both cases (1 channel: only the last dimension counts tokens)
        for num_tokens in (2, 5):
            cache = Cache(layers=[LinearAttentionLayer()])
            if record_past:
                cache.activate_past_recording()
            conv_states = torch.arange(1, num_tokens + 1, dtype=torch.float64).reshape(1, 1, num_tokens)
            states = cache.update_conv_state(conv_states, layer_idx=0, conv_kernel_size=HISTORY_KERNEL_SIZE)
            expected = conv_states.tolist()
            if num_tokens == 2 and not record_past:
                expected = [[[0.0, 1.0, 2.0]]]
            self.assertEqual(states.tolist(), expected)
            # Recorded, every state is kept until the next `crop`; otherwise the last `conv_kernel_size`
            kept = expected[0][0] if record_past else expected[0][0][-HISTORY_KERNEL_SIZE:]
            self.assertEqual(cache.layers[0].conv_states[0].tolist(), [[kept]])

    def test_recurrent_states_keep_their_address_without_history(self):
        # Copied in place, for cudagraphs
        cache = Cache(layers=[LinearAttentionLayer()])
        cache.update_recurrent_state(torch.ones(1, 2, dtype=torch.float64), layer_idx=0)
        recurrent_states = cache.layers[0].recurrent_states[0]
        cache.update_recurrent_state(torch.full((1, 2), 2.0, dtype=torch.float64), layer_idx=0)
        self.assertIs(cache.layers[0].recurrent_states[0], recurrent_states)
        self.assertEqual(recurrent_states.tolist(), [[2.0, 2.0]])

    def test_recurrent_states_without_conv_states(self):
        cache = _history_cache(history_length=2, attention_layer=False)
        cache.update_recurrent_state(torch.ones(1, 2, dtype=torch.float64), layer_idx=0)
        self.assertFalse(cache.layers[0].is_conv_states_initialized[0])

    @parameterized.expand([(2 * HISTORY_KERNEL_SIZE, False), (2 * HISTORY_KERNEL_SIZE + 1, True)])
    def test_prefill_conv_states_are_restricted_to_the_window(self, num_tokens, is_copy):
        # With a history, the conv states are restricted to the convolution's window after the prefill: a view of a
        # short prefill, a copy out of a longer one (so that the history does not keep the whole prefill alive)
        cache = _history_cache(history_length=2)
        layer = cache.layers[0]
        conv_states = torch.arange(num_tokens, dtype=torch.float64).reshape(1, 1, num_tokens).expand(1, 2, -1)
        cache.update_conv_state(conv_states, layer_idx=0, conv_kernel_size=HISTORY_KERNEL_SIZE)
        cache.update_recurrent_state(conv_states.sum(dim=-1), layer_idx=0)
        window = layer.conv_states[0]
        self.assertEqual(window.tolist(), conv_states[..., -HISTORY_KERNEL_SIZE:].tolist())
        shares_storage = window.untyped_storage().data_ptr() == conv_states.untyped_storage().data_ptr()
        self.assertEqual(shares_storage, not is_copy)

    def test_assistant_history_covers_every_draft_of_a_round(self):
        # The history of the linear attention states undoes every draft of a round and the token before them: it grows
        # with the number of drafts
        _, assistants = AssistedDecodingCropTest._models()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = AssistedDecodingCropTest._generator(assistants["linear_attention"], input_ids)
        candidates, _ = generator.get_candidates(input_ids)
        linear_layer = generator.assistant_kwargs["cache"].layers[0]
        self.assertEqual(linear_layer.history.maxlen, 5)
        generator.num_assistant_tokens = 5
        accepted = torch.cat([candidates[:, :5], torch.tensor([[31]])], dim=-1)
        generator._update_past_and_masks(accepted)
        self.assertEqual(linear_layer.history.maxlen, 6)
        self.assertEqual(generator.assistant_kwargs["cache"].get_seq_length(), accepted.shape[-1] - 1)

    def test_assistant_cache_not_recording_is_emptied_after_each_round_said_once(self):
        # An assistant cache whose linear attention layers do not record their past cannot remove a few tokens: from
        # the first rollback on it is emptied after every round, without trying a crop it would refuse, said once
        _, assistants = AssistedDecodingCropTest._models()
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = AssistedDecodingCropTest._generator(assistants["linear_attention"], input_ids)
        generator.assistant_kwargs["cache"] = DynamicCache(config=assistants["linear_attention"].config)
        logger = logging.get_logger(candidate_generator.__name__)
        logging.warning_once.cache_clear()  # it remembers the messages said by earlier tests
        with CaptureLogger(logger) as captured:
            for num_accepted in (1, 0, 2):
                candidates, _ = generator.get_candidates(input_ids)
                input_ids = torch.cat([candidates[:, : input_ids.shape[-1] + num_accepted], input_ids[:, -1:]], -1)
                generator._update_past_and_masks(input_ids)
                self.assertEqual(generator.assistant_kwargs["cache"].get_seq_length(), 0)
        self.assertEqual(captured.out.count("encodes the whole sequence again"), 1, captured.out)
        self.assertIn("do not record their past", captured.out)
