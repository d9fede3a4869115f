import torch

from transformers import FalconH1Config, FalconH1ForCausalLM, LlamaConfig, LlamaForCausalLM


torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "num_hidden_layers": 1}
mamba = {"mamba_d_ssm": 32, "mamba_n_heads": 2, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_d_state": 8}
model = FalconH1ForCausalLM(FalconH1Config(**tiny, **mamba, num_key_value_heads=1, head_dim=16))
assistant = LlamaForCausalLM(LlamaConfig(**tiny))
assistant.generation_config.num_assistant_tokens, assistant.generation_config.assistant_confidence_threshold = 3, 0.0
inputs = {"input_ids": torch.tensor([[5, 9, 2, 7, 1]]), "max_new_tokens": 8, "do_sample": False}
greedy = model.generate(**inputs, cache_implementation="static")
assisted = model.generate(**inputs, assistant_model=assistant, cache_implementation="static")
print(assisted.tolist() == greedy.tolist())  # 5.25.0: IndexError (index 12 is out of bounds). With this PR: True
