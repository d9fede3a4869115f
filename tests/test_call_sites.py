"""Library call sites that crop a cache use the negative form: same results as before, and no deprecation warning.

On 5.14 the fix rewrites PI0's absolute `crop(prefix_length)` (5.14's step 2); 5.24 already asks the relative form, so
there the same checks hold with the fix without a patch of PI0.
"""

import unittest
import warnings

import torch

import cache_crop_fix

# The tiny PI0 of the exported test, built from configs only
from tests.v5_14.models.pi0.test_modeling_pi0 import IMAGE_TOKEN_ID, _tiny_pi0
from transformers.cache_utils import Cache

from .compat import TARGET


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
        patched = "transformers.models.pi0.modeling_pi0.PI0ForConditionalGeneration.sample_actions"
        self.assertEqual(patched in cache_crop_fix.status().patches, TARGET.name == "v5_14")

        # Stock computed the same actions (5.14 with its absolute `crop(prefix_length)`). Exact, on any kernel set: both
        # runs take the same path (same model, inputs, shapes and thread count; only the form of the crop differs)
        cache_crop_fix.revert()
        try:
            expected = model.sample_actions(**inputs)
        finally:
            cache_crop_fix.apply()
        torch.testing.assert_close(actions, expected, rtol=0, atol=0)
