import torch

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
model = MistralForCausalLM(config)
inputs = {"input_ids": torch.tensor([[5, 9, 2, 7, 1]]), "max_new_tokens": 12, "do_sample": False}
greedy = model.generate(**inputs, cache_implementation="static")
assisted = model.generate(**inputs, prompt_lookup_num_tokens=3, cache_implementation="static")
print(assisted.tolist() == greedy.tolist())  # 5.25.0: ValueError (a cache that cannot be cropped). With this PR: True
