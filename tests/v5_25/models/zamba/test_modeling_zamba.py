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

    from transformers import DynamicCache, ZambaConfig, ZambaForCausalLM


def _model():
    torch.manual_seed(0)
    config = ZambaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_mamba_heads=2,
        mamba_d_state=8,
        layers_block_type=["hybrid", "hybrid"],
        initializer_range=0.1,  # with the default 0.02, the SSM states of this tiny model hardly reach the logits
    )
    return ZambaForCausalLM(config).eval().to(torch.float64)


@require_torch
class ZambaRecurrentStatesRollbackTest(unittest.TestCase):
    def assert_same_states(self, cache, expected, num_layers):
        for layer_idx in range(num_layers):
            torch.testing.assert_close(cache.get_conv_state(layer_idx), expected.get_conv_state(layer_idx))
            torch.testing.assert_close(cache.get_recurrent_state(layer_idx), expected.get_recurrent_state(layer_idx))

    @parameterized.expand([(6, 1), (6, 2), (6, 3), (6, 4), (0, 1), (0, 3)])
    def test_crop_after_a_recorded_forward_restores_the_kept_tokens_states(self, cached_tokens, tokens_to_remove):
        """A recording cache gets the state after each token of a forward, so that `crop` restores the kept ones."""
        model = _model()
        input_ids = torch.randint(0, model.config.vocab_size, (1, 10))
        with torch.no_grad():
            cache = DynamicCache(config=model.config)
            if cached_tokens:
                model(input_ids[:, :cached_tokens], cache=cache)
            cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding does
            logits = model(input_ids[:, cached_tokens:], cache=cache).logits
            cache.crop(-tokens_to_remove)
            expected = DynamicCache(config=model.config)
            expected_logits = model(input_ids[:, : 10 - tokens_to_remove], cache=expected).logits
        torch.testing.assert_close(
            logits[:, : 10 - cached_tokens - tokens_to_remove], expected_logits[:, cached_tokens:]
        )
        self.assert_same_states(cache, expected, model.config.num_hidden_layers)

    def test_crop_after_recorded_single_token_forwards_restores_the_kept_tokens_states(self):
        """A recording cache gets the state after a single-token forward too, so that `crop` can remove that token."""
        model = _model()
        input_ids = torch.randint(0, model.config.vocab_size, (1, 8))
        with torch.no_grad():
            cache = DynamicCache(config=model.config)
            model(input_ids[:, :6], cache=cache)
            cache.activate_past_recording(recurrent_states_to_keep=2)  # as assisted decoding does
            model(input_ids[:, 6:7], cache=cache)
            model(input_ids[:, 7:8], cache=cache)
            cache.crop(-1)
            expected = DynamicCache(config=model.config)
            model(input_ids[:, :7], cache=expected)
        self.assert_same_states(cache, expected, model.config.num_hidden_layers)

    def test_single_token_forwards_match_one_forward(self):
        """Single-token forwards continue the cached SSM state of every head, as one forward over the tokens does."""
        model = _model()
        input_ids = torch.randint(0, model.config.vocab_size, (1, 10))
        with torch.no_grad():
            expected = DynamicCache(config=model.config)
            expected_logits = model(input_ids, cache=expected).logits
            cache = DynamicCache(config=model.config)
            logits = [model(input_ids[:, :6], cache=cache).logits]
            logits += [model(input_ids[:, i : i + 1], cache=cache).logits for i in range(6, 10)]
        torch.testing.assert_close(torch.cat(logits, dim=1), expected_logits)
        for layer_idx in range(model.config.num_hidden_layers):
            torch.testing.assert_close(cache.get_recurrent_state(layer_idx), expected.get_recurrent_state(layer_idx))


@require_torch
class ZambaCachedStateContinuationTest(unittest.TestCase):
    @parameterized.expand([("one_chunk", (6,)), ("two_chunks", (3, 7)), ("single_token_then_chunk", (1, 2))])
    def test_forward_continuing_a_cache_matches_one_forward(self, _, chunk_ends):
        """Forwards of several tokens over a cache continue its SSM states (the scan restarted from zeros)."""
        model = _model()
        input_ids = torch.randint(0, model.config.vocab_size, (3, 12))
        with torch.no_grad():
            expected = DynamicCache(config=model.config)
            expected_logits = model(input_ids, cache=expected).logits
            cache = DynamicCache(config=model.config)
            bounds = [0, *chunk_ends, input_ids.shape[1]]
            logits = [model(input_ids[:, i:j], cache=cache).logits for i, j in zip(bounds[:-1], bounds[1:])]
        torch.testing.assert_close(torch.cat(logits, dim=1), expected_logits)
        for layer_idx in range(model.config.num_hidden_layers):
            torch.testing.assert_close(cache.get_recurrent_state(layer_idx), expected.get_recurrent_state(layer_idx))
