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

    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.qwen4_exp import Qwen4ExpForCausalLM, Qwen4ExpTextConfig


@require_torch
class Qwen4ExpStaticCacheAssistedDecodingTest(unittest.TestCase):
    def test_assisted_decoding_with_a_static_cache_matches_greedy(self):
        """The indexer reads the positions of the cached tokens: after rejected drafts, those of the kept ones only."""
        torch.manual_seed(0)
        tiny = {"vocab_size": 64, "hidden_size": 32, "num_attention_heads": 2, "pad_token_id": 0, "bos_token_id": 1}
        linear = {"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2}
        moe = {"moe_intermediate_size": 16, "shared_expert_intermediate_size": 16, "num_experts": 4}
        ple = {"ple_layer_ids": [1, 3], "ple_embed_dim": 32, "ple_conv_kernel_size": 2, "eos_token_id": 63}
        ngram = {"ngram_vocab_size_base": 101, "split_ngram_parts": 1, "make_ngram_vocab_size_divisible_by": 8}
        # An indexer budget of fewer blocks than the cache holds: the indexer selects among them
        indexer = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 2}
        config = Qwen4ExpTextConfig(
            **tiny,
            **linear,
            **moe,
            **ple,
            **ngram,
            **indexer,
            num_hidden_layers=4,
            layer_types=["linear_attention", "indexed_attention"] * 2,
            num_key_value_heads=1,
            head_dim=16,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]},
            linear_num_value_heads=2,
            num_experts_per_tok=2,
            indexer_compress_ratio=2,
            hc_count=2,
            hc_lowrank=8,
            experts_implementation="eager",  # the grouped matmuls have no float64 kernel
        )
        model = Qwen4ExpForCausalLM(config).eval().to(torch.float64)
        assistant = LlamaForCausalLM(LlamaConfig(**tiny, intermediate_size=37, num_hidden_layers=1)).to(torch.float64)
        assistant.generation_config.num_assistant_tokens = 3
        assistant.generation_config.assistant_confidence_threshold = 0.0
        input_ids = torch.randint(2, 63, (1, 12), generator=torch.Generator().manual_seed(1))
        kwargs = {"max_new_tokens": 16, "do_sample": False, "cache_implementation": "static", "eos_token_id": None}
        greedy = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **kwargs)
        assisted = model.generate(
            input_ids, attention_mask=torch.ones_like(input_ids), assistant_model=assistant, **kwargs
        )
        self.assertEqual(assisted.tolist(), greedy.tolist())
