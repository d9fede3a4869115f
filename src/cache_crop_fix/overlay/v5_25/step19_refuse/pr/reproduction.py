import torch

from transformers.cache_utils import DynamicSlidingWindowLayer


layer = DynamicSlidingWindowLayer(sliding_window=3)
layer.activate_past_recording()  # an assistant's cache, as `generate` sets it up
layer.update(torch.ones(1, 1, 4, 1), torch.ones(1, 1, 4, 1))
layer.crop(0)  # `generate`, after every forward
layer.crop(-1)
print(layer.keys.shape[-2], layer.get_seq_length())  # 5.25.0: 1 3 (the window needs 3). With this PR: ValueError
