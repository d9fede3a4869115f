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

    from transformers import FalconH1Config, FalconH1ForCausalLM, LlamaConfig, LlamaForCausalLM


@require_torch
class FalconH1StaticCacheAssistedDecodingTest(unittest.TestCase):
    def test_assisted_decoding_with_a_static_cache_matches_greedy(self):
        """Each layer holds a static attention part next to its Mamba states: rejected drafts must leave both."""
        torch.manual_seed(0)
        tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1}
        mamba = {"mamba_d_ssm": 32, "mamba_n_heads": 2, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_d_state": 8}
        model = FalconH1ForCausalLM(
            FalconH1Config(**tiny, **mamba, num_attention_heads=2, num_key_value_heads=1, head_dim=16)
        )
        # A random assistant: the main model rejects most of its drafts
        assistant = LlamaForCausalLM(LlamaConfig(**tiny, num_attention_heads=2))
        assistant.generation_config.num_assistant_tokens = 3
        assistant.generation_config.assistant_confidence_threshold = 0.0
        inputs = {"input_ids": torch.tensor([[5, 9, 2, 7, 1]]), "max_new_tokens": 8, "do_sample": False}
        inputs["cache_implementation"] = "static"
        greedy = model.generate(**inputs)
        self.assertEqual(model.generate(**inputs, assistant_model=assistant).tolist(), greedy.tolist())
