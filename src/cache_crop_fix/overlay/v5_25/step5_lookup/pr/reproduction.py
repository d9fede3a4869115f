import torch

from transformers import LlamaConfig, LlamaForCausalLM


torch.manual_seed(0)
model = LlamaForCausalLM(
    LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=37, num_attention_heads=2, num_hidden_layers=1)
)
input_ids = torch.arange(16).repeat(1, 2)  # each token is followed by others: prompt lookup always finds candidates
inputs = {"input_ids": input_ids, "max_new_tokens": 12, "do_sample": False, "cache_implementation": "static"}
print(model.generate(**inputs, prompt_lookup_num_tokens=10).tolist() == model.generate(**inputs).tolist())
# 5.25.0: IndexError (index 43 is out of bounds for dimension 2 with size 43). With this PR: True
