import torch

from transformers import DynamicCache, ZambaConfig, ZambaForCausalLM


torch.manual_seed(0)
config = ZambaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                     intermediate_size=64, n_mamba_heads=2, layers_block_type=["hybrid"] * 2)  # fmt: skip
model, input_ids = ZambaForCausalLM(config), torch.randint(64, (1, 10))
cache = DynamicCache(config=config)
model(input_ids[:, :6], cache=cache)
cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding does with 3 drafts
model(input_ids[:, 6:], cache=cache)  # the verification forward
cache.crop(-2)  # 2 drafts rejected
expected = DynamicCache(config=config)
model(input_ids[:, :8], cache=expected)
print(torch.allclose(cache.get_recurrent_state(0), expected.get_recurrent_state(0)))
# 5.25.0: IndexError (list index out of range). With this PR: True
