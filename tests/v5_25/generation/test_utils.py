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


import unittest

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
    )


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
