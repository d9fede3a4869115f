"""Library call sites that crop a cache use the negative form: same results as before, and no deprecation warning."""

import unittest
import warnings

import torch

import cache_crop_fix
from transformers import PI0Config, PI0ForConditionalGeneration
from transformers.cache_utils import Cache


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
IMAGE_TOKEN_ID = 99


def _tiny_pi0():
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


class PI0SampleActionsTest(unittest.TestCase):
    def test_denoising_rolls_back_to_the_prefix_without_warning(self):
        model = _tiny_pi0()
        num_image_tokens = (16 // 8) ** 2
        input_ids = torch.tensor([[IMAGE_TOKEN_ID] * num_image_tokens + [5, 6, 7]])
        inputs = {
            "state": torch.randn(1, 6),
            "input_ids": input_ids,
            "pixel_values": torch.randn(1, 1, 3, 16, 16),
            "pixel_attention_mask": torch.ones(1, 1, dtype=torch.bool),
            "noise": torch.randn(1, 4, 6),
            "attention_mask": torch.ones_like(input_ids),
        }
        # Record what every crop leaves in the cache, without changing what it does
        lengths_after_crop = []
        crop_arguments = []
        installed_crop = Cache.crop

        def recording_crop(cache, *args, **kwargs):
            crop_arguments.append((cache.get_seq_length(), args, kwargs))
            installed_crop(cache, *args, **kwargs)
            lengths_after_crop.append(cache.get_seq_length())

        Cache.crop = recording_crop
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", FutureWarning)
                actions = model.sample_actions(**inputs)
        finally:
            Cache.crop = installed_crop

        # One rollback per denoising step, each back to the VLM prefix (image tokens + prompt)
        self.assertEqual(lengths_after_crop, [input_ids.shape[1]] * 3)
        # ... asked in the relative form, which means the same from 5.15 on (stock asks `crop(prefix_length)`)
        for length_before, args, kwargs in crop_arguments:
            self.assertEqual((args, kwargs), ((input_ids.shape[1] - length_before,), {}))

        self.assertTrue(cache_crop_fix.is_active())
        self.assertIn(
            "transformers.models.pi0.modeling_pi0.PI0ForConditionalGeneration.sample_actions",
            cache_crop_fix.status().patches,
        )

        # Stock 5.14 computed the same actions with its absolute `crop(prefix_length)`. Exact, on any kernel set: both
        # runs take the same path (same model, inputs, shapes and thread count; only the form of the crop differs)
        cache_crop_fix.revert()
        try:
            expected = model.sample_actions(**inputs)
        finally:
            cache_crop_fix.apply()
        torch.testing.assert_close(actions, expected, rtol=0, atol=0)
