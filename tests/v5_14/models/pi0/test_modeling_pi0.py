# Copyright 2026 The HuggingFace Team. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

import unittest
import warnings

from transformers import is_torch_available
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch

    from transformers import PI0Config, PI0ForConditionalGeneration
    from transformers.cache_utils import Cache


IMAGE_TOKEN_ID = 99
TINY_GEMMA = {
    "model_type": "gemma",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "vocab_size": 100,
}


def _tiny_pi0():
    """A tiny randomly initialised PI0 (SigLIP + Gemma VLM, Gemma action expert), built from configs only."""
    vision_config = {
        "model_type": "siglip_vision_model",
        "hidden_size": 32,
        "intermediate_size": 64,
        "patch_size": 8,
        "image_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "vision_use_head": False,
    }
    vlm_config = {
        "model_type": "paligemma",
        "text_config": TINY_GEMMA,
        "vision_config": vision_config,
        "projection_dim": 32,
        "image_token_id": IMAGE_TOKEN_ID,
    }
    config = PI0Config(
        vlm_config=vlm_config,
        dit_config=TINY_GEMMA,
        chunk_size=4,
        max_state_dim=6,
        max_action_dim=6,
        num_inference_steps=3,
    )
    torch.manual_seed(0)
    return PI0ForConditionalGeneration(config).eval()


@require_torch
class PI0SampleActionsCacheRollbackTest(unittest.TestCase):
    def test_each_denoising_step_rolls_the_cache_back_to_the_prefix(self):
        model = _tiny_pi0()
        input_ids = torch.tensor([[IMAGE_TOKEN_ID] * 4 + [5, 6, 7]])
        prefix_length = input_ids.shape[1]
        inputs = {
            "state": torch.randn(1, 6),
            "input_ids": input_ids,
            "pixel_values": torch.randn(1, 1, 3, 16, 16),
            "pixel_attention_mask": torch.ones(1, 1, dtype=torch.bool),
            "noise": torch.randn(1, 4, 6),
            "attention_mask": torch.ones_like(input_ids),
        }
        # Record every crop (argument, and the lengths before and after) without changing what it does
        crops = []
        original_crop = Cache.crop

        def recording_crop(cache, *args, **kwargs):
            length_before = cache.get_seq_length()
            original_crop(cache, *args, **kwargs)
            crops.append((args, kwargs, length_before, cache.get_seq_length()))

        Cache.crop = recording_crop
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", FutureWarning)
                actions = model.sample_actions(**inputs)
        finally:
            Cache.crop = original_crop

        self.assertEqual(actions.shape, (1, 4, 6))
        self.assertEqual(len(crops), 3)  # one per denoising step
        for args, kwargs, length_before, length_after in crops:
            # Back to the prefix, by removing what the step appended: the relative form, which keeps its meaning when
            # absolute crops go away (an absolute `crop(prefix_length)` would read as "remove nothing" from 5.15)
            self.assertEqual(length_after, prefix_length)
            self.assertEqual((args, kwargs), ((prefix_length - length_before,), {}))
            self.assertLess(args[0], 0)

        # Same actions when called again: nothing of a previous call or step leaks through the cache
        torch.testing.assert_close(model.sample_actions(**inputs), actions, rtol=0, atol=0)
