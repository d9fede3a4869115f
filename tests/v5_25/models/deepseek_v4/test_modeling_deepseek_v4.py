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

    from transformers import DeepseekV4Config
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4CSACache, DeepseekV4HCACache


def _filled(cache_class):
    """A cache of 3 tokens, handed to its compressor."""
    config = DeepseekV4Config(
        num_hidden_layers=2,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
        sliding_window=8,
    )
    layer = cache_class(config)
    states = torch.arange(1, 4, dtype=torch.float64).view(1, 1, 3, 1)
    layer.update(states, states)
    layer.store_compression_weights("compressor", states.view(1, 3, 1), states.view(1, 3, 1))
    return layer


@require_torch
class DeepseekV4CacheCropTest(unittest.TestCase):
    @parameterized.expand([(DeepseekV4HCACache,), (DeepseekV4CSACache,)])
    def test_partial_crop_refuses_and_full_rollback_resets(self, cache_class):
        layer = _filled(cache_class)
        buffered = layer.buffer_kv["compressor"].shape[1]
        with self.assertRaisesRegex(ValueError, "compressor states cannot be rolled back"):
            layer.crop(-1)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"].shape[1]), (3, buffered))
        layer.crop(-5)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"]), (0, None))

    @parameterized.expand([(DeepseekV4HCACache,), (DeepseekV4CSACache,)])
    def test_crop_0_keeps_everything_and_removing_exactly_every_token_resets(self, cache_class):
        layer = _filled(cache_class)
        buffered = layer.buffer_kv["compressor"].shape[1]
        layer.crop(0)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"].shape[1]), (3, buffered))
        layer.crop(-3)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"]), (0, None))
