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

from transformers import is_torch_available
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch

    from transformers import InklingForCausalLM, InklingTextConfig, StaticCache


@require_torch
class InklingStaticCacheQueryOffsetTest(unittest.TestCase):
    def test_forward_continuing_a_static_cache_matches_one_forward(self):
        """The relative position bias of tokens continuing a static cache uses their positions (not `q_length` more)."""
        torch.manual_seed(0)
        config = InklingTextConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            swa_num_attention_heads=4,
            swa_num_key_value_heads=2,
            swa_head_dim=8,
            sliding_window_size=16,
            d_rel=4,
            rel_extent=16,
            moe_intermediate_size=16,
            n_routed_experts=4,
            num_experts_per_tok=2,
            mlp_layer_types=["dense", "dense"],
            local_layer_ids=[0],
        )
        model = InklingForCausalLM(config).eval().to(torch.float64)
        input_ids = torch.randint(0, config.vocab_size, (1, 12))
        with torch.no_grad():
            expected = model(input_ids).logits
            cache = StaticCache(config=config, max_cache_len=16)
            model(input_ids[:, :7], cache=cache)
            logits = model(input_ids[:, 7:], cache=cache).logits
        torch.testing.assert_close(logits, expected[:, 7:])
