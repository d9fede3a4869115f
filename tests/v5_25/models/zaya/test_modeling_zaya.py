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

    from transformers import DynamicCache, ZayaConfig, ZayaForCausalLM


@require_torch
class ZayaRecurrentStatesRollbackTest(unittest.TestCase):
    def test_crop_after_a_recorded_forward_restores_the_kept_tokens_states(self):
        """A recording cache gets the state after each token of a forward, so that `crop` restores the kept ones."""
        torch.manual_seed(0)
        config = ZayaConfig(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            moe_intermediate_size=16,
            num_experts=4,
            router_hidden_size=16,
            experts_implementation="eager",
        )
        model = ZayaForCausalLM(config).eval().to(torch.float64)
        input_ids = torch.randint(0, config.vocab_size, (1, 10))
        for tokens_to_remove in range(1, 4):
            with self.subTest(tokens_to_remove=tokens_to_remove), torch.no_grad():
                cache = DynamicCache(config=config)
                model(input_ids[:, :6], cache=cache)
                cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding does
                model(input_ids[:, 6:], cache=cache)
                cache.crop(-tokens_to_remove)
                expected = DynamicCache(config=config)
                model(input_ids[:, : 10 - tokens_to_remove], cache=expected)
                for layer_idx in range(config.num_hidden_layers):
                    torch.testing.assert_close(cache.get_conv_state(layer_idx), expected.get_conv_state(layer_idx))
                    torch.testing.assert_close(
                        cache.get_recurrent_state(layer_idx), expected.get_recurrent_state(layer_idx)
                    )
