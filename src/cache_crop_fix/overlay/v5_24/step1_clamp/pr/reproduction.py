import torch

from transformers.cache_utils import DynamicSlidingWindowLayer


layer = DynamicSlidingWindowLayer(sliding_window=4)
layer.activate_past_recording()
layer.update(torch.ones(1, 1, 6, 1), torch.ones(1, 1, 6, 1))  # 6 tokens
layer.crop(-8)  # remove more tokens than the layer holds
print(layer.cumulative_length)  # 5.24.0: -2, and the next `update` reports a length of -1. With this PR: 0
