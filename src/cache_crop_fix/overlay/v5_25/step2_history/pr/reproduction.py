import torch

from transformers import Cache, LlamaConfig, LlamaForCausalLM, Qwen3NextConfig, Qwen3NextForCausalLM


torch.manual_seed(0)
common = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "pad_token_id": 0}
linear = {"linear_num_value_heads": 2, "linear_num_key_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8}
config = Qwen3NextConfig(
    **common, **linear, num_hidden_layers=2, num_key_value_heads=1, head_dim=16, num_experts=0,
    layer_types=["linear_attention", "full_attention"],
)  # fmt: skip
model, assistant = Qwen3NextForCausalLM(config), LlamaForCausalLM(LlamaConfig(**common, num_hidden_layers=1))
assistant.generation_config.num_assistant_tokens, assistant.generation_config.assistant_confidence_threshold = 3, 0.0
crop, states = Cache.crop, []


def crop_and_keep_state(cache, tokens_to_remove):  # the main cache's state after each round
    crop(cache, tokens_to_remove)
    if hasattr(cache.layers[0], "recurrent_states"):
        states.append((int(cache.get_seq_length()), cache.layers[0].recurrent_states[0].clone()))


Cache.crop = crop_and_keep_state
out = model.generate(torch.tensor([[5, 9, 2, 7, 1]]), assistant_model=assistant, max_new_tokens=8, do_sample=False)
Cache.crop = crop
errors = [(s - model(out[:, :n]).cache.layers[0].recurrent_states[0]).abs().max() for n, s in states]
print(f"{max(errors):.3f}")  # 5.25.0: 0.004. With this PR: 0.000
