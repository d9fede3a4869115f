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

    from transformers import (
        DynamicCache,
        EncoderDecoderCache,
        LlamaConfig,
        Qwen3NextConfig,
        StaticCache,
        WhisperConfig,
    )
    from transformers.masking_utils import create_causal_mask


@require_torch
class StaticCacheRecordingMaskTest(unittest.TestCase):
    def test_single_token_over_a_recording_static_hybrid_cache_is_masked(self):
        """One token over a static cache masks its empty slots while linear layers record states to roll back."""
        config = Qwen3NextConfig(
            hidden_size=32,
            num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            attn_implementation="sdpa",
        )
        cache = StaticCache(config=config, max_cache_len=8)
        key_states = torch.rand(1, config.num_key_value_heads, 3, config.head_dim)
        cache.update(key_states, key_states, layer_idx=1)
        cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding and prompt lookup do

        causal_mask = create_causal_mask(
            config=config,
            inputs_embeds=torch.empty((1, 1, 0)),
            attention_mask=None,  # `generate` drops an all-ones 2D mask: only the causal mask hides the empty slots
            cache=cache,
            position_ids=torch.tensor([[3]]),
        )

        # The 4th token sees the 3 cached ones and itself, not the 4 slots not written yet
        expected_mask = torch.tensor([[[[True, True, True, True, False, False, False, False]]]])
        self.assertIsNotNone(causal_mask)
        self.assertTrue(torch.equal(causal_mask, expected_mask))

    def test_single_token_over_an_encoder_decoder_cache_with_static_self_attention_is_masked(self):
        """One decoder token over an `EncoderDecoderCache` whose self-attention part is static masks its empty slots."""
        config = WhisperConfig(d_model=32, decoder_layers=1, decoder_attention_heads=2, attn_implementation="sdpa")
        cache = EncoderDecoderCache(StaticCache(config=config, max_cache_len=8), DynamicCache(config=config))
        key_states = torch.rand(1, config.decoder_attention_heads, 3, 16)
        cache.self_attention_cache.update(key_states, key_states, layer_idx=0)

        causal_mask = create_causal_mask(
            config=config,
            inputs_embeds=torch.empty((1, 1, 0)),
            attention_mask=None,
            cache=cache,  # as Whisper's decoder passes it
            position_ids=torch.tensor([[3]]),
        )

        # The 4th token sees the 3 cached ones and itself, not the 4 slots not written yet
        expected_mask = torch.tensor([[[[True, True, True, True, False, False, False, False]]]])
        self.assertIsNotNone(causal_mask)
        self.assertTrue(torch.equal(causal_mask, expected_mask))

    @parameterized.expand([("static", False), ("dynamic", True)])
    def test_single_token_mask_decision_of_other_caches_is_unchanged(self, cache_type, skips_mask):
        """One token keeps its causal mask over a plain static cache, and skips it over a dynamic cache."""
        config = LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, attn_implementation="sdpa")
        cache = StaticCache(config=config, max_cache_len=8) if cache_type == "static" else DynamicCache(config=config)
        key_states = torch.rand(1, config.num_key_value_heads, 3, config.head_dim)
        cache.update(key_states, key_states, layer_idx=0)

        causal_mask = create_causal_mask(
            config=config,
            inputs_embeds=torch.empty((1, 1, 0)),
            attention_mask=None,
            cache=cache,
            position_ids=torch.tensor([[3]]),
        )

        if skips_mask:
            self.assertIsNone(causal_mask)
        else:
            expected_mask = torch.tensor([[[[True, True, True, True, False, False, False, False]]]])
            self.assertIsNotNone(causal_mask)
            self.assertTrue(torch.equal(causal_mask, expected_mask))
