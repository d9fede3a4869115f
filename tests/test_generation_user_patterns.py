"""Assisted decoding across the calls users make (transformers 5.25 only; issue 39): a second turn that passes the
first turn's cache back, with the assistant in either turn, and a prefix cache deep-copied and reused twice.

The families are the ten the issue tried as a new user would (Llama, Qwen3-Next, LFM2, Mamba2, FalconH1, NemotronH,
Jamba, Zamba, Bailing-hybrid, Qwen3.5-MoE), built as in `tests/test_generation_main_hybrid.py` (tiny, float64), with
its random tiny Llama assistant. Every case checks the tokens against plain greedy decoding over the same input, and
the cache left behind against a fresh forward over the tokens it must hold (every layer: keys, values, conv and
recurrent states, lengths), and that it no longer records its past. On stock 5.25.0 the continued caches hold the
earlier turn twice (step 13), the returned cache keeps recording (step 14), and Jamba's and Zamba's second turns
restart their scan from zeros (step 16 and step 7).
"""

import copy

import pytest
from parameterized import parameterized

import transformers
from transformers.testing_utils import require_torch

from .numerics import TinyModelTestCase


pytestmark = pytest.mark.skipif(
    not transformers.__version__.startswith("5.25"), reason="the main-model state history of transformers 5.25 only"
)

if transformers.__version__.startswith("5.25"):
    import torch

    from .test_generation_main_hybrid import _assistant, _compare_caches, _fresh_cache, _input_ids, _main_model


FAMILIES = [
    "llama",
    "qwen3_next",
    "lfm2",
    "mamba2",
    "falcon_h1",
    "nemotron_h",
    "jamba",
    "zamba",
    "bailing_hybrid",
    "qwen3_5_moe",
]
SECOND_MESSAGE = [[7, 11, 13]]


def _generate(model, input_ids, cache=None, assisted=False, max_new_tokens=6):
    kwargs = {"assistant_model": _assistant(model.name, "random")} if assisted else {}
    output = model.generate(
        input_ids, cache=cache, do_sample=False, max_new_tokens=max_new_tokens, return_dict_in_generate=True, **kwargs
    )
    return output.sequences, output.cache


def _model(name):
    model = _main_model(name)
    model.name = name
    return model


@require_torch
class AssistedDecodingAcrossCallsTest(TinyModelTestCase):
    def assertCacheHolds(self, model, cache, sequences):
        """The cache equals a fresh one over every token but the last, and records nothing."""
        self.assertEqual(_compare_caches(cache, _fresh_cache(model, sequences[:, :-1])), [])
        self.assertFalse(any(getattr(layer, "record_past", False) for layer in cache.layers))

    def _second_turn(self, name, first_assisted, second_assisted):
        model = _model(name)
        first, cache = _generate(model, _input_ids(), assisted=first_assisted)
        input_ids = torch.cat([first, torch.tensor(SECOND_MESSAGE)], dim=-1)
        expected, _ = _generate(model, input_ids)
        second, cache = _generate(model, input_ids, cache=cache, assisted=second_assisted)
        self.assertEqual(second.tolist(), expected.tolist())
        self.assertCacheHolds(model, cache, second)

    @parameterized.expand(FAMILIES)
    def test_second_turn_with_an_assistant_continues_the_first_turns_cache(self, name):
        self._second_turn(name, first_assisted=False, second_assisted=True)

    @parameterized.expand(FAMILIES)
    def test_plain_second_turn_continues_the_cache_assisted_decoding_returned(self, name):
        self._second_turn(name, first_assisted=True, second_assisted=False)

    @parameterized.expand(FAMILIES)
    def test_deep_copied_prefix_cache_is_reused_twice(self, name):
        """A prefix cache is deep-copied for each of two assisted calls: each equals greedy, the prefix is unchanged."""
        model = _model(name)
        prefix = _input_ids()
        _, prefix_cache = _generate(model, prefix, max_new_tokens=1)
        prefix = prefix[:, : prefix_cache.get_seq_length()]
        before = _compare_caches(prefix_cache, _fresh_cache(model, prefix))
        self.assertEqual(before, [])
        for suffix in ([[5, 9]], [[21, 3, 8]]):
            input_ids = torch.cat([prefix, torch.tensor(suffix)], dim=-1)
            expected, _ = _generate(model, input_ids)
            cache = copy.deepcopy(prefix_cache)
            sequences, cache = _generate(model, input_ids, cache=cache, assisted=True)
            self.assertEqual(sequences.tolist(), expected.tolist())
            self.assertCacheHolds(model, cache, sequences)
        self.assertEqual(_compare_caches(prefix_cache, _fresh_cache(model, prefix)), [])
