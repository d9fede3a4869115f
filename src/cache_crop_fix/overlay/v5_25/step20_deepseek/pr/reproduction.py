import torch

from transformers import DeepseekV4Config
from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4CSACache


config = DeepseekV4Config(num_hidden_layers=1, layer_types=["compressed_sparse_attention"], sliding_window=8)
layer = DeepseekV4CSACache(config)
states = torch.ones(1, 1, 3, 1)
layer.update(states, states)
layer.store_compression_weights("compressor", states.view(1, 3, 1), states.view(1, 3, 1))
layer.crop(-1)
print(layer.get_seq_length(), layer.buffer_kv["compressor"].shape[1])  # 5.25.0: 2 3. With this PR: ValueError
