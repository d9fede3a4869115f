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


import copy
import unittest
from unittest import mock

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch, torch_device


if is_torch_available():
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        PreTrainedTokenizerFast,
        Qwen3NextConfig,
        Qwen3NextForCausalLM,
    )
    from transformers.cache_utils import Cache, LinearAttentionLayer
    from transformers.generation.candidate_generator import AssistedCandidateGenerator


def _tiny_llama(num_hidden_layers, seed=0):
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=32, hidden_size=32, intermediate_size=37, num_attention_heads=2, num_hidden_layers=num_hidden_layers
    )
    return LlamaForCausalLM(config).to(torch_device, torch.float64).eval()


@require_torch
class AssistedDecodingContinuedCacheTest(unittest.TestCase):
    def test_second_turn_continues_the_cache_of_the_first(self):
        """A second turn that passes the first turn's cache back holds each token once, as greedy decoding does."""
        model, assistant = _tiny_llama(2), _tiny_llama(1, seed=1)
        first_turn = model.generate(
            torch.tensor([[5, 9, 2, 7, 1]], device=torch_device),
            max_new_tokens=4,
            do_sample=False,
            return_dict_in_generate=True,
        )
        input_ids = torch.cat([first_turn.sequences, torch.tensor([[3, 4]], device=torch_device)], dim=-1)
        greedy = model.generate(input_ids, max_new_tokens=6, do_sample=False)

        cache = first_turn.cache
        assisted = model.generate(input_ids, cache=cache, assistant_model=assistant, max_new_tokens=6, do_sample=False)

        self.assertEqual(assisted.tolist(), greedy.tolist())
        # Every token but the last one, each once (5.25.0 appended the first turn's 8 tokens again)
        expected = model(assisted[:, :-1]).cache
        self.assertEqual(cache.get_seq_length(), assisted.shape[1] - 1)
        torch.testing.assert_close(cache.layers[0].keys, expected.layers[0].keys)
        torch.testing.assert_close(cache.layers[0].values, expected.layers[0].values)


@require_torch
class AssistedDecodingReturnedCacheTest(unittest.TestCase):
    def test_returned_cache_does_not_record(self):
        """The cache assisted decoding returns records nothing: decoding that continues it keeps the working size."""
        torch.manual_seed(0)
        config = MistralConfig(
            vocab_size=32,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=2,
            num_key_value_heads=1,
            num_hidden_layers=1,
            sliding_window=4,
        )
        model = MistralForCausalLM(config).to(torch_device, torch.float64).eval()
        output = model.generate(
            torch.tensor([[5, 9, 2, 7, 1]], device=torch_device),
            assistant_model=_tiny_llama(1),
            max_new_tokens=4,
            do_sample=False,
            return_dict_in_generate=True,
        )
        cache = output.cache
        self.assertFalse(cache.layers[0].record_past)

        model.generate(output.sequences, cache=cache, max_new_tokens=10, do_sample=False)

        # The window's last `sliding_window - 1` tokens (5.25.0: every token of the second call, 19)
        self.assertEqual(cache.layers[0].keys.shape[-2], config.sliding_window - 1)


@require_torch
class AssistedDecodingStopStringsTest(unittest.TestCase):
    def test_stop_strings_with_an_assistant_match_greedy(self):
        """Assisted decoding stops at a stop string inside the accepted drafts, as greedy decoding does (5.25.0 raised a
        `ValueError`; with the assistant drafting without stop strings only, the generation went on past it)."""
        characters = "abcdefghijklmnopqrstuvwxyz\u0120.,!?"  # 32 byte-level tokens, one per character
        tokenizer = Tokenizer(models.BPE({character: i for i, character in enumerate(characters)}, []))
        tokenizer.pre_tokenizer, tokenizer.decoder = (
            pre_tokenizers.ByteLevel(add_prefix_space=False),
            decoders.ByteLevel(),
        )
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="a")
        # A copy of the model as assistant: every draft is accepted
        model, assistant = _tiny_llama(2), _tiny_llama(2)
        input_ids = torch.tensor([[5, 9, 2, 7, 1]], device=torch_device)
        inputs = {"max_new_tokens": 20, "do_sample": False, "tokenizer": tokenizer}
        # The 4th new token of greedy decoding is the stop string
        stop_string = tokenizer.decode(model.generate(input_ids, **inputs)[0, 8])

        greedy = model.generate(input_ids, stop_strings=stop_string, **inputs)
        assisted = model.generate(input_ids, stop_strings=stop_string, assistant_model=assistant, **inputs)

        self.assertEqual(assisted.tolist(), greedy.tolist())
        self.assertLess(greedy.shape[1], input_ids.shape[1] + 20)


def _qwen3_next_and_llama_assistant():
    """A tiny Qwen3-Next main model and a tiny Llama assistant (float64) sharing its vocabulary, and their common config."""
    torch.manual_seed(0)
    tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "pad_token_id": 0}
    linear = {"linear_num_value_heads": 2, "linear_num_key_heads": 2, "linear_key_head_dim": 8, "num_experts": 0}
    attention = {"num_key_value_heads": 1, "head_dim": 16, "full_attention_interval": 2}  # linear, then full attention
    config = Qwen3NextConfig(**tiny, **linear, **attention, linear_value_head_dim=8, num_hidden_layers=2)
    assistant = LlamaForCausalLM(LlamaConfig(**tiny, num_hidden_layers=1))
    return tiny, Qwen3NextForCausalLM(config).to(torch.float64), assistant.to(torch.float64)


@require_torch
class AssistedDecodingStatesTest(unittest.TestCase):
    def setUp(self):
        self.common, self.model, self.assistant = _qwen3_next_and_llama_assistant()

    @parameterized.expand([("constant",), ("heuristic",), ("prompt_lookup",), ("hybrid_assistant",)])
    def test_hybrid_cache_holds_the_states_of_the_kept_tokens(self, drafter):
        """An assistant with either schedule, or prompt lookup (a repeated prompt, so that it drafts), drafts 3 tokens
        for the hybrid main model; or the hybrid model drafts them as the assistant of an attention-only one."""
        model, drafter_model = self.model, self.assistant
        if drafter == "hybrid_assistant":
            model, drafter_model, drafter = self.assistant, self.model, "constant"
            model.generation_config.num_assistant_tokens = 1  # the assistant drafts (and records) its own count
        if drafter == "prompt_lookup":
            input_ids, drafting = torch.tensor([[5, 9, 2, 7, 1, 5, 9, 2, 7, 1]]), {"prompt_lookup_num_tokens": 3}
        else:
            drafter_model.generation_config.num_assistant_tokens_schedule = drafter
            drafter_model.generation_config.num_assistant_tokens = 3
            drafter_model.generation_config.assistant_confidence_threshold = 0.0  # draft every token
            input_ids, drafting = torch.tensor([[5, 9, 2, 7, 1]]), {"assistant_model": drafter_model}
        kwargs = {"max_new_tokens": 12, "do_sample": False}
        greedy = model.generate(input_ids, **kwargs)

        rollbacks = []

        def crop(cache, tokens_to_remove):
            original_crop(cache, tokens_to_remove)
            # The hybrid model's cache (the attention-only model has no linear attention layer)
            layer = cache.layers[0]
            if isinstance(layer, LinearAttentionLayer):
                rollbacks.append(
                    (int(cache.get_seq_length()), layer.recurrent_states[0].clone(), layer.conv_states[0])
                )

        original_crop = Cache.crop
        with mock.patch.object(Cache, "crop", autospec=True, side_effect=crop):
            assisted = model.generate(input_ids, **drafting, **kwargs)
        self.assertEqual(assisted.tolist(), greedy.tolist())
        self.assertGreater(len(rollbacks), 2)
        for length, recurrent_states, conv_states in rollbacks:
            fresh = self.model(greedy[:, :length], use_cache=True).cache.layers[0]
            torch.testing.assert_close(recurrent_states, fresh.recurrent_states[0])
            torch.testing.assert_close(conv_states[..., -fresh.conv_states[0].shape[-1] :], fresh.conv_states[0])


@require_torch
class GrowingScheduleAssistedDecodingTest(unittest.TestCase):
    def test_main_cache_rolls_back_the_drafts_of_a_schedule_that_grew(self):
        """A noisy copy of the model drafts 1 token, then 3 (the heuristic schedule grew), which are all rejected: each
        round records the states of its own drafts, and both caches hold the states of the kept tokens."""
        _, model, _ = _qwen3_next_and_llama_assistant()
        assistant = copy.deepcopy(model)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for parameter in assistant.parameters():
                noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
                parameter.add_(noise * 0.1 * parameter.std() if parameter.numel() > 1 else 0)
        assistant.generation_config.num_assistant_tokens_schedule = "heuristic"
        assistant.generation_config.num_assistant_tokens = 1
        assistant.generation_config.assistant_confidence_threshold = 0.0
        rounds, rollbacks = [], []
        original_update, original_crop = AssistedCandidateGenerator.update_candidate_strategy, Cache.crop

        def update_candidate_strategy(generator, input_ids, scores, num_matches):
            rounds.append((scores.shape[1] - 1, num_matches))
            return original_update(generator, input_ids, scores, num_matches)

        def crop(cache, tokens_to_remove):
            original_crop(cache, tokens_to_remove)
            rollbacks.append((cache, int(cache.get_seq_length()), cache.layers[0].recurrent_states[0].clone()))

        input_ids = torch.tensor([[5, 9, 2, 7, 1]])
        greedy = model.generate(input_ids, max_new_tokens=12, do_sample=False)
        with (
            mock.patch.object(AssistedCandidateGenerator, "update_candidate_strategy", update_candidate_strategy),
            mock.patch.object(Cache, "crop", autospec=True, side_effect=crop),
        ):
            output = model.generate(
                input_ids, assistant_model=assistant, max_new_tokens=12, do_sample=False, return_dict_in_generate=True
            )
        self.assertEqual(output.sequences.tolist(), greedy.tolist())
        self.assertIn((3, 0), rounds)  # three drafts, all rejected (a set-up check: pick another seed if it fails)
        for cache, length, recurrent_states in rollbacks:
            owner = model if cache is output.past_key_values else assistant
            fresh = owner(greedy[:, :length], use_cache=True).cache.layers[0]
            torch.testing.assert_close(recurrent_states, fresh.recurrent_states[0])


@require_torch
class SlidingWindowAssistantTest(unittest.TestCase):
    def setUp(self):
        self.common, self.model, _ = _qwen3_next_and_llama_assistant()

    def test_sliding_window_assistant_cache_holds_the_kept_tokens(self):
        # The assistant's sliding window (4) is full from the prompt on: each round removes its rejected drafts
        config = MistralConfig(**self.common, num_hidden_layers=1, num_key_value_heads=1, sliding_window=4)
        assistant = MistralForCausalLM(config).to(torch.float64)
        assistant.generation_config.num_assistant_tokens = 3
        assistant.generation_config.assistant_confidence_threshold = 0.0
        input_ids = torch.tensor([[5, 9, 2, 7, 1]])
        kwargs = {"max_new_tokens": 12, "do_sample": False}
        greedy = self.model.generate(input_ids, **kwargs)

        rounds = []

        def update_past_and_masks(generator, input_ids, *args, **kwargs):
            has_cache = original_update(generator, input_ids, *args, **kwargs)
            if has_cache:
                layer = generator.assistant_kwargs["cache"].layers[0]
                rounds.append((input_ids.clone(), layer.get_seq_length(), layer.keys.clone(), layer.values.clone()))
            return has_cache

        original_update = AssistedCandidateGenerator._update_past_and_masks
        with mock.patch.object(
            AssistedCandidateGenerator, "_update_past_and_masks", autospec=True, side_effect=update_past_and_masks
        ):
            assisted = self.model.generate(input_ids, assistant_model=assistant, **kwargs)
        self.assertEqual(assisted.tolist(), greedy.tolist())
        self.assertGreater(len(rounds), 2)
        for input_ids, length, keys, values in rounds:
            # The assistant's cache holds every token but the last one (its next input)
            self.assertEqual(length, input_ids.shape[-1] - 1)
            fresh = assistant(input_ids[:, :-1], use_cache=True).past_key_values.layers[0]
            self.assertEqual(keys.shape, fresh.keys.shape)
            torch.testing.assert_close(keys, fresh.keys)
            torch.testing.assert_close(values, fresh.values)
