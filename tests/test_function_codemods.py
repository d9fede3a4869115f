"""Codemods of module-level functions (5.25's step 8 changes one statement of each mask function): the patcher swaps the
function's code object under its decorators, so that the modules that imported it by name run the change too, and
`revert()` puts the original code back."""

import inspect
import unittest

import pytest
import torch

import cache_crop_fix
import transformers


pytestmark = pytest.mark.skipif(
    not transformers.__version__.startswith("5.25"), reason="the mask functions are changed on 5.25 only"
)
if transformers.__version__.startswith("5.25"):
    from transformers import Qwen3NextConfig, StaticCache, masking_utils
    from transformers.models.qwen3_next import modeling_qwen3_next


def _mask_over_a_recording_static_cache():
    """The mask of one token over a static hybrid cache whose linear layer records, as `modeling_qwen3_next` builds it."""
    config = Qwen3NextConfig(
        hidden_size=32,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
        attn_implementation="sdpa",
    )
    cache = StaticCache(config=config, max_cache_len=8)
    states = torch.rand(1, config.num_key_value_heads, 3, config.head_dim)
    cache.update(states, states, layer_idx=1)
    cache.activate_past_recording(recurrent_states_to_keep=4)
    return modeling_qwen3_next.create_causal_mask(
        config, torch.empty(1, 1, 0), None, cache, position_ids=torch.tensor([[3]])
    )


class FunctionCodemodTest(unittest.TestCase):
    def tearDown(self):
        cache_crop_fix.apply()

    def test_a_module_that_imported_the_function_by_name_runs_the_change(self):
        cache_crop_fix.apply()
        self.assertIs(modeling_qwen3_next.create_causal_mask, masking_utils.create_causal_mask)
        self.assertIn("transformers.masking_utils.create_causal_mask", cache_crop_fix.status().patches)
        self.assertEqual(int(_mask_over_a_recording_static_cache().sum()), 4)

    def test_revert_puts_the_original_code_back(self):
        cache_crop_fix.revert()
        function = inspect.unwrap(masking_utils.create_causal_mask)
        self.assertEqual(function.__code__.co_filename, masking_utils.__file__)
        self.assertIsNone(_mask_over_a_recording_static_cache())
        cache_crop_fix.apply()
        self.assertIn("_has_static_layers(cache)", inspect.getsource(function))
