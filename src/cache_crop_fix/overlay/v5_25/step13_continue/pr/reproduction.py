import torch

from transformers import LlamaConfig, LlamaForCausalLM


torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2}
model, assistant = (LlamaForCausalLM(LlamaConfig(**tiny, num_hidden_layers=layers)) for layers in (2, 1))
first_turn = model.generate(torch.tensor([[5, 9, 2, 7, 1]]), max_new_tokens=4, return_dict_in_generate=True)
input_ids = torch.cat([first_turn.sequences, torch.tensor([[3, 4]])], dim=-1)  # the second turn
output = model.generate(input_ids, cache=first_turn.cache, assistant_model=assistant, max_new_tokens=6)
print(output.shape[1], first_turn.cache.get_seq_length())  # 5.25.0: 17 24 (the first turn twice). With this PR: 17 16
