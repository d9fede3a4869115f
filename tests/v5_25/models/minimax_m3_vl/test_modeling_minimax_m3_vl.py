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

    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import (
        MiniMaxM3VLSparseCacheLayer,
        MiniMaxM3VLSparseStaticCacheLayer,
    )


def _tokens(length):
    return torch.arange(1, length + 1, dtype=torch.float64).view(1, 1, length, 1)


@require_torch
class MiniMaxM3VLSparseCacheCropTest(unittest.TestCase):
    def test_oversized_removal_empties_the_static_index_buffer(self):
        """Removing more tokens than the static layer holds empties its index buffer too."""
        layer = MiniMaxM3VLSparseStaticCacheLayer(max_cache_len=8)
        layer.update(_tokens(3), _tokens(3))
        layer.update_index(_tokens(3))
        layer.crop(-5)
        self.assertEqual(layer.idx_cumulative_length.tolist(), [0])


@require_torch
class MiniMaxM3VLSparseCacheCropEdgesTest(unittest.TestCase):
    @parameterized.expand([("dynamic",), ("static",)])
    def test_index_keys_follow_the_kept_tokens(self, kind):
        layer = MiniMaxM3VLSparseCacheLayer() if kind == "dynamic" else MiniMaxM3VLSparseStaticCacheLayer(8)
        layer.update(_tokens(3), _tokens(3))
        layer.update_index(_tokens(3))
        for removal, kept in ((-1, 2), (-5, 0), (-(2**70), 0)):
            layer.crop(removal)
            self.assertEqual(int(layer.get_seq_length()), kept)
            if kind == "dynamic":
                self.assertEqual(layer.idx_keys.shape[-2], kept)
            else:
                self.assertEqual(layer.idx_cumulative_length.tolist(), [kept])

    def test_crop_before_the_first_index_keys(self):
        layer = MiniMaxM3VLSparseCacheLayer()
        layer.update(_tokens(3), _tokens(3))
        layer.crop(-1)
        self.assertEqual(int(layer.get_seq_length()), 2)
