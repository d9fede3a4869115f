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
import os
import tempfile
import unittest
from unittest import mock

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch, torch_device


if is_torch_available():
    import torch
    from safetensors.torch import save_file

    from transformers import (
        BailingHybridConfig,
        BailingHybridForCausalLM,
        InklingForCausalLM,
        InklingTextConfig,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        MuseGlimmerAssistantConfig,
        MuseGlimmerAssistantModel,
        Qwen3NextConfig,
        Qwen3NextForCausalLM,
    )
    from transformers.cache_utils import Cache, LinearAttentionLayer, MtpCache
    from transformers.generation.candidate_generator import (
        AssistedCandidateGenerator,
        DFlashTokenCandidateGenerator,
        MTPCandidateGenerator,
        PromptLookupCandidateGenerator,
    )
    from transformers.modeling_layers import MtpModel


@require_torch
class PromptLookupCandidateGeneratorTest(unittest.TestCase):
    def test_candidates_leave_room_for_the_main_model_token(self):
        """Near `max_length`, prompt lookup proposes no more candidates than fit before the main model's token."""
        generator = PromptLookupCandidateGenerator(num_output_tokens=4, max_matching_ngram_size=2, max_length=10)
        # The last 2-gram, (1, 2), is found at the start, followed by 3, 4, 5, 6: room for 1 of them before `max_length`
        candidate_ids, _ = generator.get_candidates(torch.tensor([[1, 2, 3, 4, 5, 6, 1, 2]], device=torch_device))
        self.assertEqual(candidate_ids.tolist(), [[1, 2, 3, 4, 5, 6, 1, 2, 3]])

    def test_prompt_lookup_with_a_static_cache_matches_greedy(self):
        """The default static cache holds `max_length - 1` tokens: prompt lookup decodes up to `max_length` in it."""
        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=16, hidden_size=32, intermediate_size=37, num_attention_heads=2, num_hidden_layers=1
        )
        model = LlamaForCausalLM(config).to(torch_device, torch.float64).eval()
        # Every token is followed by others: prompt lookup always finds candidates
        input_ids = torch.arange(16, device=torch_device).repeat(1, 2)
        inputs = {"input_ids": input_ids, "max_new_tokens": 12, "do_sample": False, "cache_implementation": "static"}

        prompt_lookup = model.generate(**inputs, prompt_lookup_num_tokens=10)
        self.assertEqual(prompt_lookup.tolist(), model.generate(**inputs).tolist())


def _record_rounds(generator_cls, generate, record):
    """`record(generator, input_ids, candidate_ids, candidate_logits)` after each drafting round of `generate()`."""
    rounds = []
    get_candidates = generator_cls.get_candidates

    def recording_get_candidates(self, input_ids, **kwargs):
        candidate_ids, candidate_logits = get_candidates(self, input_ids, **kwargs)
        if not kwargs["is_first_iteration"]:  # the first call only lets the main model encode the prompt
            rounds.append(record(self, input_ids, candidate_ids, candidate_logits))
        return candidate_ids, candidate_logits

    with mock.patch.object(generator_cls, "get_candidates", recording_get_candidates):
        generate()
    return rounds


def _drafts_per_round(generator_cls, generate):
    """The (sequence length, drafts, draft logits) of each drafting round of `generate()` with `generator_cls`."""

    def record(generator, input_ids, candidate_ids, candidate_logits):
        num_logits = 0 if candidate_logits is None else candidate_logits.shape[1]
        return input_ids.shape[1], candidate_ids.shape[1] - input_ids.shape[1], num_logits

    return _record_rounds(generator_cls, generate, record)


def _qwen3_next_and_dflash_drafter(block_size=4):
    """A tiny hybrid main model and a DFlash drafter of `block_size` (it drafts `block_size - 1` tokens a round)."""
    torch.manual_seed(0)
    common = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4}
    linear = {"linear_num_value_heads": 2, "linear_num_key_heads": 2, "linear_key_head_dim": 8}
    config = Qwen3NextConfig(
        **common, **linear, linear_value_head_dim=8, num_hidden_layers=2, num_key_value_heads=2, head_dim=8,
        num_experts=0, layer_types=["linear_attention", "full_attention"],
    )  # fmt: skip
    model = Qwen3NextForCausalLM(config).to(torch_device, torch.float64).eval()
    drafter_config = MuseGlimmerAssistantConfig(
        **common, num_hidden_layers=1, num_key_value_heads=2, head_dim=8, block_size=block_size, mask_token_id=63,
        target_layer_ids=[0, 1],
    )  # fmt: skip
    return model, MuseGlimmerAssistantModel(drafter_config).to(torch_device, torch.float64).eval()


@require_torch
class DFlashStaticCacheTest(unittest.TestCase):
    def test_dflash_with_a_static_cache_matches_greedy(self):
        """The default static cache holds `max_length - 1` tokens: DFlash drafts no more than fit before its end."""
        model, drafter = _qwen3_next_and_dflash_drafter()
        input_ids = torch.arange(1, 8, device=torch_device)[None]
        inputs = {"input_ids": input_ids, "max_new_tokens": 14, "do_sample": False, "cache_implementation": "static"}

        greedy = model.generate(**inputs)
        dflash = model.generate(**inputs, assistant_model=drafter, speculation_type="dflash")

        self.assertEqual(dflash.tolist(), greedy.tolist())


def _inkling_with_mtp_layers(checkpoint, num_mtp_layers=1):
    """A tiny Inkling loaded from a checkpoint, saved in `checkpoint`, that has the weights of its MTP layers."""
    torch.manual_seed(0)
    config = InklingTextConfig(
        vocab_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=16,
        d_rel=4, rel_extent=32, intermediate_size=64, moe_intermediate_size=16, n_routed_experts=4,
        num_experts_per_tok=2, num_mtp_layers=num_mtp_layers, bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )  # fmt: skip
    model = InklingForCausalLM(config).to(torch.float64)
    weights = {
        **model.state_dict(),
        **MtpModel(model, num_mtp_layers).to(torch.float64).layers.state_dict(prefix="model.mtp.layers."),
    }
    model.save_pretrained(checkpoint)
    save_file(
        {name: tensor.contiguous() for name, tensor in weights.items()}, os.path.join(checkpoint, "model.safetensors")
    )
    return InklingForCausalLM.from_pretrained(
        checkpoint, dtype=torch.float64, use_kernels=False, experts_implementation="eager"
    ).eval()


def _bailing_hybrid_config(layer_types, mtp_layer_types, **kwargs):
    """A tiny Bailing-hybrid config with MTP layers of `mtp_layer_types` (routed experts)."""
    return BailingHybridConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
        layer_types=layer_types, num_attention_heads=4, num_key_value_heads=4, head_dim=8, kv_lora_rank=16,
        q_lora_rank=None, qk_rope_head_dim=8, v_head_dim=8, qk_nope_head_dim=8, n_group=1, topk_group=1,
        num_experts_per_tok=2, num_local_experts=4, first_k_dense_replace=1, num_mtp_layers=len(mtp_layer_types),
        mtp_layer_types=mtp_layer_types, mtp_mlp_layer_types=["sparse"] * len(mtp_layer_types), bos_token_id=None,
        eos_token_id=None, pad_token_id=None, **kwargs,
    )  # fmt: skip


def _bailing_hybrid_with_mtp_layers(checkpoint, layer_types, mtp_layer_types):
    """A tiny Bailing-hybrid loaded from a checkpoint, saved in `checkpoint`, that has the weights of its MTP layers
    (after the decoder layers, their decoder blocks' weights unnested, as in Bailing-hybrid's checkpoints)."""
    torch.manual_seed(0)
    num_mtp_layers = len(mtp_layer_types)
    config = _bailing_hybrid_config(layer_types, mtp_layer_types)
    model = BailingHybridForCausalLM(config).to(torch.float64)
    mtp_model = MtpModel(model, num_mtp_layers).to(torch.float64)
    for module in mtp_model.modules():
        model._init_weights(module)
    weights = dict(model.state_dict())
    for name, tensor in mtp_model.layers.state_dict().items():
        layer_idx, name = name.split(".", 1)
        weights[f"model.layers.{2 + int(layer_idx)}." + name.removeprefix("mtp_block.")] = tensor
    model.save_pretrained(checkpoint)
    save_file({k: v.contiguous() for k, v in weights.items()}, os.path.join(checkpoint, "model.safetensors"))
    return BailingHybridForCausalLM.from_pretrained(
        checkpoint, dtype=torch.float64, use_kernels=False, experts_implementation="eager"
    ).eval()


@require_torch
class MTPCandidateGeneratorStaticCacheTest(unittest.TestCase):
    def test_mtp_drafts_fit_in_the_static_cache(self):
        """MTP drafts no more than `max_length - 1` tokens in all, the size of the default static cache."""
        input_ids, kwargs = torch.tensor([[1, 5, 2, 3, 7]]), {"do_sample": False, "max_new_tokens": 12}
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _bailing_hybrid_with_mtp_layers(
                checkpoint, ["linear_attention", "full_attention"], ["full_attention"]
            )
            mtp = model.generate(input_ids, use_mtp=True, cache_implementation="static", **kwargs)
        self.assertEqual(mtp.tolist(), model.generate(input_ids, **kwargs).tolist())


@require_torch
class MTPCandidateGeneratorShortPromptTest(unittest.TestCase):
    def test_mtp_layers_after_a_prompt_shorter_than_them(self):
        """With two MTP layers and a one-token prompt, a round re-feeds only the token the MTP layers have seen."""
        input_ids = torch.tensor([[5]])
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _inkling_with_mtp_layers(checkpoint, num_mtp_layers=2)
            mtp = model.generate(input_ids, use_mtp=True, do_sample=False, max_new_tokens=10)
        self.assertEqual(mtp.tolist(), model.generate(input_ids, do_sample=False, max_new_tokens=10).tolist())

    def test_conv_states_after_a_prompt_shorter_than_the_kernel(self):
        """After a one-token prompt, the linear layer's conv states keep the left context a fresh forward has."""
        input_ids = torch.tensor([[5]])
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _bailing_hybrid_with_mtp_layers(
                checkpoint, ["linear_attention", "full_attention"], ["full_attention"] * 2
            )
            out = model.generate(
                input_ids, use_mtp=True, do_sample=False, max_new_tokens=4, return_dict_in_generate=True
            )
        conv_states, length = out.cache.layers[0].conv_states[0], out.cache.get_seq_length()
        fresh = model(out.sequences[:, :length]).cache.layers[0].conv_states[0]
        torch.testing.assert_close(conv_states[..., -fresh.shape[-1] :], fresh, rtol=0, atol=1e-12)


@require_torch
class MTPCandidateGeneratorCacheSizeTest(unittest.TestCase):
    def test_mtp_cache_conv_states_keep_their_working_size(self):
        """The conv states of the MTP cache keep their working size instead of growing by a column per token."""
        input_ids = torch.tensor([[1, 5, 2, 3, 7]])
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _inkling_with_mtp_layers(checkpoint)
            init = MTPCandidateGenerator.__init__
            with mock.patch.object(MTPCandidateGenerator, "__init__", autospec=True, side_effect=init) as recorded:
                mtp = model.generate(input_ids, use_mtp=True, do_sample=False, max_new_tokens=20)
        self.assertEqual(mtp.tolist(), model.generate(input_ids, do_sample=False, max_new_tokens=20).tolist())

        # At most the tokens of the last MTP forward (`num_mtp_layers + 1`) past the `conv_kernel_size` columns
        generator = recorded.call_args.args[0]
        for layer in generator.mtp_cache.layers:
            for state_idx in range(layer.number_of_states):
                max_size = layer.conv_kernel_size[state_idx] + model.config.num_mtp_layers + 1
                self.assertLessEqual(layer.conv_states[state_idx].shape[-1], max_size)


@require_torch
class MTPLinearAttentionLayersTest(unittest.TestCase):
    def test_mtp_layers_of_linear_attention_match_greedy(self):
        """Two MTP layers of linear attention after a linear attention layer build, decode and roll back exactly."""
        input_ids = torch.tensor([[1, 5, 2, 3, 7]])
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _bailing_hybrid_with_mtp_layers(
                checkpoint, ["full_attention", "linear_attention"], ["linear_attention"] * 2
            )
            mtp = model.generate(input_ids, use_mtp=True, do_sample=False, max_new_tokens=16)
        self.assertEqual(mtp.tolist(), model.generate(input_ids, do_sample=False, max_new_tokens=16).tolist())

    def test_mtp_layer_of_attention_keeps_its_causal_mask(self):
        """The masks of an MTP layer of attention keep its causal mask (only linear attention ones have none)."""
        config = _bailing_hybrid_config(
            ["linear_attention", "full_attention"], ["full_attention"], attn_implementation="eager"
        )
        mtp_model = MtpModel(BailingHybridForCausalLM(config), num_mtp_layers=1)
        inputs_embeds, position_ids = torch.zeros(1, 3, config.hidden_size), torch.arange(3)[None]

        masks = mtp_model.create_masks_for_mtp_layer(
            0, inputs_embeds, MtpCache(config=config.get_mtp_config()), position_ids
        )

        # Each of the 3 tokens sees itself and the ones before it
        causal = torch.ones(3, 3, dtype=torch.bool).tril()[None, None]
        self.assertIsNotNone(masks["attention_mask"])
        self.assertTrue(torch.equal(masks["attention_mask"] == 0, causal))


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


@require_torch
class MTPCacheRoundsTest(unittest.TestCase):
    def test_mtp_attention_layers_after_a_prompt_shorter_than_them(self):
        """Two MTP layers of MLA attention (rotary) after a one-token prompt re-feed the positions of the re-fed tokens."""
        input_ids = torch.tensor([[5]])
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _bailing_hybrid_with_mtp_layers(
                checkpoint, ["linear_attention", "full_attention"], ["full_attention"] * 2
            )
            mtp = model.generate(input_ids, use_mtp=True, do_sample=False, max_new_tokens=10)
        self.assertEqual(mtp.tolist(), model.generate(input_ids, do_sample=False, max_new_tokens=10).tolist())

    def test_mtp_cache_holds_the_tokens_its_layer_saw(self):
        """With one MTP layer, each round leaves the MTP cache with the tokens it saw, its conv states at working size."""

        def record(generator, input_ids, candidate_ids, candidate_logits):
            layer = generator.mtp_cache.layers[0]
            extra_columns = layer.conv_states[0].shape[-1] - layer.conv_kernel_size[0]
            return input_ids.shape[1], generator.mtp_cache.get_seq_length(), extra_columns

        input_ids = torch.tensor([[1, 5, 2, 3, 7]])
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _inkling_with_mtp_layers(checkpoint)
            kwargs = {"use_mtp": True, "do_sample": False, "max_new_tokens": 10}
            rounds = _record_rounds(MTPCandidateGenerator, lambda: model.generate(input_ids, **kwargs), record)

        # The MTP layer saw every token but the first; its conv states keep the columns of the last round's token only
        # (this tiny model's drafts are all rejected)
        self.assertEqual(rounds, [(length, length - 1, 1) for length, _, _ in rounds])


@require_torch
class DraftsPerRoundTest(unittest.TestCase):
    def test_dflash_drafts_what_fits_before_max_length(self):
        """DFlash drafts `block_size - 1` tokens a round, and near `max_length` only those that fit before it."""
        model, drafter = _qwen3_next_and_dflash_drafter(block_size=4)
        input_ids = torch.arange(1, 8, device=torch_device)[None]
        kwargs = {"assistant_model": drafter, "speculation_type": "dflash", "do_sample": False, "max_length": 21}

        rounds = _drafts_per_round(DFlashTokenCandidateGenerator, lambda: model.generate(input_ids, **kwargs))

        # Each round: as many drafts as draft logits, `block_size - 1` or `max_length - length - 1`, whichever is less
        self.assertEqual(rounds, [(length, min(3, 20 - length), min(3, 20 - length)) for length, _, _ in rounds])
        self.assertIn(2, [drafts for _, drafts, _ in rounds])  # a round cut by `max_length`

    def test_mtp_drafts_what_fits_before_max_length(self):
        """MTP drafts one token per MTP layer a round, and near `max_length` only those that fit before it."""
        input_ids = torch.tensor([[1, 5, 2, 3, 7]])
        with tempfile.TemporaryDirectory() as checkpoint:  # the MTP layers are loaded from the checkpoint
            model = _inkling_with_mtp_layers(checkpoint, num_mtp_layers=2)
            kwargs = {"use_mtp": True, "do_sample": False, "max_length": 16}
            rounds = _drafts_per_round(MTPCandidateGenerator, lambda: model.generate(input_ids, **kwargs))

        # Each round: as many drafts as draft logits, `num_mtp_layers` or `max_length - length - 1`, whichever is less
        self.assertEqual(rounds, [(length, min(2, 15 - length), min(2, 15 - length)) for length, _, _ in rounds])
        self.assertIn(1, [drafts for _, drafts, _ in rounds])  # a round cut by `max_length`


@require_torch
class StaticSlidingWindowAssistedDecodingTest(unittest.TestCase):
    def test_static_cache_with_a_shorter_window_matches_greedy_and_rolls_back_exactly(self):
        """A static cache whose window (4) is shorter than it makes room for the drafts: assisted decoding matches greedy
        (5.25.0 refused it up front), and the returned cache continues as a fresh forward over the tokens does."""
        torch.manual_seed(0)
        config = MistralConfig(
            vocab_size=32,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=2,
            num_key_value_heads=1,
            num_hidden_layers=2,
            sliding_window=4,
        )
        model = MistralForCausalLM(config).to(torch_device, torch.float64).eval()
        torch.manual_seed(1)
        assistant_config = LlamaConfig(
            vocab_size=32, hidden_size=32, intermediate_size=37, num_attention_heads=2, num_hidden_layers=1
        )
        assistant = LlamaForCausalLM(assistant_config).to(torch_device, torch.float64).eval()
        (
            assistant.generation_config.num_assistant_tokens,
            assistant.generation_config.assistant_confidence_threshold,
        ) = 3, 0
        input_ids = torch.tensor([[5, 9, 2, 7, 1]], device=torch_device)
        kwargs = {"max_new_tokens": 12, "do_sample": False, "cache_implementation": "static"}
        greedy = model.generate(input_ids, **kwargs)

        assisted = model.generate(input_ids, assistant_model=assistant, return_dict_in_generate=True, **kwargs)

        self.assertEqual(assisted.sequences.tolist(), greedy.tolist())
        sequences = assisted.sequences
        logits = model(sequences[:, -1:], cache=assisted.cache).logits[:, -1]
        torch.testing.assert_close(logits, model(sequences).logits[:, -1])
