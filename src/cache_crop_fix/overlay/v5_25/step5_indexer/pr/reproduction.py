import torch

from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.qwen4_exp import Qwen4ExpForCausalLM, Qwen4ExpTextConfig


torch.manual_seed(0)
tiny = {"vocab_size": 64, "hidden_size": 32, "num_attention_heads": 2, "pad_token_id": 0, "bos_token_id": 1}
linear = {"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 2}
moe = {"moe_intermediate_size": 16, "shared_expert_intermediate_size": 16, "num_experts": 4, "num_experts_per_tok": 2}
ple = {"ple_layer_ids": [1, 3], "ple_embed_dim": 32, "ple_conv_kernel_size": 2, "hc_count": 2, "hc_lowrank": 8}
ngram = {"ngram_size": 2, "heads_per_ngram": 2, "ngram_vocab_size_base": 101, "make_ngram_vocab_size_divisible_by": 8}
indexer = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 2, "indexer_compress_ratio": 2}  # fmt: skip
rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
config = Qwen4ExpTextConfig(
    **tiny, **linear, **moe, **ple, **ngram, **indexer, num_hidden_layers=4, num_key_value_heads=1, head_dim=16,
    layer_types=["linear_attention", "indexed_attention"] * 2, rope_parameters=rope, split_ngram_parts=1, eos_token_id=63,
)  # fmt: skip
model = Qwen4ExpForCausalLM(config)
assistant = LlamaForCausalLM(LlamaConfig(**tiny, intermediate_size=37, num_hidden_layers=1))
assistant.generation_config.num_assistant_tokens, assistant.generation_config.assistant_confidence_threshold = 3, 0.0
input_ids = torch.randint(2, 63, (1, 12), generator=torch.Generator().manual_seed(1))
kwargs = {"attention_mask": torch.ones_like(input_ids), "max_new_tokens": 16, "do_sample": False, "eos_token_id": None}
greedy = model.generate(input_ids, cache_implementation="static", **kwargs)
assisted = model.generate(input_ids, cache_implementation="static", assistant_model=assistant, **kwargs)
print(assisted.tolist() == greedy.tolist())  # 5.25.0: False. With this PR: True
