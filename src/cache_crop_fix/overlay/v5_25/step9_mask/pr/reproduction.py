import torch

from transformers import Qwen3NextConfig, Qwen3NextForCausalLM


torch.manual_seed(0)
common = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "pad_token_id": 0}
linear = {"linear_num_value_heads": 2, "linear_num_key_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8}
config = Qwen3NextConfig(
    **common, **linear, num_hidden_layers=2, num_key_value_heads=1, head_dim=16, num_experts=0,
    layer_types=["linear_attention", "full_attention"],
)  # fmt: skip
model = Qwen3NextForCausalLM(config)
inputs = {"input_ids": torch.tensor([[5, 9, 2, 7, 1]]), "max_new_tokens": 12, "do_sample": False}
inputs.update(cache_implementation="static", max_cache_len=256)  # room for every candidate, and many empty slots
lookup = model.generate(**inputs, prompt_lookup_num_tokens=3)
print(lookup.tolist() == model.generate(**inputs).tolist())  # 5.25.0: False. With this PR: True
