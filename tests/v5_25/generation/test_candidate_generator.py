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

    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator


@require_torch
class PromptLookupCandidateGeneratorTest(unittest.TestCase):
    def test_candidates_leave_room_for_the_main_model_token(self):
        """Near `max_length`, prompt lookup proposes no more candidates than fit before the main model's token."""
        generator = PromptLookupCandidateGenerator(num_output_tokens=4, max_matching_ngram_size=2, max_length=10)
        # The last 2-gram, (1, 2), is found at the start, followed by 3, 4, 5, 6
        input_ids = torch.tensor([[1, 2, 3, 4, 5, 6, 1, 2]], device=torch_device)

        candidate_ids, _ = generator.get_candidates(input_ids)

        # 8 tokens and `max_length=10`: room for 1 candidate, then the token the main model adds
        self.assertEqual(candidate_ids.tolist(), [[1, 2, 3, 4, 5, 6, 1, 2, 3]])

    def test_prompt_lookup_with_a_static_cache_matches_greedy(self):
        """The default static cache holds `max_length - 1` tokens: prompt lookup decodes up to `max_length` in it."""
        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=16, hidden_size=32, intermediate_size=37, num_attention_heads=2, num_hidden_layers=1
        )
        model = LlamaForCausalLM(config).to(torch_device, torch.float64).eval()
        # Every token is followed by others: prompt lookup always finds candidates
        input_ids = torch.arange(16, device=torch_device).repeat(1, 2)
        inputs = {"input_ids": input_ids, "max_new_tokens": 12, "do_sample": False, "cache_implementation": "static"}

        greedy = model.generate(**inputs)
        prompt_lookup = model.generate(**inputs, prompt_lookup_num_tokens=10)

        self.assertEqual(prompt_lookup.tolist(), greedy.tolist())
