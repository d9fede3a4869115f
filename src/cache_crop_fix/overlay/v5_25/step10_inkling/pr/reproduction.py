import torch

from transformers import InklingForCausalLM, InklingTextConfig, StaticCache


torch.manual_seed(0)
config = InklingTextConfig(
    vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=8, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=16, d_rel=4,
    rel_extent=16, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, mlp_layer_types=["dense", "dense"], local_layer_ids=[0],
)  # fmt: skip
model, input_ids = InklingForCausalLM(config).double(), torch.randint(64, (1, 12))
cache = StaticCache(config=config, max_cache_len=16)
model(input_ids[:, :7], cache=cache)
logits = model(input_ids[:, 7:], cache=cache).logits  # 5 tokens continuing the static cache
print(torch.allclose(logits, model(input_ids).logits[:, 7:]))  # 5.25.0: False. With this PR: True
