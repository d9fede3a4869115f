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

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch

    from transformers.cache_utils import Cache, DynamicLayer
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import (
        UnlimitedOcrDynamicReferenceSlidingWindowLayer,
        UnlimitedOcrStaticReferenceSlidingWindowLayer,
    )


def _tokens(start, length):
    return torch.arange(start + 1, start + length + 1, dtype=torch.float64).view(1, 1, length, 1)


def _update_both(cache, start, length):
    """The same tokens to both layers of `cache` (a `DynamicLayer`, then an UnlimitedOcr layer)."""
    for layer_idx in range(2):
        cache.update(_tokens(start, length), _tokens(start, length), layer_idx)


@require_torch
class UnlimitedOcrStaticCropTest(unittest.TestCase):
    @parameterized.expand([(-2, 1), (-3, 0), (-5, 0)])
    def test_crop_removes_decoded_then_prefill_tokens(self, removal, kept):
        layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=6, sliding_window=4)
        layer.set_prefill_length(2)
        layer.update(_tokens(0, 2), _tokens(0, 2))  # the prefill (reference) tokens
        layer.update(_tokens(2, 1), _tokens(2, 1))  # a decoded token
        layer.crop(removal)
        self.assertEqual((layer.get_seq_length(), layer.cumulative_length_int), (kept, 0))
        # The next tokens fill the prefill again, after the kept ones
        layer.update(_tokens(10, 2 - kept), _tokens(10, 2 - kept))
        self.assertEqual(layer.get_seq_length(), 2)
        self.assertEqual(layer.prefill_keys[0, 0, :, 0].tolist(), [1.0, 11.0][:kept] + [11.0, 12.0][: 2 - kept])

    def test_window_crops_what_it_holds(self):
        layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=6, sliding_window=4)
        layer.set_prefill_length(2)
        for position in range(6):
            layer.update(_tokens(position, 1), _tokens(position, 1))
        layer.crop(-1)
        self.assertEqual((layer.get_seq_length(), layer.keys[0, 0, :3, 0].tolist()), (5, [3.0, 4.0, 5.0]))
        # Removing the decoded tokens empties the window and keeps the prefill
        layer.crop(2 - layer.get_seq_length())
        self.assertEqual((layer.get_seq_length(), layer.cumulative_length_int), (2, 0))
        self.assertEqual(layer.prefill_keys[0, 0, :, 0].tolist(), [1.0, 2.0])


@require_torch
class UnlimitedOcrStaticRefusedCropTest(unittest.TestCase):
    def test_window_that_wrapped_around_refuses_a_partial_crop_and_empties(self):
        """With 8 tokens, the 6 decoded ones overwrote the first ones of the window, though `is_croppable` holds: its 4
        slots hold the 3 tokens the next one needs and one more, so only 1 can be removed (recording makes no room)."""
        layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=6, sliding_window=4)
        layer.set_prefill_length(2)
        layer.activate_past_recording(recurrent_states_to_keep=3)
        for position in range(8):
            layer.update(_tokens(position, 1), _tokens(position, 1))
        self.assertTrue(layer.is_croppable)
        keys = layer.all_keys.clone()
        with self.assertRaisesRegex(ValueError, "overwritten"):
            layer.crop(-2)
        self.assertEqual(layer.get_seq_length(), 8)
        self.assertTrue(torch.equal(layer.all_keys, keys))
        # Removing the decoded tokens empties the window and keeps the prefill
        layer.crop(-6)
        self.assertEqual((layer.get_seq_length(), layer.cumulative_length_int), (2, 0))
        self.assertEqual(layer.prefill_keys[0, 0, :, 0].tolist(), [1.0, 2.0])

    def test_refused_cache_crop_changes_no_layer(self):
        """`Cache.crop` refuses before cropping any layer, the `DynamicLayer` before the wrapped window included."""
        layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=6, sliding_window=4)
        layer.set_prefill_length(2)
        cache = Cache(layers=[DynamicLayer(), layer])
        for position in range(8):
            _update_both(cache, position, 1)
        with self.assertRaisesRegex(ValueError, "overwritten"):
            cache.crop(-2)
        self.assertEqual([layer.get_seq_length() for layer in cache.layers], [8, 8])


@require_torch
class UnlimitedOcrDynamicCropCheckTest(unittest.TestCase):
    def test_window_counts_the_decoded_tokens_only(self):
        """3 decoded tokens in a window of 4 can be cropped, however many prefill tokens come before them."""
        cache = Cache(layers=[UnlimitedOcrDynamicReferenceSlidingWindowLayer(sliding_window=4)])
        cache.update(_tokens(0, 2), _tokens(0, 2), 0)  # the prefill (reference) tokens
        for position in range(2, 5):
            cache.update(_tokens(position, 1), _tokens(position, 1), 0)
        cache.crop(-1)
        keys, _ = cache.update(_tokens(10, 1), _tokens(10, 1), 0)
        self.assertEqual(keys[0, 0, :, 0].tolist(), [1.0, 2.0, 3.0, 4.0, 11.0])

    def test_refused_cache_crop_changes_no_layer(self):
        """`Cache.crop` refuses before cropping any layer, the `DynamicLayer` before the trimmed window included."""
        cache = Cache(layers=[DynamicLayer(), UnlimitedOcrDynamicReferenceSlidingWindowLayer(sliding_window=3)])
        _update_both(cache, 0, 2)  # the prefill (reference) tokens
        cache.activate_past_recording()  # as `generate` sets up an assistant's cache
        for position in range(2, 6):
            _update_both(cache, position, 1)
        cache.crop(0)  # `generate`, after every forward: the window keeps its last 2 tokens
        with self.assertRaisesRegex(ValueError, "would need tokens it dropped"):
            cache.crop(-1)
        self.assertEqual([layer.get_seq_length() for layer in cache.layers], [6, 6])
