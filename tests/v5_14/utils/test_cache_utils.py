# Copyright 2026 The HuggingFace Team. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

import unittest
import warnings

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch

    from transformers import DynamicCache, EncoderDecoderCache
    from transformers.cache_utils import (
        Cache,
        DynamicIndexedLayer,
        DynamicLayer,
        DynamicSlidingWindowLayer,
        LinearAttentionLayer,
        MtpCache,
    )


# Small sliding window (3 tokens are "below" it) and a large one that is never reached in these tests
SMALL_WINDOW, LARGE_WINDOW = 4, 64

# (argument of `crop`, expected length of a 3-token cache after it)
CROP_CASES = [(2, 2), (0, 0), (-1, 2), (-3, 0), (-5, 0)]


def _make_layer(layer_name):
    if layer_name == "dynamic":
        return DynamicLayer()
    if layer_name == "sliding":
        return DynamicSlidingWindowLayer(sliding_window=SMALL_WINDOW)
    if layer_name == "sliding_large":
        return DynamicSlidingWindowLayer(sliding_window=LARGE_WINDOW)
    if layer_name == "indexed":
        return DynamicIndexedLayer()
    raise ValueError(layer_name)


def _make_cache(cache_name):
    if cache_name == "dynamic_cache":
        return DynamicCache()
    if cache_name == "mtp_cache":
        return MtpCache()
    if cache_name == "encoder_decoder_cache":
        return EncoderDecoderCache(DynamicCache(), DynamicCache())
    raise ValueError(cache_name)


def _tokens(start, length):
    """Key/value states of shape `[1, 1, length, 1]` whose values are the token positions `start ... start+length-1`."""
    return torch.arange(start, start + length, dtype=torch.float32).reshape(1, 1, length, 1)


def _fill(cache, num_tokens, step=None, layer_idx=0):
    """Appends `num_tokens` tokens to `layer_idx` of `cache`, in steps of `step` tokens (all at once by default)."""
    step = step or num_tokens
    if isinstance(cache, EncoderDecoderCache):
        cache = cache.self_attention_cache
    for start in range(0, num_tokens, step):
        states = _tokens(start, min(step, num_tokens - start))
        cache.update(states, states.clone(), layer_idx=layer_idx)
        if isinstance(cache.layers[layer_idx], DynamicIndexedLayer):
            cache.update_indexer(states[:, 0], layer_idx=layer_idx)


def _crop_quietly(cache, *args, **kwargs):
    """Calls `cache.crop`, silencing the deprecation warning of absolute crops."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        cache.crop(*args, **kwargs)


def _snapshot(cache):
    """A copy of everything a crop may change, to check that a failing crop leaves the cache bit-identical."""
    state = []
    for layer in cache.layers:
        tensors = [getattr(layer, name, None) for name in ("keys", "values", "indexer_keys")]
        state.append(
            ([t.clone() if t is not None else None for t in tensors], getattr(layer, "cumulative_length", None))
        )
    return state


@require_torch
class DynamicLayersCropTest(unittest.TestCase):
    """`crop` on every dynamic layer type: negative values remove tokens (clamped), non-negative ones are targets."""

    def assertLayerHolds(self, layer, num_tokens, query_length=1):
        """Checks that every piece of state of `layer` describes exactly the tokens `0 ... num_tokens-1`."""
        self.assertEqual(layer.get_seq_length(), num_tokens)
        expected = _tokens(0, num_tokens)
        if isinstance(layer, DynamicSlidingWindowLayer):
            self.assertEqual(layer.cumulative_length, num_tokens)
            # Only the last `sliding_window - 1` tokens are stored
            expected = expected[..., -(layer.sliding_window - 1) :, :] if num_tokens else expected
            kv_length = min(num_tokens, layer.sliding_window - 1) + query_length
            kv_offset = max(num_tokens - layer.sliding_window + 1, 0)
            self.assertEqual(layer.get_mask_sizes(query_length), (kv_length, kv_offset))
        else:
            self.assertEqual(layer.get_mask_sizes(query_length), (num_tokens + query_length, 0))
        torch.testing.assert_close(layer.keys, expected, rtol=0, atol=0)
        torch.testing.assert_close(layer.values, expected, rtol=0, atol=0)
        if isinstance(layer, DynamicIndexedLayer):
            torch.testing.assert_close(layer.indexer_keys, expected[:, 0], rtol=0, atol=0)

    @parameterized.expand(
        [
            (layer_name, *case)
            for layer_name in ("dynamic", "sliding", "sliding_large", "indexed")
            for case in CROP_CASES
        ]
    )
    def test_crop_removes_or_keeps_the_right_tokens(self, layer_name, argument, expected_length):
        cache = Cache(layers=[_make_layer(layer_name)])
        _fill(cache, 3)

        _crop_quietly(cache, argument)

        self.assertLayerHolds(cache.layers[0], expected_length)
        self.assertEqual(cache.get_seq_length(), expected_length)

    @parameterized.expand(
        [(layer_name, *case) for layer_name in ("dynamic", "sliding", "indexed") for case in CROP_CASES]
    )
    def test_update_after_crop_appends_in_the_right_place(self, layer_name, argument, expected_length):
        cache = Cache(layers=[_make_layer(layer_name)])
        _fill(cache, 3)
        _crop_quietly(cache, argument)

        # Append the tokens that follow the kept ones: the cache must again hold one contiguous sequence
        states = _tokens(expected_length, 1)
        keys, _ = cache.update(states, states.clone(), layer_idx=0)
        if layer_name == "indexed":
            cache.update_indexer(states[:, 0], layer_idx=0)

        torch.testing.assert_close(keys, _tokens(0, expected_length + 1), rtol=0, atol=0)
        self.assertLayerHolds(cache.layers[0], expected_length + 1)

    @parameterized.expand(
        [
            (layer_name, num_tokens, argument)
            for layer_name in ("dynamic", "sliding", "indexed")
            for num_tokens in (1, 3, 9)
            for argument in ("zero", "minus_length", "oversized")
        ]
    )
    def test_full_rollback_then_append(self, layer_name, num_tokens, argument):
        # 9 tokens go beyond the small sliding window: a full rollback must still work, as nothing needs to be kept
        cache = Cache(layers=[_make_layer(layer_name)])
        _fill(cache, num_tokens, step=1)
        value = {"zero": 0, "minus_length": -num_tokens, "oversized": -num_tokens - 5}[argument]

        _crop_quietly(cache, value)
        self.assertLayerHolds(cache.layers[0], 0, query_length=2)

        _fill(cache, 2)
        self.assertLayerHolds(cache.layers[0], 2, query_length=1)

    @parameterized.expand([("dynamic_cache",), ("mtp_cache",), ("encoder_decoder_cache",)])
    def test_caches_crop_every_layer(self, cache_name):
        cache = _make_cache(cache_name)
        self_attention_cache = cache.self_attention_cache if cache_name == "encoder_decoder_cache" else cache
        for layer_idx in range(3):
            _fill(cache, 5, layer_idx=layer_idx)
        if cache_name == "encoder_decoder_cache":
            cross = _tokens(0, 7)
            cache.cross_attention_cache.update(cross, cross.clone(), layer_idx=0)

        cache.crop(-2)
        self.assertEqual([layer.get_seq_length() for layer in self_attention_cache.layers], [3, 3, 3])
        cache.crop(-10)
        self.assertEqual([layer.get_seq_length() for layer in self_attention_cache.layers], [0, 0, 0])
        _fill(cache, 4, layer_idx=0)
        _crop_quietly(cache, 0)
        self.assertEqual([layer.get_seq_length() for layer in self_attention_cache.layers], [0, 0, 0])
        if cache_name == "encoder_decoder_cache":
            # Cross-attention states only depend on the encoder outputs: they are never cropped
            self.assertEqual(cache.cross_attention_cache.get_seq_length(), 7)


@require_torch
class CropArgumentsTest(unittest.TestCase):
    """What `crop` accepts, what it warns about, and what it refuses."""

    def _cache(self, num_tokens=3, num_layers=1):
        cache = DynamicCache()
        for layer_idx in range(num_layers):
            _fill(cache, num_tokens, layer_idx=layer_idx)
        return cache

    @parameterized.expand([(0,), (1,), (3,), (7,)])
    def test_absolute_crop_warns_once_per_call(self, argument):
        cache = self._cache(num_layers=4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cache.crop(argument)
        future_warnings = [w for w in caught if issubclass(w.category, FutureWarning)]
        self.assertEqual(len(future_warnings), 1)
        message = str(future_warnings[0].message)
        for expected in (f"crop({argument})", "5.15", "5.20", "crop(-k)", "crop(-cache.get_seq_length())"):
            self.assertIn(expected, message)
        # Attributed to the line that called `crop`, so that Python shows it once per call site
        self.assertEqual(future_warnings[0].filename, __file__)

    def test_encoder_decoder_absolute_crop_warns_at_the_caller(self):
        cache = EncoderDecoderCache(self._cache(), DynamicCache())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cache.crop(0)
        self.assertEqual([w.filename for w in caught if issubclass(w.category, FutureWarning)], [__file__])
        self.assertEqual(cache.get_seq_length(), 0)

    @parameterized.expand([(-1,), (-3,), (-5,)])
    def test_negative_crop_does_not_warn(self, argument):
        cache = self._cache()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.crop(argument)
        # And it removed exactly the last tokens (stock 5.14 keeps a stale token for -5)
        expected_length = max(3 + argument, 0)
        self.assertEqual(cache.get_seq_length(), expected_length)
        torch.testing.assert_close(cache.layers[0].keys, _tokens(0, expected_length), rtol=0, atol=0)

    @parameterized.expand(
        [
            ("python_int", lambda value: value),
            ("numpy_int", lambda value: __import__("numpy").int64(value)),
            ("tensor_int64", lambda value: torch.tensor(value)),
            ("tensor_int32", lambda value: torch.tensor(value, dtype=torch.int32)),
        ]
    )
    def test_integer_like_arguments(self, _, make_argument):
        # `generate` passes 0-d integer tensors
        cache = self._cache(num_tokens=5)
        cache.crop(make_argument(-2))
        self.assertEqual(cache.get_seq_length(), 3)
        torch.testing.assert_close(cache.layers[0].keys, _tokens(0, 3), rtol=0, atol=0)
        # Oversized: empties (stock 5.14 keeps a stale token)
        cache.crop(make_argument(-4))
        self.assertEqual(cache.get_seq_length(), 0)
        # A full rollback to `0` given as an integer-like value (stock 5.14 keeps every token)
        _fill(cache, 3)
        _crop_quietly(cache, make_argument(0))
        self.assertEqual(cache.get_seq_length(), 0)

    def test_tokens_to_remove_keyword(self):
        cache = self._cache(num_tokens=5)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.crop(tokens_to_remove=-2)
            self.assertEqual(cache.get_seq_length(), 3)
            # As from transformers 5.15 on, removing 0 tokens removes nothing
            cache.crop(tokens_to_remove=0)
            self.assertEqual(cache.get_seq_length(), 3)
            cache.crop(tokens_to_remove=-9)
            self.assertEqual(cache.get_seq_length(), 0)

    @parameterized.expand(
        [
            ("bool", True, "True"),
            ("float", -1.0, "-1.0"),
            ("str", "-1", "'-1'"),
            # Our message names the argument: stock's generic "NoneType" error must not match by accident
            ("none", None, "`max_length=None`"),
            ("multi_element_tensor", torch.tensor([-1, -2]) if is_torch_available() else None, "shape (2,)"),
            ("one_element_tensor", torch.tensor([-1]) if is_torch_available() else None, "shape (1,)"),
            ("bool_tensor", torch.tensor(True) if is_torch_available() else None, "tensor(True)"),
            ("float_tensor", torch.tensor(-1.0) if is_torch_available() else None, "tensor(-1.)"),
        ]
    )
    def test_wrong_argument_types_raise(self, _, argument, described_as):
        cache = self._cache()
        before = _snapshot(cache)
        with self.assertRaises(TypeError) as context:
            cache.crop(argument)
        self.assertIn(described_as, str(context.exception))
        self.assertEqual(cache.get_seq_length(), 3)
        torch.testing.assert_close(_snapshot(cache)[0][0], before[0][0], rtol=0, atol=0)

    def test_both_arguments_raise(self):
        with self.assertRaisesRegex(TypeError, "only one"):
            self._cache().crop(-1, tokens_to_remove=-1)


@require_torch
class CropErrorsTest(unittest.TestCase):
    """Crops that cannot be honoured raise a clear error, and leave every layer of the cache unchanged."""

    def _sliding_cache_beyond_window(self):
        cache = Cache(layers=[DynamicLayer(), DynamicSlidingWindowLayer(sliding_window=SMALL_WINDOW)])
        for layer_idx in range(2):
            _fill(cache, 6, step=1, layer_idx=layer_idx)
        return cache

    @parameterized.expand([(-1,), (-3,), (2,)])
    def test_partial_crop_beyond_sliding_window_raises_and_changes_nothing(self, argument):
        cache = self._sliding_cache_beyond_window()
        before = _snapshot(cache)

        with self.assertRaises(ValueError) as context:
            _crop_quietly(cache, argument)
        message = str(context.exception)
        self.assertIn("DynamicSlidingWindowLayer", message)
        self.assertIn("crop(-cache.get_seq_length())", message)

        # The full-attention layer, checked first, was not cropped either
        after = _snapshot(cache)
        for (tensors_before, length_before), (tensors_after, length_after) in zip(before, after):
            self.assertEqual(length_before, length_after)
            for tensor_before, tensor_after in zip(tensors_before, tensors_after):
                if tensor_before is not None:
                    torch.testing.assert_close(tensor_after, tensor_before, rtol=0, atol=0)

    def test_crop_that_removes_nothing_beyond_sliding_window_is_allowed(self):
        cache = self._sliding_cache_beyond_window()
        _crop_quietly(cache, 10)
        self.assertEqual(cache.layers[1].get_seq_length(), 6)

    def test_layer_that_cannot_roll_back_raises_before_changing_anything(self):
        # Recurrent states summarize every past token: they can be reset, but not rolled back by a few tokens
        linear_layer = LinearAttentionLayer()
        linear_layer.activate_past_recording()
        linear_layer.update_conv_state(torch.ones(1, 2, 6), conv_kernel_size=4)
        linear_layer.update_recurrent_state(torch.ones(1, 2, 3))
        cache = Cache(layers=[DynamicLayer(), linear_layer])
        _fill(cache, 3)
        before = _snapshot(cache)[0][0]

        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("LinearAttentionLayer", str(context.exception))
        self.assertIn("crop(-cache.get_seq_length())", str(context.exception))
        self.assertEqual(cache.layers[0].get_seq_length(), 3)
        torch.testing.assert_close(_snapshot(cache)[0][0], before, rtol=0, atol=0)
        self.assertEqual(linear_layer.conv_states[0].shape[-1], 6)

        # A full rollback resets them
        cache.crop(-3)
        self.assertEqual(cache.get_seq_length(), 0)
        self.assertFalse(linear_layer.has_previous_state[0])
        self.assertEqual(linear_layer.recurrent_states[0].abs().sum().item(), 0)


# Linear attention history: a model-like forward pass over a cache made of one linear attention layer (a causal conv
# of `KERNEL_SIZE` and a recurrent state that sums the tokens, like a gated delta rule without decay) and one
# attention layer. Token values are small integers in float64, so that every state is exact.
KERNEL_SIZE = 3


def _linear_forward(cache, token_values, in_place_conv=True, in_place_recurrent=False):
    """
    One forward pass over `token_values`, updating the cache like Qwen3-Next's gated delta net does: a single token
    with cached states writes the conv states in place (`causal_conv1d_update`), more tokens pass the conv window to
    `update_conv_state`; the recurrent states are handed over as a new tensor (or written in place, if asked).
    """
    tokens = torch.tensor(token_values, dtype=torch.float64).reshape(1, 1, -1).expand(1, 2, -1)
    for layer_idx, layer in enumerate(cache.layers):
        if not isinstance(layer, LinearAttentionLayer):
            keys = tokens[:, :1, :, None]
            cache.update(keys, keys.clone(), layer_idx)
            continue
        has_previous_state = cache.has_previous_state(layer_idx)
        if has_previous_state and len(token_values) == 1 and in_place_conv:
            conv_states = layer.conv_states[0]
            conv_states.copy_(torch.cat([conv_states, tokens], dim=-1)[..., -conv_states.shape[-1] :])
        else:
            context = torch.cat([layer.conv_states[0], tokens], dim=-1) if has_previous_state else tokens
            cache.update_conv_state(
                torch.nn.functional.pad(context, (KERNEL_SIZE - context.shape[-1], 0)), layer_idx=layer_idx
            )
        if has_previous_state and in_place_recurrent:
            recurrent_states = layer.recurrent_states[0].add_(tokens.sum(dim=-1))
        elif has_previous_state:
            recurrent_states = layer.recurrent_states[0] + tokens.sum(dim=-1)
        else:
            recurrent_states = tokens.sum(dim=-1)
        cache.update_recurrent_state(recurrent_states, layer_idx=layer_idx)


def _linear_cache(linear_first=True, history_length=None):
    layers = [LinearAttentionLayer(), DynamicLayer()]
    cache = Cache(layers=layers if linear_first else layers[::-1])
    if history_length is None:
        cache.activate_past_recording()
    else:
        cache.activate_past_recording(history_length=history_length)
    return cache


def _linear_states(cache):
    """The conv states the next forward pass uses (the last `KERNEL_SIZE`), and the recurrent states."""
    layer = next(layer for layer in cache.layers if isinstance(layer, LinearAttentionLayer))
    return layer.conv_states[0][..., -KERNEL_SIZE:].tolist(), layer.recurrent_states[0].tolist()


def _expected_linear_states(token_values):
    """The states of a fresh cache after one forward pass over `token_values`."""
    cache = _linear_cache()
    _linear_forward(cache, token_values)
    return _linear_states(cache)


@require_torch
class LinearAttentionHistoryTest(unittest.TestCase):
    @parameterized.expand([(linear_first, in_place) for linear_first in (True, False) for in_place in (True, False)])
    def test_crop_restores_the_states_before_the_last_updates(self, linear_first, in_place_conv):
        # A prompt of 4 tokens, then 4 drafted tokens, one per forward pass (like an assistant model)
        tokens = [1, 2, 3, 4, 5, 6, 7, 8]
        for tokens_to_remove in range(1, 5):
            cache = _linear_cache(linear_first, history_length=5)
            _linear_forward(cache, tokens[:4], in_place_conv)
            for token in tokens[4:]:
                _linear_forward(cache, [token], in_place_conv)

            cache.crop(-tokens_to_remove)
            kept = tokens[: len(tokens) - tokens_to_remove]
            self.assertEqual(cache.get_seq_length(), len(kept))
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept))

            # The cache goes on from there: two tokens at once, then one
            _linear_forward(cache, [9, 10], in_place_conv)
            _linear_forward(cache, [11], in_place_conv)
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept + [9, 10, 11]))
            # And can be rolled back again, by the tokens of one or of both updates
            cache.crop(-3)
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept))

    def test_exact_states_values(self):
        cache = _linear_cache(history_length=3)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        _linear_forward(cache, [4])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), ([[[1.0, 2.0, 3.0]] * 2], [[6.0, 6.0]]))
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), ([[[0.0, 1.0, 2.0]] * 2], [[3.0, 3.0]]))

    @parameterized.expand([(-2,), (-4,)])
    def test_crop_within_an_update_raises_and_changes_nothing(self, argument):
        cache = _linear_cache(history_length=5)
        _linear_forward(cache, [1, 2, 3])
        _linear_forward(cache, [4, 5])
        _linear_forward(cache, [6])
        before = _linear_states(cache)

        # The last updates added 1, then 2, then 3 tokens: 1, 3 or 6 tokens can be removed, but not 2 or 4
        with self.assertRaises(RuntimeError) as context:
            cache.crop(argument)
        message = str(context.exception)
        self.assertIn("LinearAttentionLayer", message)
        self.assertIn("[3, 2, 1]", message)
        self.assertIn("crop(-cache.get_seq_length())", message)
        self.assertEqual(cache.get_seq_length(), 6)
        self.assertEqual(_linear_states(cache), before)

        cache.crop(-3)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2, 3]))

    def test_history_is_bounded(self):
        cache = _linear_cache(history_length=2)
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
        cache = _linear_cache(history_length=3)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        cache.crop(-3)
        layer = cache.layers[0]
        self.assertEqual(cache.get_seq_length(), 0)
        self.assertFalse(layer.has_previous_state[0])
        self.assertEqual(len(layer.history), 0)
        self.assertEqual(layer.recurrent_states[0].abs().sum().item(), 0)

        # A new prompt, then a rollback within it
        _linear_forward(cache, [5, 6])
        _linear_forward(cache, [7])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), _expected_linear_states([5, 6]))

    def test_recurrent_states_are_kept_without_copy_and_conv_states_are_copied(self):
        cache = _linear_cache(history_length=3)
        layer = cache.layers[0]
        _linear_forward(cache, [1, 2])
        recurrent_states = layer.recurrent_states[0]
        _linear_forward(cache, [3])
        # The history holds the very tensor the model handed over before, and a copy of the conv states, which the
        # single-token forward pass then wrote in place
        _, conv_states, kept_recurrent_states, _ = layer.history[-1]
        self.assertIs(kept_recurrent_states, recurrent_states)
        self.assertIsNot(conv_states, layer.conv_states[0])
        self.assertEqual(conv_states.tolist(), [[[0.0, 1.0, 2.0]] * 2])

    def test_recurrent_states_written_in_place_cannot_be_restored(self):
        cache = _linear_cache(history_length=3)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3], in_place_recurrent=True)
        before = _linear_states(cache)

        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("recurrent states", str(context.exception))
        self.assertEqual(_linear_states(cache), before)

    def test_without_history_recurrent_states_cannot_be_rolled_back(self):
        cache = _linear_cache()
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("history_length", str(context.exception))
