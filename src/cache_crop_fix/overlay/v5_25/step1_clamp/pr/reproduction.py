import torch

from transformers.cache_utils import DynamicSlidingWindowLayer, StaticIndexedLayer, StaticLayer


layer = DynamicSlidingWindowLayer(sliding_window=4)
layer.activate_past_recording()  # as `generate` sets up an assistant's cache
layer.update(torch.ones(1, 1, 6, 1), torch.ones(1, 1, 6, 1))
layer.crop(0)  # `generate`, after every forward
layer.update(torch.ones(1, 1, 2, 1), torch.ones(1, 1, 2, 1))
layer.crop(-20)
print(layer.cumulative_length)  # 5.25.0: -12. With this PR: 0
layer = StaticLayer(max_cache_len=8)
layer.update(torch.ones(1, 1, 3, 1), torch.ones(1, 1, 3, 1), {"cache_position": torch.arange(3)})
layer.crop(-5)
print(layer.get_seq_length())  # 5.25.0: tensor(-2). With this PR: tensor(0)
layer = StaticIndexedLayer(max_cache_len=8)
layer.update(torch.ones(1, 1, 3, 1), torch.ones(1, 1, 3, 1))
layer.indexer_position_ids = torch.arange(3).view(1, 1, 3)  # as Qwen4-Exp keeps them
layer.crop(-1)
print(layer.indexer_position_ids.shape[-1])  # 5.25.0: 3. With this PR: 2
