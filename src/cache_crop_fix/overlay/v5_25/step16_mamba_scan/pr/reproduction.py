import torch

from transformers import MambaConfig, MambaForCausalLM


torch.manual_seed(0)
model = MambaForCausalLM(MambaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, state_size=8))
input_ids = torch.randint(64, (1, 10))
cache = model(input_ids[:, :6], use_cache=True).cache  # a first turn, or the first chunk of a chunked prefill
logits = model(input_ids[:, 6:], cache=cache).logits  # 4 tokens continuing it
print(f"{(logits - model(input_ids).logits[:, 6:]).abs().max():.4f}")  # 5.25.0: 0.0009. With this PR: 0.0000
