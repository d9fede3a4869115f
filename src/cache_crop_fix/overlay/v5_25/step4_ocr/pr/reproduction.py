import torch

from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrStaticReferenceSlidingWindowLayer


layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=6, sliding_window=4)
layer.set_prefill_length(2)
layer.update(torch.ones(1, 1, 2, 1), torch.ones(1, 1, 2, 1))  # the prefill (reference) tokens
layer.update(torch.ones(1, 1, 1, 1), torch.ones(1, 1, 1, 1))  # a decoded token
layer.crop(-3)  # every token
print(layer.prefill_cumulative_length, layer.cumulative_length_int)  # 5.25.0: 2 -2. With this PR: 0 0
