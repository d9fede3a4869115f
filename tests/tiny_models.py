"""Tiny randomly initialised models built from configs, shared by the project tests that run on every target."""

import torch


# A 2-layer Qwen3-Next: a gated delta rule linear attention layer (conv and recurrent states), then a full attention
# layer, with a small mixture of experts
QWEN3_NEXT = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "linear_num_value_heads": 2,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "linear_conv_kernel_dim": 4,
    "layer_types": ["linear_attention", "full_attention"],
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
    "decoder_sparse_step": 1,
}
NO_SPECIAL_TOKENS = {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def tiny_qwen3_next():
    """A tiny Qwen3-Next (`QWEN3_NEXT`, a vocabulary of 64), randomly initialised with seed 0, in eval mode."""
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    torch.manual_seed(0)
    return Qwen3NextForCausalLM(Qwen3NextConfig(vocab_size=64, **QWEN3_NEXT, **NO_SPECIAL_TOKENS)).eval()


def tiny_mistral_with_window():
    """A tiny 2-layer Mistral with a sliding window of 4 (a vocabulary of 32), randomly initialised with seed 0, in eval
    mode."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=37,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_hidden_layers=2,
        sliding_window=4,
    )
    return MistralForCausalLM(config).eval()
