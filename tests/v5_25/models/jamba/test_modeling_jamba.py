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
from transformers.testing_utils import require_torch, torch_device


if is_torch_available():
    import torch

    from transformers import JambaConfig, JambaForCausalLM


@require_torch
class JambaCachedStateContinuationTest(unittest.TestCase):
    def test_forward_continuing_a_cache_matches_one_forward(self):
        """A forward of several tokens over a cache continues its SSM state (the scan started from zeros)."""
        torch.manual_seed(0)
        config = JambaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_experts=4,
            expert_layer_period=2,
            expert_layer_offset=1,
            attn_layer_period=2,
            attn_layer_offset=1,
            mamba_d_state=8,
            initializer_range=0.1,  # with the default 0.02, the SSM states of this tiny model hardly reach the logits
            experts_implementation="eager",
        )
        model = JambaForCausalLM(config).to(torch_device, torch.float64).eval()
        input_ids = torch.randint(0, config.vocab_size, (1, 10), device=torch_device)
        with torch.no_grad():
            expected = model(input_ids).logits
            cache = model(input_ids[:, :6], use_cache=True).cache
            logits = model(input_ids[:, 6:], cache=cache).logits
        torch.testing.assert_close(logits, expected[:, 6:])
