import torch

from transformers import DynamicCache, ZayaConfig, ZayaForCausalLM


torch.manual_seed(0)
config = ZayaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=8, moe_intermediate_size=16, num_experts=4, router_hidden_size=16)  # fmt: skip
model, input_ids = ZayaForCausalLM(config), torch.randint(64, (1, 10))
cache = DynamicCache(config=config)
model(input_ids[:, :6], cache=cache)
cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding does with 3 drafts
model(input_ids[:, 6:], cache=cache)  # the verification forward
cache.crop(-2)  # 2 drafts rejected
expected = DynamicCache(config=config)
model(input_ids[:, :8], cache=expected)
print(torch.equal(cache.get_recurrent_state(0), expected.get_recurrent_state(0)))
# 5.25.0: IndexError (list index out of range). With this PR: True
