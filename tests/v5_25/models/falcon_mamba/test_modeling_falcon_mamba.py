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

    from transformers import FalconMambaConfig, FalconMambaForCausalLM


@require_torch
class FalconMambaCachedStateContinuationTest(unittest.TestCase):
    def test_forward_continuing_a_cache_matches_one_forward(self):
        """A forward of several tokens over a cache continues its SSM state (the scan started from zeros)."""
        torch.manual_seed(0)
        config = FalconMambaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, state_size=8)
        model = FalconMambaForCausalLM(config).to(torch_device, torch.float64).eval()
        input_ids = torch.randint(0, config.vocab_size, (1, 10), device=torch_device)
        with torch.no_grad():
            expected = model(input_ids).logits
            cache = model(input_ids[:, :6], use_cache=True).cache
            logits = model(input_ids[:, 6:], cache=cache).logits
        torch.testing.assert_close(logits, expected[:, 6:])
