"""Assisted decoding across the calls users make (transformers 5.25 only; issue 39): a second turn that passes the
first turn's cache back, with the assistant in either turn, a prefix cache deep-copied and reused twice, a stop string,
an end-of-sequence token or `max_new_tokens` inside a draft, sampling (the main cache checked after every round), and a
long generation.

The families are Llama and the 26 hybrid and SSM families of `tests/test_generation_main_hybrid.py`, built as there
(tiny, float64), with its tiny Llama assistant (random, or sharing the embeddings and head so that drafts are
accepted). Every case checks the tokens against plain greedy decoding over the same input, and
the cache left behind against a fresh forward over the tokens it must hold (every layer: keys, values, conv and
recurrent states, lengths), and that it no longer records its past. On stock 5.25.0 the continued caches hold the
earlier turn twice (step 13), the returned cache keeps recording (step 14), and Jamba's and Zamba's second turns
restart their scan from zeros (step 16 and step 7).
"""

import copy
import functools

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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from transformers import PreTrainedTokenizerFast
    from transformers.cache_utils import Cache, LinearAttentionCacheLayerMixin

    from .test_generation_main_hybrid import (
        MAIN_MODELS,
        PROMPT_LENGTH,
        VOCAB_SIZE,
        _assistant,
        _compare_caches,
        _fresh_cache,
        _input_ids,
        _main_model,
        _MainCacheSpy,
    )


# Every family of `tests/test_generation_main_hybrid.py` (the 26 that 5.25 wires into the state history) and Llama
FAMILIES = ["llama", *MAIN_MODELS] if transformers.__version__.startswith("5.25") else ["llama"]
SECOND_MESSAGE = [[7, 11, 13]]


def _generate(name, input_ids, cache=None, assisted=False, max_new_tokens=6, **kwargs):
    """Greedy decoding with the main model of family `name`, with its random (`True`) or `"shared"` assistant."""
    if assisted:
        kwargs["assistant_model"] = _assistant(name, "random" if assisted is True else assisted)
    output = _main_model(name).generate(
        input_ids, cache=cache, do_sample=False, max_new_tokens=max_new_tokens, return_dict_in_generate=True, **kwargs
    )
    return output.sequences, output.cache


@functools.cache
def _tokenizer():
    """A byte-level tokenizer with one token per character, for the sweep's vocabulary of 64."""
    characters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\u0120."
    assert len(characters) == VOCAB_SIZE
    tokenizer = Tokenizer(models.BPE({character: i for i, character in enumerate(characters)}, []))
    tokenizer.pre_tokenizer, tokenizer.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="a")


@require_torch
class AssistedDecodingAcrossCallsTest(TinyModelTestCase):
    def assertCacheHolds(self, name, cache, sequences):
        """The cache equals a fresh one over every token but the last, and records nothing."""
        self.assertEqual(_compare_caches(cache, _fresh_cache(_main_model(name), sequences[:, :-1])), [])
        self.assertFalse(any(getattr(layer, "record_past", False) for layer in cache.layers))

    def _second_turn(self, name, first_assisted, second_assisted):
        first, cache = _generate(name, _input_ids(), assisted=first_assisted)
        input_ids = torch.cat([first, torch.tensor(SECOND_MESSAGE)], dim=-1)
        expected, _ = _generate(name, input_ids)
        second, cache = _generate(name, input_ids, cache=cache, assisted=second_assisted)
        self.assertEqual(second.tolist(), expected.tolist())
        self.assertCacheHolds(name, cache, second)

    @parameterized.expand(FAMILIES)
    def test_second_turn_with_an_assistant_continues_the_first_turns_cache(self, name):
        self._second_turn(name, first_assisted=False, second_assisted=True)

    @parameterized.expand(FAMILIES)
    def test_plain_second_turn_continues_the_cache_assisted_decoding_returned(self, name):
        self._second_turn(name, first_assisted=True, second_assisted=False)

    @parameterized.expand(FAMILIES)
    def test_deep_copied_prefix_cache_is_reused_twice(self, name):
        """A prefix cache is deep-copied for each of two assisted calls: each equals greedy, the prefix is unchanged."""
        model = _main_model(name)
        prefix = _input_ids()
        _, prefix_cache = _generate(name, prefix, max_new_tokens=1)
        prefix = prefix[:, : prefix_cache.get_seq_length()]
        before = _compare_caches(prefix_cache, _fresh_cache(model, prefix))
        self.assertEqual(before, [])
        for suffix in ([[5, 9]], [[21, 3, 8]]):
            input_ids = torch.cat([prefix, torch.tensor(suffix)], dim=-1)
            expected, _ = _generate(name, input_ids)
            cache = copy.deepcopy(prefix_cache)
            sequences, cache = _generate(name, input_ids, cache=cache, assisted=True)
            self.assertEqual(sequences.tolist(), expected.tolist())
            self.assertCacheHolds(name, cache, sequences)
        self.assertEqual(_compare_caches(prefix_cache, _fresh_cache(model, prefix)), [])

    @parameterized.expand(FAMILIES)
    def test_stop_string_inside_a_draft(self, name):
        """A stop string that greedy decoding meets mid-way stops assisted decoding at the same token."""
        tokenizer = _tokenizer()
        greedy, _ = _generate(name, _input_ids(), max_new_tokens=12)
        stop_string = tokenizer.decode(greedy[0, _input_ids().shape[1] + 5])
        expected, _ = _generate(name, _input_ids(), max_new_tokens=12, stop_strings=stop_string, tokenizer=tokenizer)
        sequences, cache = _generate(
            name, _input_ids(), assisted="shared", max_new_tokens=12, stop_strings=stop_string, tokenizer=tokenizer
        )
        self.assertEqual(sequences.tolist(), expected.tolist())
        self.assertCacheHolds(name, cache, sequences)

    @parameterized.expand(FAMILIES)
    def test_end_of_sequence_or_max_new_tokens_inside_a_draft(self, name):
        """An end-of-sequence token, or `max_new_tokens`, inside a draft ends assisted decoding where greedy ends."""
        greedy, _ = _generate(name, _input_ids(), max_new_tokens=12)
        eos_token_id = int(greedy[0, _input_ids().shape[1] + 5])
        for kwargs in ({"eos_token_id": eos_token_id}, {"max_new_tokens": 6}):
            with self.subTest(**kwargs):
                kwargs = {"max_new_tokens": 12, **kwargs}
                expected, _ = _generate(name, _input_ids(), **kwargs)
                sequences, cache = _generate(name, _input_ids(), assisted="shared", **kwargs)
                self.assertEqual(sequences.tolist(), expected.tolist())
                self.assertCacheHolds(name, cache, sequences)

    @parameterized.expand(FAMILIES)
    def test_sampling_keeps_the_states_of_the_kept_tokens(self, name):
        """Speculative sampling: after every round, the main cache equals a fresh forward over the tokens it kept."""
        model = _main_model(name)
        torch.manual_seed(0)
        with _MainCacheSpy(model, PROMPT_LENGTH) as spy:
            model.generate(_input_ids(), do_sample=True, max_new_tokens=12, assistant_model=_assistant(name, "shared"))
        self.assertGreaterEqual(len(spy.rounds), 3)
        self.assertEqual([mismatches for _, _, mismatches in spy.rounds if mismatches], [])

    @parameterized.expand(["qwen3_next", "falcon_h1"])
    def test_long_generation_keeps_the_states_bounded(self, name):
        """Over 1,000 new tokens, every crop brings the conv states back to their working size and empties the history
        (nothing grows with the sequence); the output equals greedy."""
        widths = []
        crop = Cache.crop

        def measuring_crop(cache, *args, **kwargs):
            crop(cache, *args, **kwargs)
            for layer in cache.layers:
                if isinstance(layer, LinearAttentionCacheLayerMixin) and layer.is_conv_states_initialized[0]:
                    history = sum(len(states) for states in layer.recurrent_states_history.values())
                    widths.append((layer.conv_states[0].shape[-1] - layer.conv_kernel_size[0], history))

        expected, _ = _generate(name, _input_ids(), max_new_tokens=1024)
        Cache.crop = measuring_crop
        try:
            sequences, cache = _generate(name, _input_ids(), assisted="shared", max_new_tokens=1024)
        finally:
            Cache.crop = crop
        self.assertEqual(sequences.tolist(), expected.tolist())
        self.assertGreater(len(widths), 100)
        self.assertEqual(set(widths), {(0, 0)})
        self.assertCacheHolds(name, cache, sequences)
