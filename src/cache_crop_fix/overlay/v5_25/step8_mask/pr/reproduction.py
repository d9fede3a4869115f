import torch

from transformers import Qwen3NextConfig, StaticCache
from transformers.masking_utils import create_causal_mask


config = Qwen3NextConfig(
    hidden_size=32, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"], attn_implementation="sdpa"
)
cache = StaticCache(config=config, max_cache_len=8)
cache.update(torch.rand(1, 2, 3, 256), torch.rand(1, 2, 3, 256), layer_idx=1)  # 3 tokens
cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding and prompt lookup do
mask = create_causal_mask(config, torch.empty(1, 1, 0), None, cache, position_ids=torch.tensor([[3]]))
print(mask if mask is None else int(mask.sum()))  # slots the 4th token sees. 5.25.0: None (all 8). With this PR: 4
