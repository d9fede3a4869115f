import torch

from transformers import ZambaConfig, ZambaForCausalLM


torch.manual_seed(0)
config = ZambaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                     intermediate_size=64, n_mamba_heads=2, layers_block_type=["hybrid"] * 2)  # fmt: skip
model, input_ids = ZambaForCausalLM(config), torch.randint(64, (1, 10))
cache = model(input_ids[:, :6], use_cache=True).cache  # a first turn, or the first chunk of a chunked prefill
model(input_ids[:, 6:], cache=cache)  # 4 tokens continuing it
expected = model(input_ids, use_cache=True).cache  # one forward over the 10 tokens
print(torch.allclose(cache.get_recurrent_state(0), expected.get_recurrent_state(0)))
# 5.25.0: False. With this PR: True
