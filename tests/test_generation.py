# Copyright 2026 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""End-to-end generation with the crop fix: assisted decoding and prompt lookup give exactly the greedy tokens.

Tiny randomly initialised models built from configs (Llama; Mistral, Gemma2 and Gemma3 with a 4-token sliding window
that generation crosses; Bart for `EncoderDecoderCache`). Assisted decoding corrects wrong drafts, so matching greedy
output cannot prove the assistant path right on its own: a spy also records, without changing anything, what the
assistant cache holds after each rollback (`AssistedCandidateGenerator._update_past_and_masks`) and compares it with
a fresh forward pass of the assistant over the tokens it should hold.

The models run in float64 and every comparison between two computation paths is robust to the CPU kernel set and the
thread count (`tests/numerics.py`): the rolled-back states are compared exactly with the states they were sliced from,
and with a fresh forward pass within a tolerance derived from the dtype and the magnitude of the states; the greedy
references are checked to have no near-tie, so that assisted decoding (another path) must reproduce their tokens.
"""

import contextlib
import copy
import warnings
from functools import cache

import pytest
from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch

from .compat import CACHE_KWARG, TARGET, output_cache
from .numerics import MODEL_DTYPE, TinyModelTestCase, assert_no_near_tie, assert_states_close, cross_path_atol


# The spy and the expected cache lengths follow the assistant rollback of 5.14 and 5.24
# (`_update_past_and_masks(input_ids, remove_from_pkv, num_added_tokens)`); 5.25 rewrote it around
# `_last_ids_length`. There, `tests/test_generation_main_hybrid.py` and `tests/v5_25/generation/` check the rollbacks
pytestmark = pytest.mark.skipif(TARGET.name == "v5_25", reason="the assistant rollback of 5.14 and 5.24")

if is_torch_available():
    import torch

    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        DynamicCache,
        EncoderDecoderCache,
        Gemma2Config,
        Gemma2ForCausalLM,
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
    )
    from transformers.cache_utils import DynamicSlidingWindowLayer
    from transformers.generation.candidate_generator import AssistedCandidateGenerator, PromptLookupCandidateGenerator


VOCAB_SIZE = 64
SLIDING_WINDOW = 4
NUM_ASSISTANT_TOKENS = 5
MAX_NEW_TOKENS = 16
# Decoder prompt lengths: 1 token is the case where stock 5.14.1 calls `crop(0)` on the assistant cache (a no-op there)
PROMPT_LENGTHS = [1, 7]
# Encoder input length of the encoder-decoder model (its decoder prompt starts with `decoder_start_token_id`)
ENCODER_INPUT_LENGTH = 6

DECODER_ONLY_MODELS = ["llama", "mistral", "gemma2", "gemma3"]
SLIDING_MODELS = ["mistral", "gemma2", "gemma3"]
ALL_MODELS = DECODER_ONLY_MODELS + ["bart"]
MODEL_CASES = [(model_name, prompt_length) for model_name in ALL_MODELS for prompt_length in PROMPT_LENGTHS]


def _case_name(func, num, params):
    """Test names like `test_assistant_model_matches_greedy_llama_prompt_1`."""
    model_name, *rest = params.args
    return f"{func.__name__}_{model_name}" + (f"_prompt_{rest[0]}" if rest else "")


def _config(model_name):
    common = {
        "vocab_size": VOCAB_SIZE,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }
    if model_name == "llama":
        return LlamaConfig(**common)
    if model_name == "mistral":
        return MistralConfig(sliding_window=SLIDING_WINDOW, **common)
    if model_name == "gemma2":
        return Gemma2Config(
            head_dim=8,
            query_pre_attn_scalar=8,
            sliding_window=SLIDING_WINDOW,
            layer_types=["sliding_attention", "full_attention"],
            **common,
        )
    if model_name == "gemma3":
        return Gemma3TextConfig(
            head_dim=8,
            query_pre_attn_scalar=8,
            sliding_window=SLIDING_WINDOW,
            layer_types=["sliding_attention", "full_attention"],
            **common,
        )
    if model_name == "bart":
        return BartConfig(
            vocab_size=VOCAB_SIZE,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_position_embeddings=128,
            bos_token_id=0,
            pad_token_id=1,
            eos_token_id=None,
            decoder_start_token_id=2,
            forced_bos_token_id=None,
            forced_eos_token_id=None,
            # With the default 0.02, a tiny random Bart repeats one token forever (and two such models agree)
            init_std=1.0,
        )
    raise ValueError(model_name)


@cache
def _model(model_name, seed):
    """A tiny randomly initialised model (in eval mode) that never stops early: no EOS token."""
    model_classes = {
        "llama": LlamaForCausalLM,
        "mistral": MistralForCausalLM,
        "gemma2": Gemma2ForCausalLM,
        "gemma3": Gemma3ForCausalLM,
        "bart": BartForConditionalGeneration,
    }
    torch.manual_seed(seed)
    # Initialised in float32 (the same weights as before, rounded), computed in float64: see `tests/numerics.py`
    model = model_classes[model_name](_config(model_name)).eval().to(MODEL_DTYPE)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    return model


def _configure_assistant(assistant):
    """Makes `assistant` always draft exactly `NUM_ASSISTANT_TOKENS` tokens (no schedule, no early stop on confidence)."""
    assistant.generation_config.num_assistant_tokens = NUM_ASSISTANT_TOKENS
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    # The default threshold (0.4) would stop drafting after one token of a random model (`None` reads as the default)
    assistant.generation_config.assistant_confidence_threshold = 0.0
    return assistant


@cache
def _assistant(model_name, same_weights):
    """A different random model of the same architecture, or an identical copy of the main model."""
    assistant = copy.deepcopy(_model(model_name, seed=0)) if same_weights else _model(model_name, seed=1)
    return _configure_assistant(assistant)


def _inputs(model_name, prompt_length, decoder_attention_mask=True):
    """Generation inputs with a `prompt_length`-token decoder prompt (starting with the decoder start token for Bart).

    For the encoder-decoder model, `decoder_attention_mask` passes an all-ones decoder mask. Without it, 5.14.1's
    assisted decoding re-feeds the assistant its whole decoder prompt at each round (its prefill slices the input
    against the cache only when a decoder mask is present), so the assistant cache holds duplicated tokens whatever
    `crop` does (an upstream issue unrelated to `crop`); the tokens still match greedy decoding.
    """
    generator = torch.Generator().manual_seed(prompt_length)
    if model_name == "bart":
        config = _model(model_name, seed=0).config
        inputs = {"input_ids": torch.randint(3, VOCAB_SIZE, (1, ENCODER_INPUT_LENGTH), generator=generator)}
        decoder_prompt = torch.randint(3, VOCAB_SIZE, (1, prompt_length - 1), generator=generator)
        start = torch.full((1, 1), config.decoder_start_token_id, dtype=torch.long)
        decoder_input_ids = torch.cat([start, decoder_prompt], dim=-1)
        if decoder_attention_mask:
            inputs["decoder_input_ids"] = decoder_input_ids
            inputs["decoder_attention_mask"] = torch.ones_like(decoder_input_ids)
        elif prompt_length > 1:
            inputs["decoder_input_ids"] = decoder_input_ids
        return inputs
    return {"input_ids": torch.randint(3, VOCAB_SIZE, (1, prompt_length), generator=generator)}


@cache
def _greedy(model_name, prompt_length):
    """Plain greedy decoding of the main model: the reference every assisted mode must reproduce token for token,
    and the logits of each step (to check that no step is a near-tie)."""
    model = _model(model_name, seed=0)
    output = model.generate(
        **_inputs(model_name, prompt_length),
        do_sample=False,
        max_new_tokens=MAX_NEW_TOKENS,
        return_dict_in_generate=True,
        output_logits=True,
    )
    return output.sequences, output.logits


def _self_attention_layers(cache):
    if isinstance(cache, EncoderDecoderCache):
        cache = cache.self_attention_cache
    return cache.layers


def _clone_states(cache):
    """Per layer: its keys and values, and the position of their first token (a sliding-window layer keeps only the
    last tokens: 5.24's assistant caches have sliding layers where the model has them)."""
    return [
        (layer.keys.clone(), layer.values.clone(), int(layer.get_seq_length()) - layer.keys.shape[-2])
        for layer in _self_attention_layers(cache)
    ]


class _CandidateGeneratorSpy:
    """Records what `AssistedCandidateGenerator` does in each drafting round, without changing its behaviour.

    While active, the installed `_update_past_and_masks` and `get_candidates` of `AssistedCandidateGenerator` (the
    fixed or the stock ones) are wrapped: the wrappers call them unchanged and record their arguments and results,
    including a copy of the assistant cache right after the rollback. The originals are restored on exit.
    """

    def __init__(self):
        self.updates = []  # one dict per `_update_past_and_masks` call
        self.drafts = []  # one dict per `get_candidates` call

    def __enter__(self):
        cls = AssistedCandidateGenerator
        self._originals = {name: cls.__dict__[name] for name in ("_update_past_and_masks", "get_candidates")}
        update_past_and_masks, get_candidates = (
            self._originals["_update_past_and_masks"],
            self._originals["get_candidates"],
        )
        spy = self

        def spy_update_past_and_masks(generator, input_ids, remove_from_pkv=0, num_added_tokens=1):
            cache = generator.assistant_kwargs.get(CACHE_KWARG)
            cache_length_before = cache.get_seq_length() if cache is not None else None
            states_before = None if cache is None else _clone_states(cache)
            has_past = update_past_and_masks(generator, input_ids, remove_from_pkv, num_added_tokens)
            cache = generator.assistant_kwargs.get(CACHE_KWARG)
            spy.updates.append(
                {
                    "input_ids": input_ids.clone(),
                    "remove_from_pkv": remove_from_pkv,
                    "num_added_tokens": num_added_tokens,
                    "has_past": has_past,
                    "cache_length_before": cache_length_before,
                    "cache_length": cache.get_seq_length() if cache is not None else None,
                    "cache_states_before": states_before,
                    "cache_states": None if cache is None else _clone_states(cache),
                    "assistant_model": generator.assistant_model,
                    "encoder_outputs": generator.assistant_kwargs.get("encoder_outputs"),
                    "attention_mask": generator.assistant_kwargs.get("attention_mask"),
                }
            )
            return has_past

        def spy_get_candidates(generator, input_ids, **kwargs):
            candidate_ids, candidate_logits = get_candidates(generator, input_ids, **kwargs)
            spy.drafts.append(
                {
                    "input_length": input_ids.shape[-1],
                    "draft_length": candidate_ids.shape[-1] - input_ids.shape[-1],
                    "max_length": generator.main_model_max_length,
                }
            )
            return candidate_ids, candidate_logits

        cls._update_past_and_masks = spy_update_past_and_masks
        cls.get_candidates = spy_get_candidates
        return self

    def __exit__(self, *exc_info):
        for name, original in self._originals.items():
            setattr(AssistedCandidateGenerator, name, original)
        return False


@contextlib.contextmanager
def _prompt_lookup_spy():
    """Records each draft of `PromptLookupCandidateGenerator.get_candidates` (behaviour unchanged)."""
    cls = PromptLookupCandidateGenerator
    original = cls.__dict__["get_candidates"]
    drafts = []

    def spy_get_candidates(generator, input_ids, **kwargs):
        candidate_ids, candidate_logits = original(generator, input_ids, **kwargs)
        drafts.append(
            {"input_length": input_ids.shape[-1], "draft_length": candidate_ids.shape[-1] - input_ids.shape[-1]}
        )
        return candidate_ids, candidate_logits

    cls.get_candidates = spy_get_candidates
    try:
        yield drafts
    finally:
        cls.get_candidates = original


@require_torch
class AssistedGenerationCropTest(TinyModelTestCase):
    """Assisted decoding and prompt lookup reproduce greedy decoding, and every rollback leaves the right cache."""

    def generate_recording_warnings(self, model, **kwargs):
        """Runs `model.generate`, failing if library code warned about an absolute crop."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            output = model.generate(do_sample=False, max_new_tokens=MAX_NEW_TOKENS, **kwargs)
        crop_warnings = [
            f"{w.filename}:{w.lineno}: {w.message}"
            for w in caught
            if issubclass(w.category, FutureWarning) and "absolute length" in str(w.message)
        ]
        self.assertEqual(crop_warnings, [], "library code cropped a cache to an absolute length")
        return output

    def assertSameTokens(self, sequences, model_name, prompt_length):
        expected, step_logits = _greedy(model_name, prompt_length)
        # Another path gives the same argmax only away from near-ties (a set-up check, on every kernel set)
        assert_no_near_tie(step_logits, f"of {model_name} with a {prompt_length}-token prompt")
        self.assertEqual(sequences.tolist(), expected.tolist())

    def assertAssistantCacheRight(self, spy, check_states=True):
        """After each rollback, the assistant cache holds exactly the tokens the candidate generator intends."""
        self.assertGreaterEqual(len(spy.updates), 2, "expected several drafting rounds")
        # The assistant has no cache before its first draft, and reuses it afterwards
        self.assertEqual([update["has_past"] for update in spy.updates], [False] + [True] * (len(spy.updates) - 1))
        for round_idx, update in enumerate(spy.updates[1:], start=1):
            input_ids = update["input_ids"]
            intended = max(input_ids.shape[-1] - 1 - update["remove_from_pkv"] - update["num_added_tokens"], 0)
            self.assertEqual(update["cache_length"], intended, f"assistant cache length after round {round_idx}")
            # Rolling back only drops trailing positions: what is kept is bit for bit what was there before
            # (the same tensors, sliced; no recomputation, so no numerical tolerance)
            for layer_idx, ((keys, values, first), (keys_before, values_before, first_before)) in enumerate(
                zip(update["cache_states"], update["cache_states_before"])
            ):
                message = f"assistant cache layer {layer_idx} changed by the rollback of round {round_idx}"
                # The kept tokens end at `intended`, and were all held before the rollback
                self.assertEqual(first + keys.shape[-2], intended, message)
                self.assertGreaterEqual(first, first_before, message)
                kept = slice(first - first_before, intended - first_before)
                self.assertTrue(torch.equal(keys, keys_before[..., kept, :]), message)
                self.assertTrue(torch.equal(values, values_before[..., kept, :]), message)
            if check_states:
                self.assertAssistantStatesMatch(update, input_ids[:, :intended], round_idx)

    def assertAssistantStatesMatch(self, update, prefix_ids, round_idx):
        """The kept key/value states are those of a fresh assistant forward pass over `prefix_ids`."""
        states = update["cache_states"]
        if prefix_ids.shape[-1] == 0:
            for keys, values, _ in states:
                self.assertEqual((keys.numel(), values.numel()), (0, 0), f"stale states after round {round_idx}")
            return
        assistant = update["assistant_model"]
        with torch.no_grad():
            if assistant.config.is_encoder_decoder:
                expected_cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
                assistant(
                    encoder_outputs=update["encoder_outputs"],
                    attention_mask=update["attention_mask"],
                    decoder_input_ids=prefix_ids,
                    **{CACHE_KWARG: expected_cache},
                    use_cache=True,
                )
            else:
                # No config: full-attention layers, as the assistant cache of assisted decoding ("dynamic_full")
                expected_cache = DynamicCache()
                assistant(input_ids=prefix_ids, use_cache=True, **{CACHE_KWARG: expected_cache})
        expected_layers = _self_attention_layers(expected_cache)
        self.assertEqual(len(states), len(expected_layers))
        for layer_idx, ((keys, values, first), expected_layer) in enumerate(zip(states, expected_layers)):
            message = f"assistant cache layer {layer_idx} after round {round_idx}"
            # Built incrementally vs by one forward pass: two kernel paths (tolerance from `tests/numerics.py`). A
            # sliding-window layer holds the last of those tokens
            kept = slice(first, prefix_ids.shape[-1])
            assert_states_close(keys, expected_layer.keys[..., kept, :], msg=message)
            assert_states_close(values, expected_layer.values[..., kept, :], msg=message)

    def assertDraftLengths(self, spy):
        """Each draft has `NUM_ASSISTANT_TOKENS` tokens unless the length budget allows fewer."""
        for draft in spy.drafts:
            budget = draft["max_length"] - draft["input_length"] - 1
            self.assertEqual(draft["draft_length"], min(NUM_ASSISTANT_TOKENS, budget))

    @staticmethod
    def accepted_per_round(drafts, final_length):
        """(draft length, accepted draft tokens) per round; each round adds the accepted tokens plus one more."""
        lengths = [draft["input_length"] for draft in drafts] + [final_length]
        return [
            (draft["draft_length"], next_length - draft["input_length"] - 1)
            for draft, next_length in zip(drafts, lengths[1:])
        ]

    @parameterized.expand(MODEL_CASES, name_func=_case_name)
    def test_assistant_model_matches_greedy(self, model_name, prompt_length):
        """A different random assistant drafts 5 tokens per round, mostly rejected: every rollback must be exact."""
        model = _model(model_name, seed=0)
        with _CandidateGeneratorSpy() as spy:
            sequences = self.generate_recording_warnings(
                model, assistant_model=_assistant(model_name, same_weights=False), **_inputs(model_name, prompt_length)
            )
        self.assertSameTokens(sequences, model_name, prompt_length)
        self.assertDraftLengths(spy)
        rounds = self.accepted_per_round(spy.drafts, sequences.shape[-1])
        self.assertTrue(any(accepted < drafted for drafted, accepted in rounds), f"no draft was rejected: {rounds}")
        self.assertAssistantCacheRight(spy)
        if prompt_length == 1:
            # The case stock 5.14.1 gets wrong: all drafts of the first round rejected, the assistant cache must be
            # rolled back completely (its `crop(0)` kept everything)
            self.assertEqual(spy.updates[1]["input_ids"].shape[-1], 2)
            self.assertGreater(spy.updates[1]["cache_length_before"], 0)
            self.assertEqual(spy.updates[1]["cache_length"], 0)

    @parameterized.expand([("bart", prompt_length) for prompt_length in PROMPT_LENGTHS], name_func=_case_name)
    def test_encoder_decoder_assistant_without_decoder_mask(self, model_name, prompt_length):
        """Bart as users call it (no decoder mask; a 1-token prompt is the default decoder start token)."""
        model = _model(model_name, seed=0)
        with _CandidateGeneratorSpy() as spy:
            sequences = self.generate_recording_warnings(
                model,
                assistant_model=_assistant(model_name, same_weights=False),
                **_inputs(model_name, prompt_length, decoder_attention_mask=False),
            )
        self.assertSameTokens(sequences, model_name, prompt_length)
        self.assertDraftLengths(spy)
        # Lengths only: without a decoder mask, 5.14.1 re-feeds the assistant its whole decoder prompt at each round
        # (see `_inputs`), so the kept states are not those of a clean forward pass, whatever `crop` does
        self.assertAssistantCacheRight(spy, check_states=False)

    @parameterized.expand(MODEL_CASES, name_func=_case_name)
    def test_same_weights_assistant_matches_greedy(self, model_name, prompt_length):
        """An identical copy of the main model as assistant: every draft is accepted and the caches stay right."""
        model = _model(model_name, seed=0)
        with _CandidateGeneratorSpy() as spy:
            sequences = self.generate_recording_warnings(
                model, assistant_model=_assistant(model_name, same_weights=True), **_inputs(model_name, prompt_length)
            )
        self.assertSameTokens(sequences, model_name, prompt_length)
        self.assertDraftLengths(spy)
        rounds = self.accepted_per_round(spy.drafts, sequences.shape[-1])
        self.assertTrue(all(accepted == drafted for drafted, accepted in rounds), f"rejected drafts: {rounds}")
        self.assertAssistantCacheRight(spy)

    @parameterized.expand(MODEL_CASES, name_func=_case_name)
    def test_prompt_lookup_matches_greedy(self, model_name, prompt_length):
        """Prompt lookup decoding (the main model's cache is rolled back after rejected drafts)."""
        model = _model(model_name, seed=0)
        with _prompt_lookup_spy() as drafts:
            sequences = self.generate_recording_warnings(
                model, prompt_lookup_num_tokens=NUM_ASSISTANT_TOKENS, **_inputs(model_name, prompt_length)
            )
        self.assertSameTokens(sequences, model_name, prompt_length)
        rounds = self.accepted_per_round(drafts, sequences.shape[-1])
        self.assertTrue(any(drafted > 0 for drafted, _ in rounds), f"prompt lookup never proposed a draft: {rounds}")
        self.assertTrue(any(accepted < drafted for drafted, accepted in rounds), f"no draft was rejected: {rounds}")

    @parameterized.expand(MODEL_CASES, name_func=_case_name)
    def test_main_cache_length_after_assisted_generation(self, model_name, prompt_length):
        """After assisted decoding, the main model's cache holds every token but the last one."""
        model = _model(model_name, seed=0)
        # Bart without a decoder mask (and with the default 1-token decoder prompt): the plain user path
        inputs = _inputs(model_name, prompt_length, decoder_attention_mask=False)
        output = self.generate_recording_warnings(
            model,
            assistant_model=_assistant(model_name, same_weights=False),
            return_dict_in_generate=True,
            **inputs,
        )
        self.assertSameTokens(output.sequences, model_name, prompt_length)
        cache = output_cache(output)
        self.assertEqual(cache.get_seq_length(), output.sequences.shape[-1] - 1)
        for layer in _self_attention_layers(cache):
            self.assertEqual(layer.get_seq_length(), output.sequences.shape[-1] - 1)
        if isinstance(cache, EncoderDecoderCache):
            # Cross-attention states cover the encoder input and are never cropped
            self.assertEqual(cache.cross_attention_cache.get_seq_length(), inputs["input_ids"].shape[-1])

    @parameterized.expand(SLIDING_MODELS, name_func=_case_name)
    def test_sliding_window_is_crossed(self, model_name):
        """Guards the set-up: the sliding models use their 4-token window, and greedy generation goes beyond it."""
        model = _model(model_name, seed=0)
        self.assertEqual(model.config.sliding_window, SLIDING_WINDOW)
        output = model.generate(
            **_inputs(model_name, 1), do_sample=False, max_new_tokens=MAX_NEW_TOKENS, return_dict_in_generate=True
        )
        sliding_layers = [
            layer for layer in output_cache(output).layers if isinstance(layer, DynamicSlidingWindowLayer)
        ]
        self.assertGreater(len(sliding_layers), 0)
        for layer in sliding_layers:
            self.assertEqual(layer.get_seq_length(), output.sequences.shape[-1] - 1)
            self.assertEqual(layer.keys.shape[-2], SLIDING_WINDOW - 1)

        # The window changes the logits: the same weights with a window larger than the sequence predict otherwise
        wide_config = copy.deepcopy(model.config)
        wide_config.sliding_window = 64
        wide_model = type(model)(wide_config).eval().to(MODEL_DTYPE)
        wide_model.load_state_dict(model.state_dict())
        with torch.no_grad():
            logits = model(output.sequences).logits
            wide_logits = wide_model(output.sequences).logits
        # Up to the window both see the same tokens (the masks differ, so possibly other kernels: derived tolerance);
        # past it, the window changes the logits far beyond that tolerance
        atol = cross_path_atol(logits)
        torch.testing.assert_close(logits[:, :SLIDING_WINDOW], wide_logits[:, :SLIDING_WINDOW], rtol=0, atol=atol)
        self.assertGreater((logits[:, -1] - wide_logits[:, -1]).abs().max().item(), 1000 * atol)
