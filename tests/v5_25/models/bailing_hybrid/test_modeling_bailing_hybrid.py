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

import os
import tempfile
import unittest

from parameterized import parameterized

from transformers import BailingHybridConfig, is_torch_available
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch
    from safetensors.torch import save_file

    from transformers import BailingHybridForCausalLM
    from transformers.modeling_layers import MtpModel
    from transformers.models.bailing_hybrid.modeling_bailing_hybrid import BailingHybridAttention, BailingHybridMoE


def _tiny_config(**kwargs):
    return BailingHybridConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"], num_attention_heads=4, num_key_value_heads=4, head_dim=8,
        kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, v_head_dim=8, qk_nope_head_dim=8, n_group=1,
        topk_group=1, num_experts_per_tok=2, num_local_experts=4, first_k_dense_replace=1, pad_token_id=None, **kwargs,
    )  # fmt: skip


@require_torch
class BailingHybridMtpConfigTest(unittest.TestCase):
    def test_mtp_layers_are_mla_attention_and_routed_experts(self):
        """`use_mtp=True` can build the MTP layers: MLA attention and routed experts, whatever the last main layer."""
        model = BailingHybridForCausalLM(_tiny_config(num_mtp_layers=2))
        mtp_model = MtpModel(model, num_mtp_layers=2)

        for layer in mtp_model.layers:
            self.assertIsInstance(layer.mtp_block.self_attn, BailingHybridAttention)
            self.assertIsInstance(layer.mtp_block.mlp, BailingHybridMoE)

    def test_mtp_layer_types_of_a_checkpoint_are_kept(self):
        """A config naming its MTP layer types (here through a round trip) keeps them."""
        config = _tiny_config(num_mtp_layers=1, mtp_layer_types=["linear_attention"], mtp_mlp_layer_types=["dense"])
        config = BailingHybridConfig.from_dict(config.to_dict())

        mtp_config = config.get_mtp_config()
        self.assertEqual(mtp_config.layer_types, ["linear_attention"])
        self.assertEqual(mtp_config.mlp_layer_types, ["dense"])

    @parameterized.expand([(1,), (3,)])
    def test_mtp_layer_types_default_to_one_per_mtp_layer(self, num_mtp_layers):
        """Without MTP layer types, the config names one MLA attention and routed-experts layer per MTP layer."""
        mtp_config = _tiny_config(num_mtp_layers=num_mtp_layers).get_mtp_config()

        self.assertEqual(mtp_config.layer_types, ["full_attention"] * num_mtp_layers)
        self.assertEqual(mtp_config.mlp_layer_types, ["sparse"] * num_mtp_layers)


@require_torch
class BailingHybridMtpLoadingTest(unittest.TestCase):
    def test_mtp_post_norm_is_loaded_from_final_layernorm(self):
        """`MtpModel.from_pretrained` loads the post-norm of an MTP layer from the checkpoint's `final_layernorm`."""
        torch.manual_seed(0)
        config = _tiny_config(num_mtp_layers=1, mtp_layer_types=["full_attention"], mtp_mlp_layer_types=["sparse"])
        model = BailingHybridForCausalLM(config)
        weights = dict(model.state_dict())
        # As in Bailing-hybrid's checkpoints: after the decoder layers, the decoder block's weights unnested
        for name, tensor in MtpModel(model, num_mtp_layers=1).layers[0].state_dict().items():
            name = name.removeprefix("mtp_block.").replace("post_norm", "final_layernorm")
            weights[f"model.layers.2.{name}"] = tensor
        saved_norm = weights["model.layers.2.final_layernorm.weight"] = torch.rand(config.hidden_size)

        with tempfile.TemporaryDirectory() as checkpoint:
            model.save_pretrained(checkpoint)
            save_file({k: v.contiguous() for k, v in weights.items()}, os.path.join(checkpoint, "model.safetensors"))
            model = BailingHybridForCausalLM.from_pretrained(
                checkpoint, use_kernels=False, experts_implementation="eager"
            )
            mtp_model = MtpModel.from_pretrained(model)

        torch.testing.assert_close(mtp_model.layers[0].post_norm.weight, saved_norm, rtol=0, atol=0)
