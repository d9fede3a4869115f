import torch

from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM


torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "num_hidden_layers": 1}
model, assistant = MistralForCausalLM(MistralConfig(**tiny, sliding_window=4, num_key_value_heads=1)), LlamaForCausalLM(LlamaConfig(**tiny))  # fmt: skip
output = model.generate(
    torch.tensor([[5, 9, 2, 7, 1]]), assistant_model=assistant, max_new_tokens=4, return_dict_in_generate=True
)
model.generate(output.sequences, cache=output.cache, max_new_tokens=20)  # continue the returned cache
print(output.cache.layers[0].keys.shape[-2])  # tokens the window of 4 keeps. 5.25.0: 28. With this PR: 3
