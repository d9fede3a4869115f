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

    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM, LlamaConfig, LlamaForCausalLM
    from transformers.cache_utils import Cache, DynamicLayer
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4CSACache, DeepseekV4HCACache


def _filled(cache_class, length=3):
    """A cache of `length` tokens, handed to its compressor."""
    config = DeepseekV4Config(
        num_hidden_layers=2,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
        sliding_window=8,
    )
    layer = cache_class(config)
    states = torch.arange(1, length + 1, dtype=torch.float64).view(1, 1, length, 1)
    layer.update(states, states)
    layer.store_compression_weights("compressor", states.view(1, length, 1), states.view(1, length, 1))
    return layer


@require_torch
class DeepseekV4CacheCropTest(unittest.TestCase):
    @parameterized.expand([(DeepseekV4HCACache,), (DeepseekV4CSACache,)])
    def test_partial_crop_refuses_and_full_rollback_resets(self, cache_class):
        layer = _filled(cache_class)
        buffered = layer.buffer_kv["compressor"].shape[1]
        with self.assertRaisesRegex(
            ValueError, "Cannot remove 1 of the 3 tokens .* compressor states cannot be rolled back"
        ):
            layer.crop(-1)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"].shape[1]), (3, buffered))
        layer.crop(-5)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"]), (0, None))

    @parameterized.expand([(DeepseekV4HCACache,), (DeepseekV4CSACache,)])
    def test_refused_cache_crop_changes_no_layer(self, cache_class):
        """`Cache.crop` refuses before cropping any layer, the `DynamicLayer` before the compressed one included."""
        dynamic_layer, layer = DynamicLayer(), _filled(cache_class)
        states = torch.ones(1, 1, 3, 1, dtype=torch.float64)
        dynamic_layer.update(states, states)
        cache = Cache(layers=[dynamic_layer, layer])
        with self.assertRaisesRegex(ValueError, "compressor states cannot be rolled back"):
            cache.crop(-1)
        self.assertEqual((dynamic_layer.get_seq_length(), layer.get_seq_length()), (3, 3))

    def test_full_rollback_clears_the_overlap_states(self):
        """CSA keeps the last window's states to overlap the next compressed one: a full rollback forgets them."""
        layer = _filled(DeepseekV4CSACache)
        window = torch.ones(1, 1, 1, 2, dtype=torch.float64)
        layer.update_overlap_state("compressor", window, window, head_dim=1)
        layer.crop(-3)
        self.assertEqual((layer.overlap_kv["compressor"], layer.overlap_gate["compressor"]), (None, None))

    def test_assistant_whose_cache_cannot_be_cropped_is_refused(self):
        """DeepSeek-V4's compressed layers cannot remove rejected drafts: refused after its first drafts, not re-encoded."""
        common = {"vocab_size": 32, "hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2}
        common |= {"num_key_value_heads": 1, "head_dim": 8, "pad_token_id": 0, "bos_token_id": None}
        torch.manual_seed(0)
        main_model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, eos_token_id=None, **common)).double().eval()
        config = DeepseekV4Config(
            **common,
            eos_token_id=None,
            moe_intermediate_size=16,
            num_hidden_layers=2,
            q_lora_rank=16,
            o_lora_rank=16,
            index_n_heads=2,
            index_head_dim=8,
            index_topk=4,
            n_routed_experts=2,
            num_experts_per_tok=1,
            layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
            compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
            sliding_window=4,
            experts_implementation="eager",  # float64
        )
        assistant = DeepseekV4ForCausalLM(config).double().eval()
        assistant.generation_config.num_assistant_tokens = 3
        assistant.generation_config.assistant_confidence_threshold = 0.0
        input_ids = torch.tensor([[5, 9, 2, 7, 1, 3]])
        with self.assertRaisesRegex(ValueError, "assistant cache that can be cropped"):
            main_model.generate(input_ids, assistant_model=assistant, max_new_tokens=8, do_sample=False)

    @parameterized.expand(
        [(cache_class, length) for cache_class in (DeepseekV4HCACache, DeepseekV4CSACache) for length in (1, 3)]
    )
    def test_crop_0_keeps_everything_and_removing_exactly_every_token_resets(self, cache_class, length):
        layer = _filled(cache_class, length)
        buffered = layer.buffer_kv["compressor"].shape[1]
        layer.crop(0)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"].shape[1]), (length, buffered))
        layer.crop(-length)
        self.assertEqual((layer.get_seq_length(), layer.buffer_kv["compressor"]), (0, None))
