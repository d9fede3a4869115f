# Copyright 2026 The HuggingFace Team. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

import unittest
from unittest import mock

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch

    from transformers import (
        DeepseekV4Config,
        DeepseekV4ForCausalLM,
        GenerationConfig,
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
    )
    from transformers.generation.candidate_generator import AssistedCandidateGenerator


VOCAB_SIZE = 64
NUM_ASSISTANT_TOKENS = 5
MAX_NEW_TOKENS = 12


def _tiny_model(model_name, seed):
    """A tiny randomly initialised model that never stops early and, as an assistant, always drafts 5 tokens."""
    torch.manual_seed(seed)
    no_special_tokens = {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}
    if model_name == "llama":
        config = LlamaConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            **no_special_tokens,
        )
        model = LlamaForCausalLM(config)
    else:
        config = GPT2Config(vocab_size=VOCAB_SIZE, n_embd=32, n_layer=2, n_head=4, n_positions=64, **no_special_tokens)
        model = GPT2LMHeadModel(config)
    model = model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    model.generation_config.num_assistant_tokens = NUM_ASSISTANT_TOKENS
    model.generation_config.num_assistant_tokens_schedule = "constant"
    model.generation_config.assistant_confidence_threshold = 0.0
    return model


class _RollbackRecorder:
    """Records the assistant cache length after each rollback of `AssistedCandidateGenerator` (behaviour unchanged)."""

    def __init__(self):
        self.rounds = []

    def __enter__(self):
        self._original = AssistedCandidateGenerator._update_past_and_masks
        recorder, original = self, self._original

        def recording(generator, input_ids, *args, **kwargs):
            # Passed through as called: `get_candidates` relies on the defaults (nothing extra removed, 1 token added)
            has_past = original(generator, input_ids, *args, **kwargs)
            if has_past:
                passed = dict(zip(("remove_from_pkv", "num_added_tokens"), args), **kwargs)
                removed = passed.get("remove_from_pkv", 0) + passed.get("num_added_tokens", 1)
                # Every token but the newest, minus those the assistant processes again in the next round
                intended = max(input_ids.shape[-1] - 1 - removed, 0)
                recorder.rounds.append((intended, generator.assistant_kwargs["past_key_values"].get_seq_length()))
            return has_past

        AssistedCandidateGenerator._update_past_and_masks = recording
        return self

    def __exit__(self, *exc_info):
        AssistedCandidateGenerator._update_past_and_masks = self._original
        return False


@require_torch
class AssistedCandidateGeneratorRollbackTest(unittest.TestCase):
    """The assistant cache is rolled back to the tokens the assistant has processed after each round of drafts."""

    @parameterized.expand([(1,), (2,), (6,)])
    def test_rejected_drafts_roll_the_assistant_cache_back(self, prompt_length):
        # Different weights: the main model rejects drafts. With a 1-token prompt, the first rollback must keep no
        # token at all (stock 5.14 computed `crop(0)`, a no-op, or a negative crop of the wrong size)
        main_model, assistant_model = _tiny_model("llama", seed=0), _tiny_model("llama", seed=1)
        input_ids = torch.randint(3, VOCAB_SIZE, (1, prompt_length), generator=torch.Generator().manual_seed(0))
        expected = main_model.generate(input_ids, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)

        with _RollbackRecorder() as recorder:
            sequences = main_model.generate(
                input_ids, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, assistant_model=assistant_model
            )

        self.assertEqual(sequences.tolist(), expected.tolist())
        self.assertGreaterEqual(len(recorder.rounds), 2)
        for round_idx, (intended, length) in enumerate(recorder.rounds, start=1):
            self.assertEqual(length, intended, f"round {round_idx}")

    def test_masks_and_positions_follow_the_rollback(self):
        # A left-padded prompt: after a round, the assistant's attention mask and position ids cover the new sequence
        _, assistant_model = _tiny_model("llama", seed=0), _tiny_model("llama", seed=1)
        generation_config = GenerationConfig(max_length=32, min_length=0, do_sample=False)
        input_ids = torch.tensor([[5, 6, 7, 8]])
        model_kwargs = {"attention_mask": torch.tensor([[0, 1, 1, 1]])}
        generator = AssistedCandidateGenerator(input_ids, assistant_model, generation_config, model_kwargs)
        candidates, _ = generator.get_candidates(input_ids)
        length = generator.assistant_kwargs["attention_mask"].shape[-1]
        generator.assistant_kwargs["position_ids"] = torch.arange(length).unsqueeze(0)
        accepted = torch.cat([candidates[:, :5], torch.tensor([[3]])], dim=-1)
        generator._update_past_and_masks(accepted)
        self.assertEqual(generator.assistant_kwargs["attention_mask"].tolist(), [[0, 1, 1, 1, 1, 1]])
        self.assertEqual(generator.assistant_kwargs["position_ids"].tolist(), [[0, 1, 2, 3, 4, 5]])
        self.assertEqual(generator.assistant_kwargs["past_key_values"].get_seq_length(), 4)

    def test_assistant_cache_removes_the_tokens_to_re_encode(self):
        # `remove_from_pkv`: tokens whose cached states the assistant must compute again (e.g. retokenized ones)
        assistant_model = _tiny_model("llama", seed=1)
        generation_config = GenerationConfig(max_length=32, min_length=0, do_sample=False)
        input_ids = torch.tensor([[5, 6, 7, 8]])
        generator = AssistedCandidateGenerator(input_ids, assistant_model, generation_config, {})
        candidates, _ = generator.get_candidates(input_ids)
        accepted = torch.cat([candidates[:, :5], torch.tensor([[3]])], dim=-1)
        generator._update_past_and_masks(accepted, remove_from_pkv=2)
        self.assertEqual(generator.assistant_kwargs["past_key_values"].get_seq_length(), accepted.shape[-1] - 4)

    def test_token_type_ids_follow_the_rollback(self):
        # The assistant's `token_type_ids` are cut to the new sequence length with the cache
        main_model, assistant_model = _tiny_model("gpt2", seed=0), _tiny_model("gpt2", seed=1)
        input_ids = torch.randint(3, VOCAB_SIZE, (1, 4), generator=torch.Generator().manual_seed(0))
        token_type_ids = torch.zeros_like(input_ids)
        expected = main_model.generate(
            input_ids, token_type_ids=token_type_ids, do_sample=False, max_new_tokens=MAX_NEW_TOKENS
        )
        sequences = main_model.generate(
            input_ids,
            token_type_ids=token_type_ids,
            do_sample=False,
            max_new_tokens=MAX_NEW_TOKENS,
            assistant_model=assistant_model,
        )
        self.assertEqual(sequences.tolist(), expected.tolist())


def _deepseek_layer_state(layer):
    """The length, window length, compressed entries and whether every compressor state is empty, of a layer."""
    states = [*layer.buffer_kv.values(), *layer.compressed_kv.values(), *getattr(layer, "overlap_kv", {}).values()]
    return (
        type(layer).__name__,
        layer.get_seq_length(),
        layer.keys.shape[-2],
        sum(layer.entry_count.values()),
        all(state is None for state in states),
    )


@require_torch
class AssistedCandidateGeneratorSlidingWindowTest(unittest.TestCase):
    """An assistant whose sliding-window layers stay sliding with `dynamic_full` is rolled back fully every round."""

    def test_deepseek_v4_assistant_cache_is_emptied_after_each_round(self):
        # DeepSeek-V4's compressed-attention layers keep a sliding window of 4 (a prompt of 6 tokens overflows it), which
        # cannot bring back the states of rejected drafts: stock 5.14 raised a `ValueError` in the first rollback
        main_model = _tiny_model("llama", seed=0).to(torch.float64)
        config = DeepseekV4Config(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            intermediate_size=32,
            moe_intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            q_lora_rank=16,
            o_lora_rank=16,
            index_n_heads=2,
            index_head_dim=8,
            index_topk=4,
            n_routed_experts=2,
            num_experts_per_tok=1,
            layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
            compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
            sliding_window=4,
            experts_implementation="eager",  # float64
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
        torch.manual_seed(1)
        assistant_model = DeepseekV4ForCausalLM(config).to(torch.float64).eval()
        for name, value in _tiny_model("llama", seed=1).generation_config.to_diff_dict().items():
            setattr(assistant_model.generation_config, name, value)
        input_ids = torch.randint(3, VOCAB_SIZE, (1, 6), generator=torch.Generator().manual_seed(0))
        expected = main_model.generate(input_ids, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)

        rounds = []
        original = AssistedCandidateGenerator._update_past_and_masks

        def update_past_and_masks(generator, input_ids, *args, **kwargs):
            has_past = original(generator, input_ids, *args, **kwargs)
            if has_past:
                rounds.append(
                    [_deepseek_layer_state(layer) for layer in generator.assistant_kwargs["past_key_values"].layers]
                )
            return has_past

        with mock.patch.object(AssistedCandidateGenerator, "_update_past_and_masks", update_past_and_masks):
            sequences = main_model.generate(
                input_ids, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, assistant_model=assistant_model
            )

        self.assertEqual(sequences.tolist(), expected.tolist())
        self.assertGreaterEqual(len(rounds), 2)
        for layers in rounds:
            # Its layers stay sliding (`DeepseekV4HCACache`, `DeepseekV4CSACache`), and each round empties them: the
            # window and every compressor state (buffered tokens, compressed entries, overlap)
            self.assertEqual(layers, [("DeepseekV4HCACache", 0, 0, 0, True), ("DeepseekV4CSACache", 0, 0, 0, True)])
