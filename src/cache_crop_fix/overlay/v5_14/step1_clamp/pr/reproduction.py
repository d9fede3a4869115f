import torch

from transformers import DynamicCache


key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)
for argument in (0, -5):
    cache = DynamicCache()
    cache.update(key, key.clone(), layer_idx=0)
    cache.crop(argument)
    print(cache.get_seq_length())  # 5.14.1: 3, then 1 (stale tokens). With this PR: 0, then 0
