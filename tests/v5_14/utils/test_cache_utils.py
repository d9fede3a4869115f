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

import inspect
import unittest
import warnings

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch
from transformers.utils import is_hqq_available, is_optimum_quanto_available


if is_torch_available():
    import torch

    from transformers import (
        DeepseekV4Config,
        DynamicCache,
        EncoderDecoderCache,
        GenerationConfig,
        LlamaConfig,
        QuantizedCache,
        Qwen3NextConfig,
        Qwen3NextForCausalLM,
        StaticCache,
    )
    from transformers.cache_utils import (
        Cache,
        CacheLayerMixin,
        DynamicIndexedLayer,
        DynamicLayer,
        DynamicSlidingWindowLayer,
        LinearAttentionAndFullAttentionLayer,
        LinearAttentionAndSlidingWindowAttentionLayer,
        LinearAttentionAndStaticFullAttentionLayer,
        LinearAttentionAndStaticSlidingWindowAttentionLayer,
        LinearAttentionLayer,
        MtpCache,
        QuantizedLayer,
        StaticIndexedLayer,
        StaticLayer,
        StaticSlidingWindowLayer,
    )
    from transformers.generation.candidate_generator import AssistedCandidateGenerator
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4CSACache, DeepseekV4HCACache
    from transformers.models.minimax.modeling_minimax import MiniMaxCache
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import (
        MiniMaxM3VLSparseCacheLayer,
        MiniMaxM3VLSparseStaticCacheLayer,
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
    for start in range(0, num_tokens, step):
        _fill_from(cache, start, min(step, num_tokens - start), layer_idx)


def _fill_from(cache, start, length, layer_idx=0):
    """Appends the tokens `start ... start+length-1` to `layer_idx` of `cache` (and to its indexer keys)."""
    if isinstance(cache, EncoderDecoderCache):
        cache = cache.self_attention_cache
    states = _tokens(start, length)
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
    """`crop` on dynamic layers: negative values remove tokens (clamped), non-negative ones are targets (#47433)."""

    def assertLayerHolds(self, layer, num_tokens, query_length=1):
        """Checks that every piece of state of `layer` describes exactly the tokens `0 ... num_tokens-1`."""
        self.assertEqual(layer.get_seq_length(), num_tokens)
        self.assertEqual(layer.get_mask_sizes(query_length), (num_tokens + query_length, 0))
        if num_tokens == 0 and not layer.is_initialized:
            # `crop(0)` of a `DynamicCache` puts its layers back as they were built, and frees their states
            self.assertEqual((layer.keys, layer.values), (None, None))
            return
        expected = _tokens(0, num_tokens)
        torch.testing.assert_close(layer.keys, expected, rtol=0, atol=0)
        torch.testing.assert_close(layer.values, expected, rtol=0, atol=0)
        if isinstance(layer, DynamicIndexedLayer):
            torch.testing.assert_close(layer.indexer_keys, expected[:, 0], rtol=0, atol=0)

    @parameterized.expand([(layer_name, *case) for layer_name in ("dynamic", "indexed") for case in CROP_CASES])
    def test_crop_then_update(self, layer_name, argument, expected_length):
        cache = Cache(layers=[_make_layer(layer_name)])
        _fill(cache, 3)

        _crop_quietly(cache, argument)
        self.assertLayerHolds(cache.layers[0], expected_length)

        # The next tokens land right after the kept ones
        _fill_from(cache, expected_length, 1)
        self.assertLayerHolds(cache.layers[0], expected_length + 1)

    @parameterized.expand([("dynamic_cache",), ("mtp_cache",), ("encoder_decoder_cache",)])
    def test_caches_crop_every_layer(self, cache_name):
        cache = _make_cache(cache_name)
        self_attention_cache = cache.self_attention_cache if cache_name == "encoder_decoder_cache" else cache
        for layer_idx in range(3):
            _fill(cache, 5, layer_idx=layer_idx)

        cache.crop(-2)
        self.assertEqual([layer.get_seq_length() for layer in self_attention_cache.layers], [3, 3, 3])
        cache.crop(-10)
        self.assertEqual([layer.get_seq_length() for layer in self_attention_cache.layers], [0, 0, 0])
        _fill(cache, 4, layer_idx=0)
        _crop_quietly(cache, 0)
        self.assertEqual([layer.get_seq_length() for layer in self_attention_cache.layers], [0, 0, 0])
        # A removal beyond what slicing takes (int64) is clamped, without torch's truncation warning
        _fill(cache, 2, layer_idx=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.crop(-(2**70))
        self.assertEqual(self_attention_cache.layers[0].get_seq_length(), 0)

    @parameterized.expand([(0,), (-1,)])
    def test_indexed_layer_of_one_token_empties_its_indexer_keys(self, argument):
        cache = Cache(layers=[_make_layer("indexed")])
        _fill(cache, 1)

        _crop_quietly(cache, argument)
        self.assertLayerHolds(cache.layers[0], 0)

    def test_indexed_layer_without_indexer_keys(self):
        # A model may fill the key and value states of an indexed layer before (or without) its indexer keys
        layer = DynamicIndexedLayer()
        cache = Cache(layers=[layer])
        states = _tokens(0, 3)
        cache.update(states, states.clone(), layer_idx=0)

        cache.crop(-1)
        self.assertEqual(layer.get_seq_length(), 2)
        torch.testing.assert_close(layer.keys, _tokens(0, 2), rtol=0, atol=0)
        self.assertFalse(layer.is_indexer_initialized)
        self.assertIsNone(layer.indexer_keys)

    def test_layers_of_different_lengths_each_lose_the_removed_tokens(self):
        # The layers of a cache may hold different numbers of tokens (e.g. the layers of an `MtpCache`)
        cache = MtpCache()
        _fill(cache, 3, layer_idx=0)
        _fill(cache, 5, layer_idx=1)
        cache.crop(-3)
        self.assertEqual([layer.get_seq_length() for layer in cache.layers], [0, 2])
        self.assertLayerHolds(cache.layers[1], 2)


@require_torch
class DynamicSlidingWindowLayerCropTest(unittest.TestCase):
    """`crop` on dynamic sliding-window layers: `cumulative_length` and the mask sizes follow the kept tokens."""

    def assertLayerHolds(self, layer, num_tokens, query_length=1):
        """Checks that every piece of state of `layer` describes exactly the tokens `0 ... num_tokens-1`."""
        self.assertEqual(layer.get_seq_length(), num_tokens)
        self.assertEqual(layer.cumulative_length, num_tokens)
        # Only the last `sliding_window - 1` tokens are stored
        expected = _tokens(0, num_tokens)
        expected = expected[..., -(layer.sliding_window - 1) :, :] if num_tokens else expected
        kv_length = min(num_tokens, layer.sliding_window - 1) + query_length
        kv_offset = max(num_tokens - layer.sliding_window + 1, 0)
        self.assertEqual(layer.get_mask_sizes(query_length), (kv_length, kv_offset))
        torch.testing.assert_close(layer.keys, expected, rtol=0, atol=0)
        torch.testing.assert_close(layer.values, expected, rtol=0, atol=0)

    @parameterized.expand([(layer_name, *case) for layer_name in ("sliding", "sliding_large") for case in CROP_CASES])
    def test_crop_then_update(self, layer_name, argument, expected_length):
        cache = Cache(layers=[_make_layer(layer_name)])
        _fill(cache, 3)

        _crop_quietly(cache, argument)
        self.assertLayerHolds(cache.layers[0], expected_length)

        _fill_from(cache, expected_length, 1)
        self.assertLayerHolds(cache.layers[0], expected_length + 1)

    @parameterized.expand([(-1,), (-2,)])
    def test_partial_crop_once_the_window_is_full_raises(self, argument):
        # With exactly `sliding_window` tokens seen, the first one was already dropped
        cache = Cache(layers=[_make_layer("sliding")])
        _fill(cache, SMALL_WINDOW, step=1)

        with self.assertRaises(ValueError):
            cache.crop(argument)
        self.assertLayerHolds(cache.layers[0], SMALL_WINDOW)

    @parameterized.expand(
        [(num_tokens, argument) for num_tokens in (1, 3, 9) for argument in ("zero", "minus_length", "oversized")]
    )
    def test_full_rollback_then_append(self, num_tokens, argument):
        # 9 tokens go beyond the small sliding window: a full rollback must still work, as nothing needs to be kept
        cache = Cache(layers=[_make_layer("sliding")])
        _fill(cache, num_tokens, step=1)
        value = {"zero": 0, "minus_length": -num_tokens, "oversized": -num_tokens - 5}[argument]

        _crop_quietly(cache, value)
        self.assertLayerHolds(cache.layers[0], 0, query_length=2)

        _fill(cache, 2)
        self.assertLayerHolds(cache.layers[0], 2, query_length=1)


@require_torch
class CropArgumentsTest(unittest.TestCase):
    """What `crop` accepts, what it warns about, and what it refuses."""

    def _cache(self, num_tokens=3, num_layers=1):
        cache = DynamicCache()
        for layer_idx in range(num_layers):
            _fill(cache, num_tokens, layer_idx=layer_idx)
        return cache

    def _future_warning(self, cache, *args, **kwargs):
        """The message of the one `FutureWarning` that `cache.crop(*args, **kwargs)` emits, checked to point here."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            crop_line = inspect.currentframe().f_lineno + 1
            cache.crop(*args, **kwargs)
        future_warnings = [w for w in caught if issubclass(w.category, FutureWarning)]
        self.assertEqual(len(future_warnings), 1)
        # Attributed to the line that called `crop`, so that Python shows it once per call site
        self.assertEqual((future_warnings[0].filename, future_warnings[0].lineno), (__file__, crop_line))
        return str(future_warnings[0].message)

    @parameterized.expand([(1,), (3,), (7,)])
    def test_absolute_crop_warns_once_per_call(self, argument):
        message = self._future_warning(self._cache(num_layers=4), argument)
        for expected in (f"crop({argument})", "5.20", "crop(-k)"):
            self.assertIn(expected, message)

    def test_crop_zero_warns_about_the_minus_zero_case(self):
        # Code that removes `k` rejected tokens with `crop(-k)` empties the cache when `k == 0`: the warning must say
        # so, and how to write it instead
        num_rejected = 0
        cache = self._cache()
        message = self._future_warning(cache, -num_rejected)
        for expected in ("`crop(0)` empties the cache", "`k == 0`", "crop(tokens_to_remove=-k)", "5.15"):
            self.assertIn(expected, message)
        self.assertIn("crop(-cache.get_seq_length())", message)
        self.assertEqual(cache.get_seq_length(), 0)

    @parameterized.expand([(0,), (1,)])
    def test_warning_turned_into_an_error_leaves_the_cache_unchanged(self, argument):
        # e.g. a test suite run with `-W error::FutureWarning`: the deprecated call raises before anything changes
        cache = self._cache()
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            with self.assertRaises(FutureWarning):
                cache.crop(argument)
        self.assertEqual(cache.get_seq_length(), 3)

    def test_warning_turned_into_an_error_is_a_new_one_each_time(self):
        # `crop(0)` hands the filters one shared warning object: raised as an error, it would be the object every
        # caller caught, holding the frames of every call
        cache = self._cache()
        errors = []
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            for _ in range(2):
                try:
                    cache.crop(0)
                except FutureWarning as error:
                    errors.append(error)
        self.assertEqual(len(errors), 2)
        self.assertIsNot(errors[0], errors[1])
        self.assertIsNone(errors[0].__traceback__.tb_next.tb_next)
        self.assertIsNone(errors[1].__traceback__.tb_next.tb_next)
        self.assertIn("`crop(0)` empties the cache", str(errors[1]))
        # Nor does a later warning hold a traceback (with the frames of the calls, and the caches they hold)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cache.crop(0)
        self.assertIsNone(caught[0].message.__traceback__)

    def test_errors_of_a_warning_hook_pass_through(self):
        # An error of the warning machinery, e.g. of a `showwarning` hook, is not taken for the warning itself
        def showwarning(*args, **kwargs):
            raise FutureWarning("raised by the hook")

        error = None
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = showwarning
            try:
                self._cache().crop(0)
            except FutureWarning as raised:
                error = raised
        self.assertEqual(str(error), "raised by the hook")
        frames = []
        traceback = error.__traceback__
        while traceback is not None:
            frames.append(traceback.tb_frame.f_code.co_name)
            traceback = traceback.tb_next
        self.assertIn("showwarning", frames)

    def test_encoder_decoder_absolute_crop_warns_at_the_caller(self):
        cache = EncoderDecoderCache(self._cache(), DynamicCache())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cache.crop(0)
        self.assertEqual([w.filename for w in caught if issubclass(w.category, FutureWarning)], [__file__])
        self.assertEqual(cache.get_seq_length(), 0)

    @parameterized.expand(
        [
            ("nothing", (), {"tokens_to_remove": 0}, 5),
            ("its_length", (5,), {}, 5),
            ("some", (), {"tokens_to_remove": -2}, 3),
            ("more_than_all", (-9,), {}, 0),
        ]
    )
    def test_encoder_decoder_crop_removes_only_self_attention_tokens(self, _, args, kwargs, expected_length):
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        _fill(cache, 5)
        cache.cross_attention_cache.update(_tokens(10, 4), _tokens(10, 4), layer_idx=0)
        _crop_quietly(cache, *args, **kwargs)
        self.assertTrue(torch.equal(cache.self_attention_cache.layers[0].keys, _tokens(0, expected_length)))
        self.assertTrue(torch.equal(cache.cross_attention_cache.layers[0].keys, _tokens(10, 4)))
        self.assertEqual(cache.get_seq_length(), expected_length)

    def test_encoder_decoder_crop_goes_through_the_inner_crop(self):
        # A subclass that overrides `crop` (to refuse, or to move side state) must see the crop
        class RecordingCache(DynamicCache):
            def crop(self, *args, **kwargs):
                self.calls.append(args)
                super().crop(*args, **kwargs)

        self_attention_cache = RecordingCache()
        self_attention_cache.calls = []
        _fill(self_attention_cache, 3)
        cache = EncoderDecoderCache(self_attention_cache, DynamicCache())
        cache.crop(-1)
        self.assertEqual(self_attention_cache.calls, [(-1,)])
        self.assertEqual(cache.get_seq_length(), 2)

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

    def test_max_length_keyword(self):
        # Callers pass the first argument by name too (`crop(max_length=...)`, `crop(maximum_length=...)`)
        cache = self._cache(num_tokens=5)
        cache.crop(max_length=-2)
        self.assertEqual(cache.get_seq_length(), 3)
        torch.testing.assert_close(cache.layers[0].keys, _tokens(0, 3), rtol=0, atol=0)
        cache = EncoderDecoderCache(self._cache(num_tokens=5), DynamicCache())
        cache.crop(maximum_length=-2)
        self.assertEqual(cache.get_seq_length(), 3)

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

    @parameterized.expand([(-1,), (-3,), (-5,), (1,), (2,)])
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


# --------------------------------------------------------------------------------------------------------------------
# `crop` on the other cache layer families: static, quantized, linear attention, hybrid and model-specific layers. Each
# layer either crops exactly (its tensors, side tensors, lengths and mask sizes describe the kept tokens, and the next
# update lands right after them) or refuses with a clear error before anything changed. Token `p` is stored with the
# code `p + 1` (`_codes`), so that an empty (zeroed) static slot is told apart from a token.

MAX_CACHE_LEN = 8
WINDOW = 4
KERNEL = 2  # conv kernel of the linear attention layers: a 3-token prefill records 1 token of past

FULL_ROLLBACKS = [(0,), (-3,), (-5,)]
PARTIAL_CROPS = [(2,), (-1,)]


def _exact_quantized_layer(residual_length):
    """A `QuantizedLayer` whose quantization is exact, to check its crop token by token without a backend."""

    class ExactQuantizedLayer(QuantizedLayer):
        def _quantize(self, tensor, axis):
            return tensor.clone()

        def _dequantize(self, q_tensor):
            return q_tensor

    return ExactQuantizedLayer(residual_length=residual_length)


def _codes(start, length, head_dim=1):
    """Key states `[1, 1, length, head_dim]` holding the codes `start + 1 ... start + length`."""
    codes = torch.arange(start + 1, start + length + 1, dtype=torch.float32)
    return codes.reshape(1, 1, length, 1).expand(1, 1, length, head_dim).contiguous()


def _conv_inputs(start, length):
    """Conv inputs `[1, 2, length]` (2 channels) of the tokens `start ... start + length - 1`."""
    return torch.arange(start + 1, start + length + 1, dtype=torch.float32).expand(1, 2, length).contiguous()


def _static_buffer(length, max_cache_len=MAX_CACHE_LEN):
    """What a static layer holding the tokens `0 ... length - 1` stores: their codes, then empty (zero) slots."""
    buffer = torch.zeros(1, 1, max_cache_len, 1)
    buffer[:, :, :length] = _codes(0, length)
    return buffer


# The buffers of the static layers whose `crop` only moves their write position back (no device sync): the slots at or
# beyond it keep stale states, which the causal mask hides and the next update overwrites. Attribute: (counter, axis)
_REWOUND_BUFFERS = {
    "keys": ("cumulative_length", 2),
    "values": ("cumulative_length", 2),
    "indexer_keys": ("indexer_cumulative_length", 1),
    "idx_keys": ("idx_cumulative_length", 2),
}


def _shown(layer, name, tensor=None):
    """
    The buffer `name` of `layer` (or `tensor`, a buffer `update` returned) as attention sees it: for static layers
    (sliding-window ones excepted: they empty the freed slots) the slots at or beyond the write position are emptied.
    """
    tensor = getattr(layer, name) if tensor is None else tensor
    if tensor is None or not isinstance(layer, StaticLayer) or isinstance(layer, StaticSlidingWindowLayer):
        return tensor
    counter, axis = _REWOUND_BUFFERS[name]
    count = int(getattr(layer, counter).reshape(-1)[0])
    index = torch.arange(tensor.shape[axis]).reshape([-1] + [1] * (tensor.dim() - axis - 1))
    return tensor.masked_fill(index >= count, 0)


def _shown_snapshot(cache):
    """`_full_snapshot` with the static buffers as attention sees them (see `_shown`)."""
    snapshot = _full_snapshot(cache)
    for layer, attributes in zip(cache.layers, snapshot):
        for name in _REWOUND_BUFFERS:
            if isinstance(attributes.get(name), torch.Tensor):
                attributes[name] = _shown(layer, name)
    return snapshot


def _update(cache, start, length, layer_idx=0):
    """Appends the tokens `start ... start + length - 1` to the attention part of a layer (and its side tensors)."""
    keys = _codes(start, length)
    returned = cache.update(keys, -keys, layer_idx=layer_idx)
    layer = cache.layers[layer_idx]
    if hasattr(layer, "update_indexer"):
        cache.update_indexer(keys[:, 0], layer_idx=layer_idx)
    if hasattr(layer, "update_index"):
        layer.update_index(keys.clone())
    return returned


def _fill_codes(cache, num_tokens, step=None, layer_idx=0):
    step = step or num_tokens
    for start in range(0, num_tokens, step):
        _update(cache, start, min(step, num_tokens - start), layer_idx)


def _copy(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(item) for item in value)
    return value


def _full_snapshot(cache):
    """A deep copy of every attribute of every layer, to check that a refused crop changed nothing."""
    return [_copy(vars(layer)) for layer in cache.layers]


class CropTestMixin:
    def assertSameState(self, got, expected, path="layer"):
        """Recursive exact comparison of snapshots (tensors bit for bit, including their dtype and shape)."""
        if isinstance(expected, torch.Tensor):
            self.assertIsInstance(got, torch.Tensor, path)
            self.assertEqual((got.shape, got.dtype), (expected.shape, expected.dtype), path)
            self.assertTrue(torch.equal(got, expected), f"{path} changed")
        elif isinstance(expected, dict):
            self.assertEqual(set(got), set(expected), path)
            for key in expected:
                self.assertSameState(got[key], expected[key], f"{path}.{key}")
        elif isinstance(expected, (list, tuple)):
            self.assertEqual(len(got), len(expected), path)
            for idx, (got_item, expected_item) in enumerate(zip(got, expected)):
                self.assertSameState(got_item, expected_item, f"{path}[{idx}]")
        else:
            self.assertEqual(got, expected, path)

    def assertRefusedAtomically(self, cache, argument, error_type, *expected_in_message):
        """`crop(argument)` raises `error_type` naming `expected_in_message`, and leaves every layer bit-identical."""
        before = _full_snapshot(cache)
        with self.assertRaises(error_type) as context:
            _crop_quietly(cache, argument)
        for expected in expected_in_message:
            self.assertIn(expected, str(context.exception))
        self.assertSameState(_full_snapshot(cache), before, "cache")
        return context.exception

    def assertExact(self, got, expected, msg=None):
        torch.testing.assert_close(got, expected, rtol=0, atol=0, msg=msg)


@require_torch
class StaticLayersCropTest(CropTestMixin, unittest.TestCase):
    """`StaticLayer` and `StaticIndexedLayer` (`StaticCache`) rewind their write position in place."""

    def _cache(self, layer_name):
        layer_class = {"static": StaticLayer, "static_indexed": StaticIndexedLayer}[layer_name]
        return Cache(layers=[layer_class(max_cache_len=MAX_CACHE_LEN)])

    def assertStaticLayerHolds(self, layer, num_tokens):
        self.assertEqual(int(layer.get_seq_length()), num_tokens)
        self.assertEqual(int(layer.cumulative_length), num_tokens)
        # Attention sees what a fresh layer given the kept tokens holds (the freed slots are hidden, see `_shown`)
        self.assertExact(_shown(layer, "keys"), _static_buffer(num_tokens))
        self.assertExact(_shown(layer, "values"), -_static_buffer(num_tokens))
        self.assertEqual(layer.get_mask_sizes(1), (MAX_CACHE_LEN, 0))
        if isinstance(layer, StaticIndexedLayer):
            self.assertEqual(int(layer.indexer_cumulative_length), num_tokens)
            self.assertExact(_shown(layer, "indexer_keys"), _static_buffer(num_tokens)[:, 0])

    @parameterized.expand(
        [
            (layer_name, step, *case)
            for layer_name in ("static", "static_indexed")
            for step in (3, 1)
            for case in CROP_CASES
        ]
    )
    def test_crop_rewinds_and_next_update_lands_right(self, layer_name, step, argument, expected_length):
        cache = self._cache(layer_name)
        _fill_codes(cache, 3, step=step)
        layer = cache.layers[0]
        addresses = (layer.keys.data_ptr(), layer.values.data_ptr(), layer.cumulative_length.data_ptr())
        counter = getattr(layer, "indexer_cumulative_length", None)

        _crop_quietly(cache, argument)

        self.assertStaticLayerHolds(layer, expected_length)
        self.assertEqual(cache.get_seq_length(), expected_length)
        # In place: the static addresses (used by cudagraphs) are kept
        self.assertEqual(
            (layer.keys.data_ptr(), layer.values.data_ptr(), layer.cumulative_length.data_ptr()), addresses
        )
        self.assertIs(getattr(layer, "indexer_cumulative_length", None), counter)

        keys, values = _update(cache, expected_length, 2)
        self.assertExact(_shown(layer, "keys", keys), _static_buffer(expected_length + 2))
        self.assertExact(_shown(layer, "values", values), -_static_buffer(expected_length + 2))
        self.assertStaticLayerHolds(layer, expected_length + 2)

    def test_static_cache_from_config(self):
        config = LlamaConfig(
            vocab_size=16, hidden_size=8, num_hidden_layers=2, num_attention_heads=1, num_key_value_heads=1
        )
        cache = StaticCache(config=config, max_cache_len=MAX_CACHE_LEN)
        for layer_idx in range(2):
            _fill_codes(cache, 5, layer_idx=layer_idx)

        cache.crop(-2)
        for layer in cache.layers:
            self.assertStaticLayerHolds(layer, 3)
        cache.crop(-7)
        for layer in cache.layers:
            self.assertStaticLayerHolds(layer, 0)
        _fill_codes(cache, 2)
        self.assertStaticLayerHolds(cache.layers[0], 2)


@require_torch
class StaticSlidingWindowLayerCropTest(CropTestMixin, unittest.TestCase):
    """`StaticSlidingWindowLayer` can roll back as long as no slot was overwritten; a full rollback always works."""

    def _cache(self):
        return Cache(layers=[StaticSlidingWindowLayer(max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW)])

    def assertSameAsFresh(self, cache, num_tokens):
        """The layer behaves exactly like a fresh one that received `num_tokens` tokens, now and after an update."""
        reference = self._cache()
        _fill_codes(reference, num_tokens, step=1)
        layer, reference_layer = cache.layers[0], reference.layers[0]
        for query_length in (1, 3):
            self.assertEqual(layer.get_mask_sizes(query_length), reference_layer.get_mask_sizes(query_length))
        self.assertEqual(layer.get_seq_length(), num_tokens)
        self.assertEqual(layer.cumulative_length_int, num_tokens)
        self.assertEqual(int(layer.cumulative_length), int(reference_layer.cumulative_length))
        self.assertExact(layer.keys, reference_layer.keys if reference_layer.is_initialized else 0 * layer.keys)
        for got, expected in zip(_update(cache, num_tokens, 2), _update(reference, num_tokens, 2)):
            self.assertExact(got, expected)
        self.assertExact(layer.keys, reference_layer.keys)
        self.assertEqual(layer.get_mask_sizes(1), reference_layer.get_mask_sizes(1))

    @parameterized.expand(
        [(3, *case) for case in CROP_CASES]
        # Exactly a window's worth of tokens: no slot was overwritten yet
        + [(WINDOW, 2, 2), (WINDOW, 0, 0), (WINDOW, -1, 3), (WINDOW, -3, 1), (WINDOW, -4, 0), (WINDOW, -6, 0)]
    )
    def test_crop_within_the_window(self, num_tokens, argument, expected_length):
        cache = self._cache()
        _fill_codes(cache, num_tokens, step=1)
        addresses = (cache.layers[0].keys.data_ptr(), cache.layers[0].values.data_ptr())

        _crop_quietly(cache, argument)

        self.assertEqual((cache.layers[0].keys.data_ptr(), cache.layers[0].values.data_ptr()), addresses)
        self.assertSameAsFresh(cache, expected_length)

    @parameterized.expand([(num_tokens, argument) for num_tokens in (WINDOW + 1, 6) for argument in (-1, -3, 2)])
    def test_partial_crop_beyond_the_window_raises(self, num_tokens, argument):
        cache = self._cache()
        _fill_codes(cache, num_tokens, step=1)
        self.assertRefusedAtomically(
            cache, argument, ValueError, "StaticSlidingWindowLayer", "crop(-cache.get_seq_length())"
        )

    @parameterized.expand([(0,), (-6,), (-9,)])
    def test_full_rollback_beyond_the_window_then_append(self, argument):
        cache = self._cache()
        _fill_codes(cache, 6, step=1)
        _crop_quietly(cache, argument)
        self.assertSameAsFresh(cache, 0)


@require_torch
class QuantizedLayerCropTest(CropTestMixin, unittest.TestCase):
    """`QuantizedLayer` crops both its quantized and its residual (original precision) parts."""

    @parameterized.expand(
        [
            (residual_length, step, *case)
            for residual_length in (2, 8)  # 2: 3 tokens reach the quantized part; 8: they stay in the residual one
            for step in (3, 1)
            for case in CROP_CASES
        ]
    )
    def test_crop_both_parts_then_append(self, residual_length, step, argument, expected_length):
        cache = Cache(layers=[_exact_quantized_layer(residual_length=residual_length)])
        _fill_codes(cache, 3, step=step)
        layer = cache.layers[0]

        _crop_quietly(cache, argument)

        self.assertEqual(cache.get_seq_length(), expected_length)
        self.assertEqual(layer.cumulative_length, expected_length)
        self.assertEqual(layer.get_mask_sizes(1), (expected_length + 1, 0))
        if expected_length == 0:
            # Back to a new layer: the next update quantizes from scratch
            self.assertFalse(layer.is_initialized)
        else:
            stored = [layer._dequantize(layer._quantized_keys)] + ([layer.keys] if layer.keys.dim() == 4 else [])
            self.assertExact(torch.cat(stored, dim=-2), _codes(0, expected_length))

        keys, values = _update(cache, expected_length, 2)
        self.assertExact(keys, _codes(0, expected_length + 2))
        self.assertExact(values, -_codes(0, expected_length + 2))
        self.assertEqual(cache.get_seq_length(), expected_length + 2)
        # And the update after that one still sees exactly the right tokens
        keys, _ = _update(cache, expected_length + 2, 1)
        self.assertExact(keys, _codes(0, expected_length + 3))

    def test_crop_of_the_residual_part_keeps_the_quantized_part(self):
        # 3 tokens at once go to the quantized part, the next one to the residual part: removing it keeps the quantized
        # tensors as they are (quantizing them again would lose precision with a real quantizer)
        cache = Cache(layers=[_exact_quantized_layer(residual_length=2)])
        _update(cache, 0, 3)
        _update(cache, 3, 1)
        layer = cache.layers[0]
        self.assertEqual(layer.keys.shape[-2], 1)
        quantized_keys, quantized_values = layer._quantized_keys, layer._quantized_values
        cache.crop(-1)
        self.assertEqual(cache.get_seq_length(), 3)
        self.assertIs(layer._quantized_keys, quantized_keys)
        self.assertIs(layer._quantized_values, quantized_values)
        self.assertEqual(layer.keys.shape[-2], 0)


BACKEND_CASES = [
    (step, argument, expected_length)
    for step in (5, 1)  # 5 tokens at once, or 1 by 1 (with `residual_length=2`, both parts are then crossed)
    for argument, expected_length in [(-1, 4), (-3, 2), (2, 2), (-5, 0), (0, 0), (-9, 0)]
]


@require_torch
class QuantizedBackendsCropTest(CropTestMixin, unittest.TestCase):
    """`QuantizedCache` with the real backends (optional dependencies): the kept tokens survive re-quantization."""

    def _check_backend(self, backend, nbits, step, argument, expected_length):
        config = LlamaConfig(vocab_size=16, hidden_size=8, num_hidden_layers=2, num_attention_heads=1, head_dim=8)
        cache = QuantizedCache(backend=backend, config=config, nbits=nbits, q_group_size=8, residual_length=2)
        for layer_idx in range(2):
            for start in range(0, 5, step):
                states = _codes(start, step, head_dim=8)
                cache.update(states, -states, layer_idx=layer_idx)

        _crop_quietly(cache, argument)

        self.assertEqual([layer.get_seq_length() for layer in cache.layers], [expected_length] * 2)
        states = _codes(expected_length, 1, head_dim=8)
        keys, values = cache.update(states, -states, layer_idx=0)
        # Within one quantization step of the stored codes (1 ... 5): rounding to a level costs half a step, and the
        # backends' fitted scales and zero points (stored in low precision) can add up to another half (measured:
        # quanto 4-bit 0, hqq 8-bit 0.70 step). A stale or missing token is off by at least 1 (3.75 steps at 4 bits).
        quantization_step = 5 / (2**nbits - 1)
        expected = _codes(0, expected_length + 1, head_dim=8)
        torch.testing.assert_close(keys, expected, rtol=0, atol=quantization_step)
        torch.testing.assert_close(values, -expected, rtol=0, atol=quantization_step)

    @parameterized.expand(BACKEND_CASES)
    @unittest.skipUnless(is_optimum_quanto_available(), "test requires optimum-quanto")
    def test_quanto(self, step, argument, expected_length):
        self._check_backend("quanto", 4, step, argument, expected_length)

    @parameterized.expand(BACKEND_CASES)
    @unittest.skipUnless(is_hqq_available(), "test requires hqq")
    def test_hqq(self, step, argument, expected_length):
        self._check_backend("hqq", 8, step, argument, expected_length)

    @unittest.skipUnless(is_optimum_quanto_available(), "test requires optimum-quanto")
    def test_quanto_repeated_rollbacks_do_not_compound_the_error(self):
        # A crop into the quantized part quantizes the kept tokens again (as every flush of the residual part does).
        # With quanto, quantizing dequantized values gives them back: 50 rollbacks leave the kept tokens as they were
        config = LlamaConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, head_dim=8)
        cache = QuantizedCache(backend="quanto", config=config, nbits=4, q_group_size=8, residual_length=2)
        generator = torch.Generator().manual_seed(0)
        prompt = torch.randn(1, 1, 12, 8, generator=generator)
        keys, _ = cache.update(prompt, prompt.clone(), layer_idx=0)
        kept, _ = cache.update(prompt[..., :1, :], prompt[..., :1, :], layer_idx=0)
        kept = kept[..., :6, :].clone()
        cache.crop(-1)
        for _ in range(50):
            drafts = torch.randn(1, 1, 3, 8, generator=generator)
            cache.update(drafts, drafts.clone(), layer_idx=0)
            cache.crop(-9)  # the drafts and 6 tokens of the quantized part
            refill = prompt[..., 6:12, :]
            cache.update(refill, refill.clone(), layer_idx=0)
        keys, _ = cache.update(prompt[..., :1, :], prompt[..., :1, :], layer_idx=0)
        torch.testing.assert_close(keys[..., :6, :], kept, rtol=0, atol=1e-6)


def _linear_cache(record_past=True, attention_layer=True, num_linear_layers=1):
    """A hybrid-model-like cache: a full-attention layer, then linear attention layer(s)."""
    layers = ([DynamicLayer()] if attention_layer else []) + [LinearAttentionLayer() for _ in range(num_linear_layers)]
    cache = Cache(layers=layers)
    if record_past:
        cache.activate_past_recording()
    return cache


def _feed(cache, start, length, linear="conv", kernel=KERNEL):
    """Feeds the tokens `start ... start + length - 1` to every layer; returns what `update_conv_state` returned.

    Linear attention layers are fed like Inkling's short convolutions (the conv input of the new tokens, with the
    kernel size), and with `linear="conv+recurrent"` also a recurrent state, which summarizes every token seen (here,
    their number). With `linear="none"`, they receive nothing (placeholder layers).
    """
    conv_outputs = []
    for layer_idx, layer in enumerate(cache.layers):
        if not isinstance(layer, LinearAttentionLayer) or isinstance(layer, (DynamicLayer, StaticLayer)):
            _update(cache, start, length, layer_idx)
        if isinstance(layer, LinearAttentionLayer) and linear != "none":
            conv_outputs.append(
                cache.update_conv_state(_conv_inputs(start, length), layer_idx, conv_kernel_size=kernel)
            )
            if linear == "conv+recurrent":
                cache.update_recurrent_state(torch.full((1, 2), float(start + length)), layer_idx)
    return conv_outputs


def _conv_window(num_tokens, kernel=KERNEL):
    """The `kernel` conv inputs that precede the next token of a `num_tokens`-token sequence."""
    return _conv_inputs(num_tokens - kernel, kernel)


@require_torch
class LinearAttentionLayerCropTest(CropTestMixin, unittest.TestCase):
    """`LinearAttentionLayer`: conv states roll back by their recorded past; recurrent states can only be reset."""

    def assertLinearLayerReset(self, layer):
        self.assertFalse(any(layer.has_previous_state.values()))
        for state_idx in range(layer.number_of_states):
            if layer.is_recurrent_states_initialized[state_idx]:
                self.assertEqual(layer.recurrent_states[state_idx].abs().sum().item(), 0)

    @parameterized.expand([(2, 2), (-1, 2)])
    def test_partial_crop_of_recorded_conv_states(self, argument, expected_length):
        cache = _linear_cache()
        _feed(cache, 0, 3)
        _crop_quietly(cache, argument)

        linear_layer = cache.layers[1]
        self.assertEqual(cache.get_seq_length(), expected_length)
        self.assertExact(linear_layer.conv_states[0], _conv_window(expected_length))
        self.assertTrue(linear_layer.has_previous_state[0])
        # The next conv step sees the kept tokens, then the new one
        (conv_states,) = _feed(cache, expected_length, 1)
        self.assertExact(conv_states[..., -KERNEL:], _conv_window(expected_length + 1))

    def test_each_crop_removes_at_most_what_was_recorded_since_the_previous_one(self):
        cache = _linear_cache()
        _feed(cache, 0, 3)
        cache.crop(-1)
        for start in (2, 3, 4):
            _feed(cache, start, 1)
        # 5 tokens, the last 3 recorded since the previous crop (which kept only the kernel's worth)
        cache.crop(-3)
        self.assertExact(cache.layers[1].conv_states[0], _conv_window(2))
        self.assertEqual(cache.get_seq_length(), 2)
        self.assertRefusedAtomically(cache, -1, RuntimeError, "LinearAttentionLayer")
        (conv_states,) = _feed(cache, 2, 1)
        self.assertExact(conv_states[..., -KERNEL:], _conv_window(3))

    @parameterized.expand([(record_past, *case) for record_past in (True, False) for case in PARTIAL_CROPS])
    def test_partial_crop_with_recurrent_states_raises(self, record_past, argument):
        cache = _linear_cache(record_past)
        _feed(cache, 0, 3, "conv+recurrent")
        self.assertRefusedAtomically(
            cache, argument, RuntimeError, "LinearAttentionLayer", "crop(-cache.get_seq_length())"
        )

    @parameterized.expand(PARTIAL_CROPS)
    def test_partial_crop_without_recorded_past_raises(self, argument):
        cache = _linear_cache(record_past=False)
        _feed(cache, 0, 3)
        self.assertRefusedAtomically(cache, argument, RuntimeError, "LinearAttentionLayer", "activate_past_recording")

    def test_partial_crop_beyond_the_recorded_past_raises(self):
        # A 4-token kernel and a 3-token prefill: no past token was recorded beyond the kernel
        cache = _linear_cache()
        _feed(cache, 0, 3, kernel=4)
        self.assertRefusedAtomically(cache, -1, RuntimeError, "LinearAttentionLayer")

    @parameterized.expand(
        [
            (linear, record_past, *case)
            for linear in ("conv", "conv+recurrent")
            for record_past in (True, False)
            for case in FULL_ROLLBACKS
        ]
    )
    def test_full_rollback_resets_then_next_update_is_a_prefill(self, linear, record_past, argument):
        cache = _linear_cache(record_past)
        _feed(cache, 0, 3, linear)
        layer = cache.layers[1]
        states = (layer.conv_states[0], layer.recurrent_states[0])
        _crop_quietly(cache, argument)

        self.assertEqual(cache.get_seq_length(), 0)
        self.assertLinearLayerReset(layer)
        (conv_states,) = _feed(cache, 0, 2, linear)
        self.assertExact(conv_states[..., -KERNEL:], _conv_window(2))
        self.assertEqual(cache.get_seq_length(), 2)
        if linear == "conv+recurrent":
            self.assertEqual(layer.recurrent_states[0].max().item(), 2)
        # The states keep their static address (reset and updated in place), but recorded conv states, which grow
        if not record_past:
            self.assertIs(layer.conv_states[0], states[0])
        if linear == "conv+recurrent":
            self.assertIs(layer.recurrent_states[0], states[1])

    @parameterized.expand(CROP_CASES)
    def test_never_updated_placeholder_layer(self, argument, expected_length):
        # E.g. the `moe` layers of NemotronH: linear attention placeholders that never receive states
        cache = _linear_cache()
        _feed(cache, 0, 3, "none")
        _crop_quietly(cache, argument)
        self.assertEqual(cache.get_seq_length(), expected_length)
        self.assertFalse(cache.layers[1].is_conv_states_initialized[0])

    def test_cache_of_linear_layers_only(self):
        cache = _linear_cache(attention_layer=False, num_linear_layers=2)
        _feed(cache, 0, 3)
        # No sequence length: an absolute target cannot be honoured
        self.assertRefusedAtomically(cache, 2, ValueError, "crop(-k)")
        cache.crop(-1)
        for layer in cache.layers:
            self.assertExact(layer.conv_states[0], _conv_window(2))
        _crop_quietly(cache, 0)
        for layer in cache.layers:
            self.assertLinearLayerReset(layer)


HYBRID_LAYERS = ["full", "sliding", "static_full", "static_sliding"]


def _hybrid_layer(name):
    if name == "full":
        return LinearAttentionAndFullAttentionLayer()
    if name == "sliding":
        return LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW)
    if name == "static_full":
        return LinearAttentionAndStaticFullAttentionLayer(max_cache_len=MAX_CACHE_LEN)
    if name == "static_sliding":
        return LinearAttentionAndStaticSlidingWindowAttentionLayer(max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW)
    # Windows that the tests' 5 tokens do not fill
    if name == "wide_sliding":
        return LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=MAX_CACHE_LEN)
    if name == "wide_static_sliding":
        return LinearAttentionAndStaticSlidingWindowAttentionLayer(
            max_cache_len=MAX_CACHE_LEN, sliding_window=MAX_CACHE_LEN
        )
    raise ValueError(name)


def _hybrid_cache(name, record_past=True):
    cache = Cache(layers=[_hybrid_layer(name)])
    if record_past:
        cache.activate_past_recording()
    return cache


class HybridCropChecks(CropTestMixin):
    """The checks of the hybrid layer tests, for the hybrid layer `name` (see `_hybrid_layer`)."""

    def assertSameAsFresh(self, cache, name, num_tokens, linear="conv"):
        """Both parts behave like those of a fresh layer that received `num_tokens` tokens, now and after an update."""
        reference = _hybrid_cache(name)
        if num_tokens:
            _feed(reference, 0, num_tokens, linear)
        layer, reference_layer = cache.layers[0], reference.layers[0]
        self.assertEqual(int(layer.get_seq_length()), num_tokens)
        for query_length in (1, 3):
            self.assertEqual(layer.get_mask_sizes(query_length), reference_layer.get_mask_sizes(query_length))
        self.assertEqual(layer.has_previous_state[0], num_tokens > 0)
        if num_tokens:
            self.assertExact(_shown(layer, "keys"), _shown(reference_layer, "keys"))
            self.assertExact(layer.conv_states[0][..., -KERNEL:], reference_layer.conv_states[0][..., -KERNEL:])
        (conv_states,) = _feed(cache, num_tokens, 2, linear)
        (expected_conv_states,) = _feed(reference, num_tokens, 2, linear)
        self.assertExact(conv_states[..., -KERNEL:], expected_conv_states[..., -KERNEL:])
        self.assertExact(_shown(layer, "keys"), _shown(reference_layer, "keys"))
        self.assertExact(_shown(layer, "values"), _shown(reference_layer, "values"))
        self.assertEqual(layer.get_mask_sizes(1), reference_layer.get_mask_sizes(1))
        self.assertEqual(int(layer.get_seq_length()), num_tokens + 2)

    def check_conv_only_hybrid_crops_both_parts(self, name, argument, expected_length):
        cache = _hybrid_cache(name)
        _feed(cache, 0, 3)
        _crop_quietly(cache, argument)
        self.assertSameAsFresh(cache, name, expected_length)

    def check_crop_of_several_recorded_tokens(self, name, crops):
        # A prefill of 2 tokens, then an update of 3, all recorded: 3 tokens can be removed. The first crop goes through
        # the cache (removing 5 or more is a full rollback), the next ones through the layer itself (`crop(0)`: a full
        # rollback of a layer already rolled back)
        cache = _hybrid_cache(name)
        _feed(cache, 0, 2)
        _feed(cache, 2, 3)
        layer = cache.layers[0]
        counter = getattr(layer, "cumulative_length", None)
        address = counter.data_ptr() if isinstance(counter, torch.Tensor) else None
        cache.crop(crops[0])
        for argument in crops[1:]:
            _crop_quietly(layer, argument)
        self.assertSameAsFresh(cache, name, max(5 + crops[0], 0))
        if address is not None:
            # A static address (`torch._dynamo.mark_static_address`): moved in place
            self.assertIs(layer.cumulative_length, counter)
            self.assertEqual(counter.data_ptr(), address)

    def check_partial_crop_with_recurrent_states_changes_neither_part(self, name, argument):
        cache = _hybrid_cache(name)
        _feed(cache, 0, 3, "conv+recurrent")
        self.assertRefusedAtomically(cache, argument, RuntimeError, type(cache.layers[0]).__name__)

    def check_partial_crop_without_recorded_past_changes_neither_part(self, name, argument):
        cache = _hybrid_cache(name, record_past=False)
        _feed(cache, 0, 3)
        self.assertRefusedAtomically(cache, argument, RuntimeError, "activate_past_recording")

    def check_full_rollback_with_recurrent_states_resets_both_parts(self, name, argument):
        cache = _hybrid_cache(name)
        _feed(cache, 0, 3, "conv+recurrent")
        _crop_quietly(cache, argument)
        self.assertEqual(cache.layers[0].recurrent_states[0].abs().sum().item(), 0)
        self.assertSameAsFresh(cache, name, 0, "conv+recurrent")

    def check_beyond_the_window_only_full_rollback(self, name):
        cache = _hybrid_cache(name)
        for start in range(6):
            _feed(cache, start, 1)
        # The linear part could remove a token, the sliding part cannot: neither is cropped
        self.assertRefusedAtomically(cache, -1, ValueError, "crop(-cache.get_seq_length())")
        cache.crop(-6)
        self.assertSameAsFresh(cache, name, 0)


@require_torch
class HybridLayersCropTest(HybridCropChecks, unittest.TestCase):
    """Layers holding linear attention and dynamic attention states crop both parts, or neither."""

    @parameterized.expand([(name, *case) for name in ("full", "sliding") for case in CROP_CASES])
    def test_conv_only_hybrid_crops_both_parts(self, name, argument, expected_length):
        self.check_conv_only_hybrid_crops_both_parts(name, argument, expected_length)

    @parameterized.expand([(name, *case) for name in ("full", "sliding") for case in PARTIAL_CROPS])
    def test_partial_crop_with_recurrent_states_changes_neither_part(self, name, argument):
        self.check_partial_crop_with_recurrent_states_changes_neither_part(name, argument)

    @parameterized.expand([(name, *case) for name in ("full", "sliding") for case in PARTIAL_CROPS])
    def test_partial_crop_without_recorded_past_changes_neither_part(self, name, argument):
        self.check_partial_crop_without_recorded_past_changes_neither_part(name, argument)

    @parameterized.expand([(name, *case) for name in ("full", "sliding") for case in FULL_ROLLBACKS])
    def test_full_rollback_with_recurrent_states_resets_both_parts(self, name, argument):
        self.check_full_rollback_with_recurrent_states_resets_both_parts(name, argument)

    @parameterized.expand(
        [
            (name, crops)
            for name in ("full", "wide_sliding")
            for crops in ((-1,), (-2,), (-3,), (-5,), (-9,), (-5, 0), (-9, 0))
        ]
    )
    def test_crop_of_several_recorded_tokens(self, name, crops):
        self.check_crop_of_several_recorded_tokens(name, crops)

    def test_beyond_the_window_only_full_rollback(self):
        self.check_beyond_the_window_only_full_rollback("sliding")


@require_torch
class StaticHybridLayersCropTest(HybridCropChecks, unittest.TestCase):
    """Layers holding linear attention and static attention states crop both parts, or neither."""

    @parameterized.expand([(name, *case) for name in ("static_full", "static_sliding") for case in CROP_CASES])
    def test_conv_only_hybrid_crops_both_parts(self, name, argument, expected_length):
        self.check_conv_only_hybrid_crops_both_parts(name, argument, expected_length)

    @parameterized.expand([(name, *case) for name in ("static_full", "static_sliding") for case in PARTIAL_CROPS])
    def test_partial_crop_with_recurrent_states_changes_neither_part(self, name, argument):
        self.check_partial_crop_with_recurrent_states_changes_neither_part(name, argument)

    @parameterized.expand([(name, *case) for name in ("static_full", "static_sliding") for case in PARTIAL_CROPS])
    def test_partial_crop_without_recorded_past_changes_neither_part(self, name, argument):
        self.check_partial_crop_without_recorded_past_changes_neither_part(name, argument)

    @parameterized.expand([(name, *case) for name in ("static_full", "static_sliding") for case in FULL_ROLLBACKS])
    def test_full_rollback_with_recurrent_states_resets_both_parts(self, name, argument):
        self.check_full_rollback_with_recurrent_states_resets_both_parts(name, argument)

    @parameterized.expand(
        [
            (name, crops)
            for name in ("static_full", "wide_static_sliding")
            for crops in ((-1,), (-2,), (-3,), (-5,), (-9,), (-5, 0), (-9, 0))
        ]
    )
    def test_crop_of_several_recorded_tokens(self, name, crops):
        self.check_crop_of_several_recorded_tokens(name, crops)

    def test_beyond_the_window_only_full_rollback(self):
        self.check_beyond_the_window_only_full_rollback("static_sliding")


@require_torch
class MiniMaxM3VLCropTest(CropTestMixin, unittest.TestCase):
    """The MiniMax-M3-VL sparse layers keep their index keys in lockstep with the key and value states."""

    @parameterized.expand([(name, *case) for name in ("dynamic", "static") for case in CROP_CASES])
    def test_index_keys_follow_the_crop(self, name, argument, expected_length):
        layer = (
            MiniMaxM3VLSparseCacheLayer() if name == "dynamic" else MiniMaxM3VLSparseStaticCacheLayer(MAX_CACHE_LEN)
        )
        cache = Cache(layers=[layer])
        _fill_codes(cache, 3, step=1)
        counter = getattr(layer, "idx_cumulative_length", None)

        _crop_quietly(cache, argument)
        self.assertEqual(int(layer.get_seq_length()), expected_length)
        # The static index counter moves in place (a static address)
        self.assertIs(getattr(layer, "idx_cumulative_length", None), counter)
        if name == "dynamic":
            self.assertExact(layer.keys, _codes(0, expected_length))
            self.assertExact(layer.idx_keys, _codes(0, expected_length))
        else:
            self.assertExact(_shown(layer, "keys"), _static_buffer(expected_length))
            self.assertExact(_shown(layer, "idx_keys"), _static_buffer(expected_length))
            self.assertEqual(int(layer.idx_cumulative_length), expected_length)

        _update(cache, expected_length, 2)
        expected = _codes(0, expected_length + 2) if name == "dynamic" else _static_buffer(expected_length + 2)
        self.assertExact(_shown(layer, "keys"), expected)
        self.assertExact(_shown(layer, "idx_keys"), expected)


@require_torch
class MiniMaxCacheCropTest(CropTestMixin, unittest.TestCase):
    @parameterized.expand([(argument,) for argument, _ in CROP_CASES])
    def test_refuses_clearly(self, argument):
        cache = MiniMaxCache()
        _fill_codes(cache, 3)
        cache.set_linear_cache(1, torch.ones(1, 2))
        before = _copy(cache.linear_cache)
        error = self.assertRefusedAtomically(cache, argument, RuntimeError, "MiniMaxCache")
        self.assertNotIn("doesnot", str(error))
        self.assertSameState(cache.linear_cache, before, "linear_cache")

    def test_refuses_clearly_with_keyword_arguments(self):
        cache = MiniMaxCache()
        _fill_codes(cache, 3)
        for kwargs in ({"max_length": -1}, {"tokens_to_remove": -1}):
            with self.assertRaisesRegex(RuntimeError, "MiniMaxCache"):
                cache.crop(**kwargs)
        self.assertEqual(cache.get_seq_length(), 3)


def _deepseek_cache():
    """A DeepSeek-V4 cache with an HCA layer (compress rate 4) and a CSA layer (compress rate 2)."""
    config = DeepseekV4Config(
        num_hidden_layers=2,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
        sliding_window=MAX_CACHE_LEN,
    )
    return DynamicCache(config=config)


def _feed_deepseek(cache, start, length):
    """Feeds tokens like the DeepSeek-V4 attention: shared key/value states, then each compressor (the compressed
    entry of a window is the mean of its codes). Returns the window positions and entries the compressors got."""
    seen = []
    for layer_idx, layer in enumerate(cache.layers):
        keys = _codes(start, length)
        cache.update(keys, keys, layer_idx=layer_idx)
        for name in layer.buffer_kv:
            kv = _codes(start, length, head_dim=4)[:, 0]
            chunk_kv, chunk_gate, first_window_position = layer.store_compression_weights(name, kv, -kv)
            windows = chunk_kv.shape[1] // layer.compress_rate
            chunk_kv = chunk_kv.reshape(1, windows, layer.compress_rate, 4)
            if isinstance(layer, DeepseekV4CSACache) and windows:
                layer.update_overlap_state(name, chunk_kv, chunk_gate.reshape(chunk_kv.shape), head_dim=2)
            compressed = layer.update_compressor_states(name, chunk_kv.mean(dim=2))
            seen.append((layer_idx, name, first_window_position, compressed.clone()))
    return seen


@require_torch
class DeepseekV4CropTest(CropTestMixin, unittest.TestCase):
    """The compressed attention layers of DeepSeek-V4 roll their compressor buffers back with the sliding window."""

    def assertSameAsFresh(self, cache, num_tokens):
        reference = _deepseek_cache()
        if num_tokens:
            _feed_deepseek(reference, 0, num_tokens)
        for layer, reference_layer in zip(cache.layers, reference.layers):
            self.assertEqual(layer.get_seq_length(), num_tokens)
            self.assertEqual(layer.get_mask_sizes(1), reference_layer.get_mask_sizes(1))
            self.assertEqual(layer.entry_count, reference_layer.entry_count)
            for name in layer.buffer_kv:
                for attribute in ("buffer_kv", "buffer_gate", "compressed_kv", "overlap_kv", "overlap_gate"):
                    got = getattr(layer, attribute, {}).get(name)
                    expected = getattr(reference_layer, attribute, {}).get(name)
                    if expected is None or expected.numel() == 0:
                        self.assertTrue(got is None or got.numel() == 0, f"{attribute}[{name}]")
                    else:
                        self.assertExact(got, expected, f"{attribute}[{name}]")
        # The next tokens are compressed at the right window positions, with the right entries
        for got, expected in zip(_feed_deepseek(cache, num_tokens, 3), _feed_deepseek(reference, num_tokens, 3)):
            self.assertEqual(got[:3], expected[:3])
            self.assertExact(got[3], expected[3])
        for layer, reference_layer in zip(cache.layers, reference.layers):
            self.assertExact(layer.keys, reference_layer.keys)
            self.assertIs(layer.values, layer.keys)

    @parameterized.expand([(3, -1, 2), (3, 2, 2), (5, -1, 4), (5, 4, 4)])
    def test_crop_of_buffered_tokens(self, num_tokens, argument, expected_length):
        # 3 tokens: HCA (windows of 4) buffers them all, CSA (windows of 2) buffers 1
        # 5 tokens: HCA has compressed 1 window and buffers 1, CSA has compressed 2 windows and buffers 1
        cache = _deepseek_cache()
        _feed_deepseek(cache, 0, num_tokens)
        _crop_quietly(cache, argument)
        self.assertSameAsFresh(cache, expected_length)

    @parameterized.expand([(-2,), (3,), (-4,)])
    def test_crop_of_compressed_tokens_raises(self, argument):
        cache = _deepseek_cache()
        _feed_deepseek(cache, 0, 5)
        self.assertRefusedAtomically(
            cache, argument, ValueError, "DeepseekV4HCACache", "crop(-cache.get_seq_length())"
        )

    @parameterized.expand([(0,), (-5,), (-8,)])
    def test_full_rollback_clears_every_compressor_state(self, argument):
        cache = _deepseek_cache()
        _feed_deepseek(cache, 0, 5)
        _crop_quietly(cache, argument)
        for layer in cache.layers:
            self.assertEqual(set(layer.entry_count.values()), {0})
            self.assertTrue(all(state is None for state in layer.compressed_kv.values()))
        self.assertTrue(all(state is None for state in cache.layers[1].overlap_kv.values()))
        self.assertSameAsFresh(cache, 0)

    def test_layer_types(self):
        cache = _deepseek_cache()
        self.assertEqual([type(layer) for layer in cache.layers], [DeepseekV4HCACache, DeepseekV4CSACache])


@require_torch
class CropAtomicityTest(CropTestMixin, unittest.TestCase):
    """A crop that one layer refuses leaves every layer of the cache bit-identical, whatever the layer order."""

    @parameterized.expand(
        [
            ("hybrid_then_dynamic", lambda: [LinearAttentionAndFullAttentionLayer(), DynamicLayer()]),
            (
                "dynamic_then_linear",
                lambda: [DynamicLayer(), DynamicSlidingWindowLayer(MAX_CACHE_LEN), LinearAttentionLayer()],
            ),
        ]
    )
    def test_recurrent_states_refuse_for_every_layer(self, _, make_layers):
        cache = Cache(layers=make_layers())
        cache.activate_past_recording()
        _feed(cache, 0, 3, "conv+recurrent")
        self.assertRefusedAtomically(cache, -1, RuntimeError, "crop(-cache.get_seq_length())")
        # A full rollback works on all of them, and the next update lands right everywhere
        cache.crop(-3)
        _feed(cache, 0, 2, "conv+recurrent")
        self.assertEqual(cache.get_seq_length(), 2)
        for layer in cache.layers:
            if not isinstance(layer, LinearAttentionLayer) or isinstance(layer, DynamicLayer):
                self.assertEqual(int(layer.get_seq_length()), 2)
            if isinstance(layer, LinearAttentionLayer):
                self.assertEqual(layer.recurrent_states[0].max().item(), 2)


@require_torch
class MixedLayersCropAtomicityTest(CropTestMixin, unittest.TestCase):
    """The same with static and quantized layers in the cache: they are checked before anything changes too."""

    @parameterized.expand(
        [
            ("static_then_hybrid", lambda: [StaticLayer(MAX_CACHE_LEN), LinearAttentionAndFullAttentionLayer()]),
            (
                "quantized_then_hybrid",
                lambda: [_exact_quantized_layer(residual_length=2), LinearAttentionAndFullAttentionLayer()],
            ),
            ("dynamic_then_linear", lambda: [DynamicLayer(), StaticLayer(MAX_CACHE_LEN), LinearAttentionLayer()]),
        ]
    )
    def test_recurrent_states_refuse_for_every_layer(self, _, make_layers):
        cache = Cache(layers=make_layers())
        cache.activate_past_recording()
        _feed(cache, 0, 3, "conv+recurrent")
        self.assertRefusedAtomically(cache, -1, RuntimeError, "crop(-cache.get_seq_length())")
        # A full rollback works on all of them, and the next update lands right everywhere
        cache.crop(-3)
        _feed(cache, 0, 2, "conv+recurrent")
        self.assertEqual(cache.get_seq_length(), 2)
        for layer in cache.layers:
            if not isinstance(layer, LinearAttentionLayer) or isinstance(layer, DynamicLayer):
                self.assertEqual(int(layer.get_seq_length()), 2)
            if isinstance(layer, LinearAttentionLayer):
                self.assertEqual(layer.recurrent_states[0].max().item(), 2)

    def test_sliding_window_refuses_for_every_layer(self):
        cache = Cache(
            layers=[
                StaticLayer(max_cache_len=MAX_CACHE_LEN),
                _exact_quantized_layer(residual_length=2),
                DynamicSlidingWindowLayer(sliding_window=MAX_CACHE_LEN),
                StaticSlidingWindowLayer(max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW),
            ]
        )
        for layer_idx in range(4):
            _fill_codes(cache, 6, step=1, layer_idx=layer_idx)
        self.assertRefusedAtomically(cache, -1, ValueError, "StaticSlidingWindowLayer")


def _attention_layer(name):
    """A fresh layer of every layer type that holds attention states (hybrids: their linear part stays unused)."""
    factories = {
        "dynamic": lambda: DynamicLayer(),
        "sliding": lambda: DynamicSlidingWindowLayer(sliding_window=WINDOW),
        "indexed": lambda: DynamicIndexedLayer(),
        "static": lambda: StaticLayer(max_cache_len=MAX_CACHE_LEN),
        "static_sliding": lambda: StaticSlidingWindowLayer(max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW),
        "static_indexed": lambda: StaticIndexedLayer(max_cache_len=MAX_CACHE_LEN),
        "quantized": lambda: _exact_quantized_layer(residual_length=2),
        "quantized_residual_only": lambda: _exact_quantized_layer(residual_length=8),
        "minimax_m3_vl_sparse": lambda: MiniMaxM3VLSparseCacheLayer(),
        "minimax_m3_vl_sparse_static": lambda: MiniMaxM3VLSparseStaticCacheLayer(MAX_CACHE_LEN),
        **{f"hybrid_{name}": (lambda name=name: _hybrid_layer(name)) for name in HYBRID_LAYERS},
    }
    return factories[name]()


ATTENTION_LAYERS = [
    "dynamic",
    "sliding",
    "indexed",
    "static",
    "static_sliding",
    "static_indexed",
    "quantized",
    "quantized_residual_only",
    "minimax_m3_vl_sparse",
    "minimax_m3_vl_sparse_static",
    *(f"hybrid_{name}" for name in HYBRID_LAYERS),
]
SLIDING_LAYERS = ["sliding", "static_sliding", "hybrid_sliding", "hybrid_static_sliding"]


@require_torch
class LayerLevelOversizedCropTest(CropTestMixin, unittest.TestCase):
    """
    `crop` called on a layer itself (not through `Cache.crop`, which converts the argument first) with a removal of at
    least its length: the layer is left exactly as a fresh one, in every piece of state (tensors, side tensors, lengths
    and counters, mask sizes), and the next update lands at position 0.
    """

    def assertSameAsFresh(self, cache, name, num_tokens):
        reference = Cache(layers=[_attention_layer(name)])
        layer, reference_layer = cache.layers[0], reference.layers[0]
        self.assertEqual(int(layer.get_seq_length()), 0)
        for query_length in (1, 3):
            self.assertEqual(layer.get_mask_sizes(query_length), reference_layer.get_mask_sizes(query_length))
        for attribute in (
            "cumulative_length",
            "cumulative_length_int",
            "indexer_cumulative_length",
            "idx_cumulative_length",
        ):
            if hasattr(reference_layer, attribute):
                self.assertEqual(int(getattr(layer, attribute)), 0, attribute)
        # The next update sees only the new tokens, and leaves the layer like the fresh one (as attention sees it)
        for name, got, expected in zip(("keys", "values"), _update(cache, 0, 2), _update(reference, 0, 2)):
            self.assertExact(_shown(layer, name, got), _shown(reference_layer, name, expected))
        self.assertSameState(_shown_snapshot(cache), _shown_snapshot(reference), "cache")

    @parameterized.expand(
        [(name, 3, argument) for name in ATTENTION_LAYERS for argument in (-3, -5, -100, 0)]
        # Beyond the window: a full rollback is still possible at the layer level
        + [(name, 6, argument) for name in SLIDING_LAYERS for argument in (-6, -9)]
    )
    def test_layer_crop_of_at_least_its_length_empties_it(self, name, num_tokens, argument):
        cache = Cache(layers=[_attention_layer(name)])
        _fill_codes(cache, num_tokens, step=1)

        cache.layers[0].crop(argument)

        self.assertSameAsFresh(cache, name, num_tokens)

    @parameterized.expand(
        # Hybrid layers refuse absolute lengths, which their linear part cannot honour (see the linear tests)
        [(name, argument) for name in ATTENTION_LAYERS for argument in ((-1,) if "hybrid" in name else (-1, 2))]
    )
    def test_layer_partial_crop_then_append(self, name, argument):
        cache = Cache(layers=[_attention_layer(name)])
        _fill_codes(cache, 3, step=1)
        reference = Cache(layers=[_attention_layer(name)])
        _fill_codes(reference, 2, step=1)

        cache.layers[0].crop(argument)

        layer, reference_layer = cache.layers[0], reference.layers[0]
        self.assertEqual(int(layer.get_seq_length()), 2)
        self.assertEqual(layer.get_mask_sizes(1), reference_layer.get_mask_sizes(1))
        for got, expected in zip(_update(cache, 2, 2), _update(reference, 2, 2)):
            self.assertExact(got, expected)
        self.assertEqual(int(layer.get_seq_length()), 4)

    @parameterized.expand([(name,) for name in ["linear", *HYBRID_LAYERS]])
    def test_layer_crop_beyond_recorded_conv_past_is_refused_and_zero_resets(self, name):
        # A linear attention layer has no length of its own: an oversized removal at the layer level is refused
        # (`Cache.crop` turns it into a full rollback), and `crop(0)` resets both parts
        layer = LinearAttentionLayer() if name == "linear" else _hybrid_layer(name)
        cache = Cache(layers=[layer])
        cache.activate_past_recording()
        _feed(cache, 0, 3, "conv+recurrent")
        before = _full_snapshot(cache)
        with self.assertRaises(RuntimeError):
            layer.crop(-5)
        self.assertSameState(_full_snapshot(cache), before, "cache")

        layer.crop(0)

        self.assertFalse(layer.has_previous_state[0])
        self.assertEqual(layer.recurrent_states[0].abs().sum().item(), 0)
        if name != "linear":
            self.assertEqual(int(layer.get_seq_length()), 0)
        (conv_states,) = _feed(cache, 0, 2, "conv+recurrent")
        self.assertExact(conv_states, _conv_inputs(0, 2))
        if name != "linear":
            self.assertExact(layer.keys[..., : int(layer.get_seq_length()), :], _codes(0, 2))


@require_torch
class LinearStateWithEmptyAttentionCropTest(CropTestMixin, unittest.TestCase):
    """A cache whose attention layers hold no token yet while its linear attention layers hold states: `crop(0)`,
    and any removal, is a full rollback of the linear states (nothing of them may stay alive)."""

    @parameterized.expand([(0,), (-1,), (-3,)])
    def test_full_rollback_resets_the_linear_states(self, argument):
        cache = _linear_cache()
        cache.update_conv_state(_conv_inputs(0, 3), 1, conv_kernel_size=KERNEL)
        cache.update_recurrent_state(torch.full((1, 2), 3.0), 1)
        self.assertEqual(cache.get_seq_length(), 0)

        _crop_quietly(cache, argument)

        linear_layer = cache.layers[1]
        self.assertFalse(linear_layer.has_previous_state[0])
        self.assertEqual(linear_layer.recurrent_states[0].abs().sum().item(), 0)
        # The next conv step is a prefill: it sees the new tokens only, not the old conv states
        (conv_states,) = _feed(cache, 0, 2, "conv+recurrent")
        self.assertExact(conv_states, _conv_inputs(0, 2))
        self.assertEqual(cache.get_seq_length(), 2)

    @parameterized.expand([(-1, 2), (-3, 0), (0, 0)])
    def test_linear_states_follow_the_longest_attention_layer(self, argument, expected_length):
        # Attention layers of different lengths (the second one holds the last token only): the linear attention layer
        # saw the 3 tokens of the longest one, so removing 1 keeps its first 2 tokens; removing 3 is a full rollback
        cache = Cache(layers=[DynamicLayer(), DynamicLayer(), LinearAttentionLayer()])
        cache.activate_past_recording()
        _fill_codes(cache, 3)
        _update(cache, 2, 1, layer_idx=1)
        cache.update_conv_state(_conv_inputs(0, 3), 2, conv_kernel_size=KERNEL)
        _crop_quietly(cache, argument)
        self.assertEqual([cache.get_seq_length(0), cache.get_seq_length(1)], [expected_length, 0])
        linear_layer = cache.layers[2]
        self.assertEqual(linear_layer.has_previous_state[0], expected_length > 0)
        if expected_length:
            self.assertExact(linear_layer.conv_states[0], _conv_window(expected_length))

    def test_removing_nothing_keeps_the_linear_states(self):
        cache = _linear_cache()
        cache.update_conv_state(_conv_inputs(0, 3), 1, conv_kernel_size=KERNEL)
        before = _full_snapshot(cache)
        cache.crop(tokens_to_remove=0)
        self.assertSameState(_full_snapshot(cache), before, "cache")


@require_torch
class ConvStateOwnershipCropTest(CropTestMixin, unittest.TestCase):
    """While past recording is on, a layer keeps the very conv tensor the model passed to `update_conv_state` (the
    prefill's conv input, which the model also uses): a rollback must replace the layer's reference, never write into
    that tensor."""

    @parameterized.expand(
        [(name, how) for name in ["linear", *HYBRID_LAYERS] for how in ("cache_full_rollback", "layer_zero")]
    )
    def test_rollback_leaves_the_models_conv_tensor_unchanged(self, name, how):
        layer = LinearAttentionLayer() if name == "linear" else _hybrid_layer(name)
        layers = [DynamicLayer(), layer] if name == "linear" else [layer]
        cache = Cache(layers=layers)
        cache.activate_past_recording()
        _update(cache, 0, 3, layer_idx=0)
        model_conv_input = _conv_inputs(0, 3)
        returned = cache.update_conv_state(model_conv_input, len(layers) - 1, conv_kernel_size=KERNEL)
        # The premise: the layer holds the model's own tensor
        self.assertEqual(layer.conv_states[0].data_ptr(), model_conv_input.data_ptr())

        if how == "cache_full_rollback":
            cache.crop(-3)
        else:
            layer.crop(0)

        self.assertExact(model_conv_input, _conv_inputs(0, 3))
        self.assertExact(returned, _conv_inputs(0, 3))
        self.assertFalse(layer.has_previous_state[0])


@require_torch
class CropStateDetailsTest(CropTestMixin, unittest.TestCase):
    """Details of the state a crop leaves, each pinned by a mutant of the overlay that no other test killed."""

    def test_crop_0_of_a_dynamic_cache_frees_its_states(self):
        # `crop(0)` puts the layers back as they were built: their old states are freed, not kept as empty views
        cache = Cache(layers=[DynamicLayer(), DynamicLayer()])
        for layer_idx in range(2):
            _fill(cache, 3, layer_idx=layer_idx)
        _crop_quietly(cache, 0)
        self.assertEqual([(layer.get_seq_length(), layer.keys) for layer in cache.layers], [(0, None), (0, None)])

    @parameterized.expand([("linear",), ("hybrid_full",)])
    def test_full_rollback_keeps_the_conv_state_shape(self, name):
        # After a full rollback of a recording layer, its conv states are zeros of the layer's own shape (batch,
        # channels, kernel), so that e.g. beam search can still reorder them before the next prefill
        layer = LinearAttentionLayer() if name == "linear" else _hybrid_layer("full")
        cache = Cache(layers=[DynamicLayer(), layer] if name == "linear" else [layer])
        cache.activate_past_recording()
        _feed(cache, 0, 3)
        cache.crop(-3)
        self.assertExact(layer.conv_states[0], torch.zeros(1, 2, KERNEL))
        cache.reorder_cache(torch.tensor([0]))
        self.assertExact(layer.conv_states[0], torch.zeros(1, 2, KERNEL))

    def test_every_conv_state_of_a_multi_state_layer_is_checked(self):
        # Only the second conv state is in use, with no recorded past beyond its kernel: removing a token is refused
        layer = LinearAttentionLayer(number_of_states=2)
        cache = Cache(layers=[DynamicLayer(), layer])
        cache.activate_past_recording()
        _update(cache, 0, 3)
        cache.update_conv_state(_conv_inputs(0, 3), 1, state_idx=1, conv_kernel_size=4)
        self.assertRefusedAtomically(cache, -1, RuntimeError, "LinearAttentionLayer")

    @parameterized.expand([(-1,), (-5,), (0,)])
    def test_sparse_layer_without_index_keys(self, argument):
        # MiniMax-M3-VL sparse layer whose index keys were never set: cropping the key and value states must work
        layer = MiniMaxM3VLSparseCacheLayer()
        cache = Cache(layers=[layer])
        cache.update(_codes(0, 3), -_codes(0, 3), layer_idx=0)
        self.assertIsNone(layer.idx_keys)
        _crop_quietly(cache, argument)
        self.assertIsNone(layer.idx_keys)
        self.assertExact(layer.keys, _codes(0, max(3 + argument, 0) if argument < 0 else 0))


@require_torch
class LayerLevelEdgeCasesTest(CropTestMixin, unittest.TestCase):
    """Layer-level crops at the edges (each pinned by a mutant of the overlay that no other test killed)."""

    @parameterized.expand([(-1,), (0,), (-5,)])
    def test_early_initialized_empty_layers(self, argument):
        # `early_initialization` (used by `export`) leaves initialized layers that hold no token yet
        cache = Cache(layers=[DynamicLayer(), DynamicLayer()])
        cache.early_initialization(1, 1, 1, torch.float32, torch.device("cpu"))
        _crop_quietly(cache, argument)
        for layer in cache.layers:
            layer.crop(argument)
        self.assertEqual(cache.get_seq_length(), 0)
        keys, _ = _update(cache, 0, 2)
        self.assertExact(keys, _codes(0, 2))

    @parameterized.expand([(name, argument) for name in ("sliding", "static_sliding") for argument in (6, 10)])
    def test_layer_crop_that_keeps_everything_beyond_the_window(self, name, argument):
        # An absolute target of at least the length removes nothing, even once the window was passed
        cache = Cache(layers=[_attention_layer(name)])
        _fill_codes(cache, 6, step=1)
        before = _full_snapshot(cache)
        cache.layers[0].crop(argument)
        self.assertSameState(_full_snapshot(cache), before, "cache")

    @parameterized.expand([(argument, linear) for argument in (1, 2) for linear in ("conv", "conv+recurrent")])
    def test_linear_layer_refuses_absolute_lengths(self, argument, linear):
        # A linear attention layer has no sequence length: no positive argument can be honoured at the layer level
        layer = LinearAttentionLayer()
        cache = Cache(layers=[DynamicLayer(), layer])
        cache.activate_past_recording()
        _feed(cache, 0, 3, linear)
        before = _full_snapshot(cache)
        with self.assertRaises(ValueError):
            layer.crop(argument)
        self.assertSameState(_full_snapshot(cache), before, "cache")


@require_torch
class CropRefusalsAndNoOpsTest(CropTestMixin, unittest.TestCase):
    """Refusals that name the right cause, and crops that must remove nothing (more survivors of the mutation run)."""

    def test_refusal_says_how_many_past_tokens_were_recorded(self):
        # A 4-token kernel and a 3-token prefill: no past token was recorded beyond the kernel
        cache = _linear_cache()
        _feed(cache, 0, 3, kernel=4)
        self.assertRefusedAtomically(cache, -1, RuntimeError, "only 0 past token(s)")

    def test_cache_of_linear_layers_only_names_the_cause(self):
        cache = _linear_cache(attention_layer=False, num_linear_layers=2)
        _feed(cache, 0, 3)
        for argument in (1, 2):
            self.assertRefusedAtomically(cache, argument, ValueError, "only holds linear attention layers")

    @parameterized.expand([(0,), (-1,)])
    def test_never_updated_quantized_layer(self, argument):
        cache = Cache(layers=[DynamicLayer(), _exact_quantized_layer(residual_length=2)])
        _crop_quietly(cache, argument)
        cache.layers[1].crop(argument)
        keys, _ = _update(cache, 0, 3, layer_idx=1)
        self.assertExact(keys, _codes(0, 3))

    @parameterized.expand([(step, argument) for step in (3, 1) for argument in (3, 5)])
    def test_quantized_layer_crop_that_keeps_everything(self, step, argument):
        # 3 tokens at once all go to the quantized part (the residual part is then empty); 1 by 1, both parts hold some
        cache = Cache(layers=[_exact_quantized_layer(residual_length=2)])
        _fill_codes(cache, 3, step=step)
        cache.layers[0].crop(argument)
        self.assertEqual(cache.get_seq_length(), 3)
        keys, _ = _update(cache, 3, 1)
        self.assertExact(keys, _codes(0, 4))

    def test_deepseek_hca_crop_of_every_buffered_token(self):
        # 6 tokens: the HCA compressor (windows of 4) compressed 1 window and buffers 2 tokens, which can both go
        config = DeepseekV4Config(
            num_hidden_layers=1,
            layer_types=["heavily_compressed_attention"],
            compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
            sliding_window=MAX_CACHE_LEN,
        )
        cache = DynamicCache(config=config)
        _feed_deepseek(cache, 0, 6)
        cache.crop(-2)
        layer = cache.layers[0]
        self.assertEqual(layer.get_seq_length(), 4)
        self.assertEqual([kv.shape[1] for kv in layer.buffer_kv.values() if kv is not None], [0])
        self.assertExact(layer.keys, _codes(0, 4))

    @parameterized.expand([(True,), (False,)])
    def test_refusals_name_the_number_of_tokens_to_remove(self, record_past):
        cache = _linear_cache(record_past=record_past)
        _feed(cache, 0, 3, kernel=4)
        self.assertRefusedAtomically(cache, -2, RuntimeError, "Cannot remove 2 token(s)")

    def test_deepseek_crop_right_after_a_compression_raises(self):
        # 4 tokens: the HCA compressor (windows of 4) has just compressed them all and buffers none
        cache = _deepseek_cache()
        _feed_deepseek(cache, 0, 4)
        self.assertRefusedAtomically(cache, -1, ValueError, "DeepseekV4HCACache", "crop(-cache.get_seq_length())")

    @parameterized.expand([(1,), (5,)])
    def test_one_token_crop_that_keeps_everything(self, argument):
        cache = DynamicCache()
        _update(cache, 0, 1)
        _crop_quietly(cache, argument)
        self.assertEqual(cache.get_seq_length(), 1)
        keys, _ = _update(cache, 1, 1)
        self.assertExact(keys, _codes(0, 2))

    def test_layer_without_crop_refuses(self):
        # A custom layer that does not implement `crop`: the cache refuses, naming it, and changes nothing
        class NoCropLayer(CacheLayerMixin):
            def lazy_initialization(self, key_states, value_states):
                self.keys, self.values, self.is_initialized = key_states, value_states, True

            def update(self, key_states, value_states, *args, **kwargs):
                if not self.is_initialized:
                    self.lazy_initialization(key_states, value_states)
                    return self.keys, self.values
                self.keys = torch.cat([self.keys, key_states], dim=-2)
                self.values = torch.cat([self.values, value_states], dim=-2)
                return self.keys, self.values

            def get_mask_sizes(self, query_length):
                return self.get_seq_length() + query_length, 0

            def get_seq_length(self):
                return self.keys.shape[-2] if self.is_initialized else 0

            def get_max_cache_shape(self):
                return -1

            def get_max_length(self):
                return -1

        cache = Cache(layers=[DynamicLayer(), NoCropLayer()])
        _update(cache, 0, 3, layer_idx=0)
        _update(cache, 0, 3, layer_idx=1)
        self.assertRefusedAtomically(cache, -1, NotImplementedError, "NoCropLayer", "DynamicCache")

    def test_static_indexer_behind_the_keys_is_left_alone(self):
        # The indexer holds fewer tokens than are kept: a crop that removes none of them must not move its position
        cache = Cache(layers=[StaticIndexedLayer(max_cache_len=MAX_CACHE_LEN)])
        layer = cache.layers[0]
        cache.update(_codes(0, 3), -_codes(0, 3), layer_idx=0)
        cache.update_indexer(_codes(0, 1)[:, 0], layer_idx=0)
        cache.crop(-1)
        self.assertEqual(int(layer.get_seq_length()), 2)
        self.assertEqual(int(layer.indexer_cumulative_length), 1)
        self.assertExact(layer.indexer_keys, _static_buffer(1)[:, 0])

    def test_static_index_keys_behind_the_keys_are_left_alone(self):
        # MiniMax-M3-VL's static sparse layer, its index keys holding fewer tokens than are kept
        layer = MiniMaxM3VLSparseStaticCacheLayer(MAX_CACHE_LEN)
        cache = Cache(layers=[layer])
        cache.update(_codes(0, 3), -_codes(0, 3), layer_idx=0)
        layer.update_index(_codes(0, 1))
        cache.crop(-1)
        self.assertEqual(int(layer.get_seq_length()), 2)
        self.assertEqual(int(layer.idx_cumulative_length), 1)
        self.assertExact(layer.idx_keys, _static_buffer(1))


# Linear attention history: a model-like forward pass over a cache made of one linear attention layer (a causal conv
# of `KERNEL_SIZE` and a recurrent state that sums the tokens, like a gated delta rule without decay) and one
# attention layer. Token values are small integers in float64, so that every state is exact.
KERNEL_SIZE = 3


def _linear_forward(cache, token_values, in_place_conv=True, in_place_recurrent=False, versioned_recurrent=False):
    """
    One forward pass over `token_values`, updating the cache like Qwen3-Next's gated delta net does: a single token
    with cached states writes the conv states in place (`causal_conv1d_update`), more tokens pass the conv window to
    `update_conv_state`; the recurrent states are handed over as a new tensor (or written in place, if asked), whose
    version counter is 0 (or 1, as if a kernel made it in place, if asked).
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
        if versioned_recurrent:
            recurrent_states = torch.zeros_like(recurrent_states).add_(recurrent_states)
        cache.update_recurrent_state(recurrent_states, layer_idx=layer_idx)


def _history_cache(linear_first=True, history_length=None):
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
    cache = _history_cache()
    _linear_forward(cache, token_values)
    return _linear_states(cache)


@require_torch
class LinearAttentionHistoryTest(unittest.TestCase):
    @parameterized.expand([(linear_first, in_place) for linear_first in (True, False) for in_place in (True, False)])
    def test_crop_restores_the_states_before_the_last_updates(self, linear_first, in_place_conv):
        # A prompt of 4 tokens, then 4 drafted tokens, one per forward pass (like an assistant model)
        tokens = [1, 2, 3, 4, 5, 6, 7, 8]
        for tokens_to_remove in range(1, 5):
            cache = _history_cache(linear_first, history_length=5)
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
            # And can be rolled back again, by the tokens of one or of both updates, and again after one more token
            cache.crop(-3)
            self.assertEqual(_linear_states(cache), _expected_linear_states(kept))
            _linear_forward(cache, [12], in_place_conv)
            cache.crop(-1)
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

    @parameterized.expand([(-2,), (-4,)])
    def test_crop_within_an_update_raises_and_changes_nothing(self, argument):
        cache = _history_cache(history_length=5)
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
        cache = _history_cache(history_length=3)
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
        # The update returns the states it stored
        new_states = torch.ones(1, 2, dtype=torch.float64)
        self.assertIs(layer.update_recurrent_state(new_states), new_states)

    def test_restored_states_can_be_restored_again(self):
        # Whatever the version counters of the states handed over (e.g. made in place by a kernel)
        cache = _history_cache(history_length=3)
        _linear_forward(cache, [1, 2], versioned_recurrent=True)
        _linear_forward(cache, [3])
        cache.crop(-1)
        _linear_forward(cache, [4])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2]))

    def test_recurrent_states_written_in_place_cannot_be_restored(self):
        cache = _history_cache(history_length=3)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3], in_place_recurrent=True)
        before = _linear_states(cache)

        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("recurrent states", str(context.exception))
        self.assertEqual(_linear_states(cache), before)

    def test_without_history_recurrent_states_cannot_be_rolled_back(self):
        cache = _history_cache()
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        with self.assertRaises(RuntimeError) as context:
            cache.crop(-1)
        self.assertIn("history_length", str(context.exception))

    def test_history_activated_after_the_prompt(self):
        # The history starts from the states the prompt left (e.g. its length grows after the first round)
        cache = _history_cache()
        _linear_forward(cache, [1, 2])
        cache.activate_past_recording(history_length=3)
        _linear_forward(cache, [3])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2]))

    def test_full_rollback_of_a_layer_with_conv_states_only(self):
        # A short convolution layer (e.g. LFM2's): conv states, no recurrent states
        cache = _history_cache(history_length=3)
        layer = cache.layers[0]
        for token_values in ([1, 2], [3]):
            tokens = torch.tensor(token_values, dtype=torch.float64).reshape(1, 1, -1).expand(1, 2, -1)
            context = torch.cat([layer.conv_states[0], tokens], dim=-1) if layer.has_previous_state[0] else tokens
            cache.update_conv_state(torch.nn.functional.pad(context, (KERNEL_SIZE - context.shape[-1], 0)), 0)
            cache.update(tokens[:, :1, :, None], tokens[:, :1, :, None].clone(), 1)
        cache.crop(-3)
        self.assertEqual(cache.get_seq_length(), 0)
        self.assertFalse(layer.has_previous_state[0])
        self.assertEqual(layer.conv_states[0].abs().sum().item(), 0)
        self.assertFalse(layer.is_recurrent_states_initialized[0])

    def test_short_prompt_is_padded_without_recording(self):
        # Without recording, the conv states keep the last `KERNEL_SIZE` states, left-padded with zeros
        layer = LinearAttentionLayer()
        # 1 sequence, 4 channels, 2 tokens: the padding counts the tokens
        tokens = torch.tensor([1.0, 2.0], dtype=torch.float64).expand(1, 4, 2)
        returned = layer.update_conv_state(tokens, conv_kernel_size=KERNEL_SIZE)
        expected = [[[0.0, 1.0, 2.0]] * 4]
        self.assertEqual(returned.tolist(), expected)
        self.assertEqual(layer.conv_states[0].tolist(), expected)

    def test_history_of_one_update(self):
        cache = _history_cache(history_length=1)
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        cache.crop(-1)
        self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2]))

    def test_history_in_inference_mode(self):
        # Inference tensors have no version counter: the states kept are taken as intact
        with torch.inference_mode():
            cache = _history_cache(history_length=3)
            _linear_forward(cache, [1, 2])
            _linear_forward(cache, [3])
            cache.crop(-1)
            self.assertEqual(_linear_states(cache), _expected_linear_states([1, 2]))

    def test_refusal_names_the_number_of_tokens_to_remove(self):
        cache = _history_cache(history_length=5)
        _linear_forward(cache, [1, 2, 3])
        _linear_forward(cache, [4])
        with self.assertRaisesRegex(RuntimeError, r"Cannot remove 2 token\(s\)"):
            cache.crop(-2)

    def test_rollback_to_before_the_first_update(self):
        # A layer rolled back by every update it has seen has no past: its next update is a first one again (a cache
        # would reset it instead: a layer-level crop)
        cache = _history_cache(history_length=3)
        layer = cache.layers[0]
        _linear_forward(cache, [1, 2])
        _linear_forward(cache, [3])
        layer.crop(-3)
        self.assertFalse(layer.has_previous_state[0])
        self.assertEqual(len(layer.history), 0)
        _linear_forward(cache, [5, 6])
        _linear_forward(cache, [7])
        self.assertEqual(_linear_states(cache), _expected_linear_states([5, 6, 7]))
        layer.crop(-1)
        self.assertEqual(_linear_states(cache), _expected_linear_states([5, 6]))
        layer.crop(-2)
        self.assertFalse(layer.has_previous_state[0])
        # The same after a full rollback of the cache
        _linear_forward(cache, [5, 6])
        cache.crop(-cache.get_seq_length())
        _linear_forward(cache, [8, 9])
        layer.crop(-2)
        self.assertFalse(layer.has_previous_state[0])

    def test_history_activated_after_a_full_rollback(self):
        # The recurrent states of a reset layer are initialized (zeros), but it has no past: the history starts there
        cache = _history_cache()
        layer = cache.layers[0]
        _linear_forward(cache, [1, 2])
        cache.crop(-cache.get_seq_length())
        cache.activate_past_recording(history_length=3)
        _linear_forward(cache, [5, 6])
        _linear_forward(cache, [7])
        layer.crop(-3)
        self.assertFalse(layer.has_previous_state[0])
        _linear_forward(cache, [8, 9])
        self.assertEqual(_linear_states(cache), _expected_linear_states([8, 9]))

    def test_assistant_history_covers_every_draft_of_a_round(self):
        # The history of an assistant's linear attention states undoes every draft of a round and the token before
        # them: it grows with the number of drafts
        torch.manual_seed(0)
        config = Qwen3NextConfig(
            vocab_size=32,
            hidden_size=16,
            intermediate_size=32,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
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
            pad_token_id=0,
            bos_token_id=None,
            eos_token_id=None,
        )
        assistant = Qwen3NextForCausalLM(config).eval()
        assistant.generation_config.num_assistant_tokens = 4
        assistant.generation_config.assistant_confidence_threshold = 0.0
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generation_config = GenerationConfig(max_length=32, min_length=0, do_sample=False)
        generator = AssistedCandidateGenerator(input_ids, assistant, generation_config, {})
        candidates, _ = generator.get_candidates(input_ids)
        cache = generator.assistant_kwargs["past_key_values"]
        linear_layer = cache.layers[0]
        self.assertEqual(linear_layer.history.maxlen, 5)
        generator.num_assistant_tokens = 5
        accepted = torch.cat([candidates[:, :5], torch.tensor([[31]])], dim=-1)
        generator._update_past_and_masks(accepted)
        self.assertEqual(linear_layer.history.maxlen, 6)
        generator.num_assistant_tokens = 6
        generator._update_past_and_masks(accepted)
        self.assertEqual(linear_layer.history.maxlen, 7)
        self.assertEqual(cache.get_seq_length(), accepted.shape[-1] - 1)
