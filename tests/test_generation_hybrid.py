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
"""End-to-end assisted decoding and prompt lookup with hybrid (linear attention) models.

Tiny randomly initialised models built from configs, all sharing one vocabulary, and runnable on CPU without kernels:

- Inkling: hybrid layers (attention + short convolutions; conv states only, no recurrent state). Not stateful for
  `generate`, so it can also be the main model.
- Qwen3-Next: gated delta net layers (conv and recurrent states) next to full-attention layers.
- Lfm2: short-convolution layers (conv states) next to full-attention layers.
- Llama: the main model of the assisted runs.

As an *assistant*, a hybrid model's cache must be rolled back after every round of rejected drafts. The output is
compared with greedy decoding, and since assisted decoding corrects wrong drafts, a spy also checks what the assistant
cache holds after each rollback (the intended length, or nothing: a full rollback after which the assistant encodes
the sequence again) and that every draft equals what a fresh assistant would have proposed.

As the *main* model, a conv-only hybrid (Inkling) is rolled back exactly. A model with recurrent states cannot be:
`generate` refuses stateful models up front, and one that does not declare itself stateful gets a clear error at its
first partial rollback rather than silently continuing from states that saw the rejected tokens.

The models run in float64, and every greedy reference (plain decoding, and each fresh assistant draft) is checked to
have no near-tie, so that another computation path (assisted decoding) must give the same tokens on every CPU kernel
set and thread count (`tests/numerics.py`).
"""

import contextlib
import inspect
import unittest
from functools import cache

from parameterized import parameterized

from transformers import is_torch_available
from transformers.testing_utils import require_torch

from .compat import CACHE_KWARG, HAS_STATE_HISTORY, TARGET
from .numerics import MODEL_DTYPE, TinyModelTestCase, assert_no_near_tie
from .tiny_models import QWEN3_NEXT


if is_torch_available():
    import torch

    from transformers import (
        InklingForCausalLM,
        InklingTextConfig,
        Lfm2Config,
        Lfm2ForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3NextConfig,
        Qwen3NextForCausalLM,
    )
    from transformers.cache_utils import Cache, CacheLayerMixin, LinearAttentionCacheLayerMixin
    from transformers.generation.candidate_generator import AssistedCandidateGenerator

    class UnguardedQwen3NextForCausalLM(Qwen3NextForCausalLM):
        """A model with recurrent states that does not declare itself stateful (as custom code may not), so that
        `generate` lets it run assisted decoding and its cache is asked for partial rollbacks."""

        _is_stateful = False


VOCAB_SIZE = 64
NUM_ASSISTANT_TOKENS = 5
MAX_NEW_TOKENS = 16
# Inkling's short convolutions need a prompt at least as long as their kernel (4) in 5.14.1, whatever `crop` does
PROMPT_LENGTHS = [5, 9]
HYBRID_ASSISTANTS = ["inkling", "qwen3_next", "lfm2"]
NO_SPECIAL_TOKENS = {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def _config(model_name):
    if model_name == "llama":
        return LlamaConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            **NO_SPECIAL_TOKENS,
        )
    if model_name == "inkling":
        return InklingTextConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            swa_num_attention_heads=4,
            swa_num_key_value_heads=2,
            swa_head_dim=8,
            sliding_window_size=4,
            d_rel=4,
            rel_extent=16,
            local_layer_ids=[0],  # a `hybrid_sliding` layer, then a `hybrid` one
            intermediate_size=64,
            moe_intermediate_size=16,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            mlp_layer_types=["dense", "dense"],
            max_position_embeddings=128,
            logits_mup_width_multiplier=1.0,
            **NO_SPECIAL_TOKENS,
        )
    if model_name in ("qwen3_next", "unguarded_qwen3_next"):
        return Qwen3NextConfig(
            vocab_size=VOCAB_SIZE,
            **QWEN3_NEXT,
            # The default grouped-matmul experts have no float64 kernel
            experts_implementation="eager",
            **NO_SPECIAL_TOKENS,
        )
    if model_name == "lfm2":
        return Lfm2Config(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            layer_types=["conv", "full_attention"],
            conv_L_cache=3,
            **NO_SPECIAL_TOKENS,
        )
    raise ValueError(model_name)


@cache
def _model(model_name, seed):
    """A tiny randomly initialised model (in eval mode) that never stops early, drafting exactly 5 tokens when it is
    an assistant (no schedule, no early stop on confidence)."""
    model_classes = {
        "llama": LlamaForCausalLM,
        "inkling": InklingForCausalLM,
        "qwen3_next": Qwen3NextForCausalLM,
        "unguarded_qwen3_next": UnguardedQwen3NextForCausalLM,
        "lfm2": Lfm2ForCausalLM,
    }
    torch.manual_seed(seed)
    # Initialised in float32 (the same weights as before, rounded), computed in float64: see `tests/numerics.py`
    model = model_classes[model_name](_config(model_name)).eval().to(MODEL_DTYPE)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    model.generation_config.num_assistant_tokens = NUM_ASSISTANT_TOKENS
    model.generation_config.num_assistant_tokens_schedule = "constant"
    model.generation_config.assistant_confidence_threshold = 0.0
    return model


def _input_ids(prompt_length):
    generator = torch.Generator().manual_seed(prompt_length)
    return torch.randint(3, VOCAB_SIZE, (1, prompt_length), generator=generator)


@cache
def _greedy(model_name, prompt_length):
    """Plain greedy decoding: the tokens every assisted mode must reproduce; checked to have no near-tie, since the
    assisted modes compute the same logits along other paths."""
    model = _model(model_name, seed=0)
    output = model.generate(
        _input_ids(prompt_length),
        do_sample=False,
        max_new_tokens=MAX_NEW_TOKENS,
        return_dict_in_generate=True,
        output_logits=True,
    )
    assert_no_near_tie(output.logits, f"of {model_name} with a {prompt_length}-token prompt")
    return output.sequences


def _generate(model, prompt_length, **kwargs):
    return model.generate(_input_ids(prompt_length), do_sample=False, max_new_tokens=MAX_NEW_TOKENS, **kwargs)


class _AssistantSpy:
    """Records each round of `AssistedCandidateGenerator` without changing its behaviour: the assistant cache right
    after its rollback, and the drafts. It wraps the installed methods (fixed or stock) and restores them on exit."""

    def __init__(self):
        self.rollbacks = []
        self.drafts = []

    def __enter__(self):
        cls = AssistedCandidateGenerator
        self._originals = {name: cls.__dict__[name] for name in ("_update_past_and_masks", "get_candidates")}
        update_past_and_masks, get_candidates = self._originals.values()
        spy = self

        def spy_update_past_and_masks(generator, input_ids, *args, **kwargs):
            # 5.25 renamed `remove_from_pkv` to `num_extra_tokens_to_remove` and dropped `num_added_tokens`
            arguments = inspect.signature(update_past_and_masks).bind(generator, input_ids, *args, **kwargs)
            arguments.apply_defaults()
            arguments = arguments.arguments
            remove_from_pkv = arguments.get("remove_from_pkv", arguments.get("num_extra_tokens_to_remove", 0))
            cache = generator.assistant_kwargs.get(CACHE_KWARG)
            # (int: on 5.25 a linear attention layer's length is its live counter tensor, as a static layer's)
            length_before = int(cache.get_seq_length()) if cache is not None else 0
            has_past = update_past_and_masks(generator, input_ids, *args, **kwargs)
            if has_past:
                cache = generator.assistant_kwargs[CACHE_KWARG]
                # With a linear attention history (step 7 of 5.14, 5.25's own), the assistant keeps every token it has
                # processed
                history = TARGET.name == "v5_25" or getattr(generator, "_assistant_rollback", None) == "history"
                kept_extra = 0 if history else arguments.get("num_added_tokens", 1)
                spy.rollbacks.append(
                    {
                        # 5.25 removes only tokens beyond the accepted ones: when every draft was accepted, the
                        # assistant keeps what it holds (its last draft has no states yet)
                        "intended": max(input_ids.shape[-1] - 1 - remove_from_pkv - kept_extra, 0)
                        if TARGET.name != "v5_25"
                        else min(input_ids.shape[-1] - 1 - remove_from_pkv, length_before),
                        "length_before": length_before,
                        "length": int(cache.get_seq_length()),
                        "linear_has_previous_state": [
                            any(layer.has_previous_state.values())
                            for layer in cache.layers
                            if isinstance(layer, LinearAttentionCacheLayerMixin)
                        ],
                        "attention_lengths": [
                            int(layer.get_seq_length()) for layer in cache.layers if isinstance(layer, CacheLayerMixin)
                        ],
                    }
                )
            return has_past

        def spy_get_candidates(generator, input_ids, **kwargs):
            candidate_ids, candidate_logits = get_candidates(generator, input_ids, **kwargs)
            spy.drafts.append((generator.assistant_model, input_ids.clone(), candidate_ids[:, input_ids.shape[-1] :]))
            return candidate_ids, candidate_logits

        cls._update_past_and_masks = spy_update_past_and_masks
        cls.get_candidates = spy_get_candidates
        return self

    def __exit__(self, *exc_info):
        for name, original in self._originals.items():
            setattr(AssistedCandidateGenerator, name, original)
        return False


@contextlib.contextmanager
def _crop_spy(crops):
    """Records `(length before, length after)` of every `Cache.crop` call (behaviour unchanged)."""
    original = Cache.__dict__["crop"]

    def spy_crop(cache, *args, **kwargs):
        length = int(cache.get_seq_length())
        original(cache, *args, **kwargs)
        crops.append((length, int(cache.get_seq_length())))

    Cache.crop = spy_crop
    try:
        yield crops
    finally:
        Cache.crop = original


MAIN_HYBRID_ON_V5_25 = (
    "5.25 lets hybrid main models use assisted decoding and rolls them back exactly with the fix "
    "(tests/test_generation_main_hybrid.py)"
)


@require_torch
class HybridAssistedGenerationTest(TinyModelTestCase):
    def assertRollbacksRight(self, spy):
        """After each rollback the assistant cache holds the intended tokens, or none (a full rollback: every layer
        reset, and the assistant encodes the whole sequence again); at least one rollback removed tokens."""
        self.assertGreaterEqual(len(spy.rollbacks), 2, "expected several drafting rounds")
        for round_idx, rollback in enumerate(spy.rollbacks, start=1):
            self.assertIn(rollback["length"], (rollback["intended"], 0), f"round {round_idx}: {rollback}")
            if rollback["length"] == 0:
                self.assertEqual(set(rollback["attention_lengths"]), {0}, f"round {round_idx}")
                self.assertFalse(any(rollback["linear_has_previous_state"]), f"round {round_idx}: stale states")
        self.assertTrue(
            any(rollback["length_before"] > rollback["intended"] for rollback in spy.rollbacks),
            "no rollback removed tokens from the assistant cache",
        )

    def assertDraftsLikeFreshAssistant(self, spy):
        """Each draft is what the assistant proposes from scratch: its cache held no stale state."""
        self.assertTrue(any(draft.shape[-1] for _, _, draft in spy.drafts), "no draft")
        for round_idx, (assistant, input_ids, draft) in enumerate(spy.drafts, start=1):
            if draft.shape[-1] == 0:  # the length budget is used up
                continue
            fresh = assistant.generate(
                input_ids,
                do_sample=False,
                max_new_tokens=draft.shape[-1],
                return_dict_in_generate=True,
                output_logits=True,
            )
            # The draft was computed from the rolled-back cache, the fresh one from scratch: two paths
            assert_no_near_tie(fresh.logits, f"of the fresh assistant in round {round_idx}")
            fresh_draft = fresh.sequences[:, input_ids.shape[-1] :]
            self.assertEqual(draft.tolist(), fresh_draft.tolist(), f"draft of round {round_idx}")

    @parameterized.expand([(assistant, prompt_length) for assistant in HYBRID_ASSISTANTS for prompt_length in [5]])
    def test_hybrid_assistant_matches_greedy(self, assistant_name, prompt_length):
        main_model = _model("llama", seed=0)
        with _AssistantSpy() as spy:
            sequences = _generate(main_model, prompt_length, assistant_model=_model(assistant_name, seed=1))
        self.assertEqual(sequences.tolist(), _greedy("llama", prompt_length).tolist())
        self.assertRollbacksRight(spy)
        self.assertDraftsLikeFreshAssistant(spy)

    @parameterized.expand([(prompt_length,) for prompt_length in PROMPT_LENGTHS])
    def test_hybrid_main_and_assistant_match_greedy(self, prompt_length):
        # Inkling as both: the main cache (recording its past) is rolled back exactly, the assistant's fully
        main_model = _model("inkling", seed=0)
        with _AssistantSpy() as spy, _crop_spy([]) as crops:
            sequences = _generate(main_model, prompt_length, assistant_model=_model("inkling", seed=1))
        self.assertEqual(sequences.tolist(), _greedy("inkling", prompt_length).tolist())
        self.assertRollbacksRight(spy)
        self.assertDraftsLikeFreshAssistant(spy)
        self.assertTrue(any(0 < after < before for before, after in crops), f"no partial rollback: {crops}")

    @parameterized.expand([(prompt_length,) for prompt_length in PROMPT_LENGTHS])
    def test_prompt_lookup_with_hybrid_main_matches_greedy(self, prompt_length):
        with _crop_spy([]) as crops:
            sequences = _generate(
                _model("inkling", seed=0), prompt_length, prompt_lookup_num_tokens=NUM_ASSISTANT_TOKENS
            )
        self.assertEqual(sequences.tolist(), _greedy("inkling", prompt_length).tolist())
        # The main cache (conv states recorded since `activate_past_recording`) was rolled back partially
        self.assertTrue(any(0 < after < before for before, after in crops), f"no partial rollback: {crops}")

    # 5.24 no longer declares Lfm2 stateful: its conv states are rolled back through their recorded past
    @parameterized.expand([("qwen3_next",)] + ([("lfm2",)] if TARGET.name == "v5_14" else []))
    @unittest.skipIf(TARGET.name == "v5_25", MAIN_HYBRID_ON_V5_25)
    def test_stateful_main_model_is_refused_up_front(self, model_name):
        with self.assertRaisesRegex(ValueError, "stateful"):
            _generate(_model(model_name, seed=0), 5, prompt_lookup_num_tokens=NUM_ASSISTANT_TOKENS)

    @parameterized.expand([("prompt_lookup", prompt_length) for prompt_length in PROMPT_LENGTHS] + [("assistant", 5)])
    @unittest.skipIf(TARGET.name == "v5_25", MAIN_HYBRID_ON_V5_25)
    def test_recurrent_main_model_fails_clearly_at_first_partial_rollback(self, mode, prompt_length):
        model = _model("unguarded_qwen3_next", seed=0)
        kwargs = (
            {"prompt_lookup_num_tokens": NUM_ASSISTANT_TOKENS}
            if mode == "prompt_lookup"
            else {"assistant_model": _model("qwen3_next", seed=1)}
        )
        if TARGET.name == "v5_24":
            # 5.24's `generate` asks `is_croppable` after the prefill, which the fix keeps truthful: refused up front
            with self.assertRaisesRegex(ValueError, "requires a cache that can be cropped"):
                _generate(model, prompt_length, **kwargs)
            return
        with self.assertRaises(RuntimeError) as context:
            _generate(model, prompt_length, **kwargs)
        message = str(context.exception)
        for expected in ("LinearAttentionLayer", "recurrent states", "crop(-cache.get_seq_length())"):
            self.assertIn(expected, message)


# How the assistant cache must be rolled back after each round, per assistant (measured on 5.14.1, and why): the
# dynamic cache of a Transformer assistant removes exactly the rejected tokens; the hybrid assistants' caches do not
# record their conv past (`generate` only activates recording on the main model) or hold recurrent states, so
# removing a few tokens is refused and the candidate generator rolls them back fully instead.
# Since a bounded state history (5.14's step 7), linear attention assistants are cropped exactly too, never rolled back
# fully. On 5.24 the assistant records its conv past, so the conv-only assistants (Inkling, Lfm2) are cropped exactly
# there already; one with recurrent states (Qwen3-Next) needs the history
EXPECTED_ASSISTANT_ROLLBACK = {
    "llama": "partial",
    "inkling": "partial",
    "qwen3_next": "partial" if HAS_STATE_HISTORY else "full",
    "lfm2": "partial",
}


@require_torch
class AssistantRollbackModeTest(unittest.TestCase):
    """Pins which rollback each assistant gets in every round: an assistant that is always rolled back fully (slow but
    correct) must not pass for one that should be cropped exactly, nor the other way round."""

    setUpClass = HybridAssistedGenerationTest.setUpClass
    tearDownClass = HybridAssistedGenerationTest.tearDownClass

    @parameterized.expand([(name,) for name in EXPECTED_ASSISTANT_ROLLBACK])
    def test_rollback_mode_of_every_round(self, assistant_name):
        with _AssistantSpy() as spy:
            sequences = _generate(_model("llama", seed=0), 5, assistant_model=_model(assistant_name, seed=1))
        self.assertEqual(sequences.tolist(), _greedy("llama", 5).tolist())
        removing_rounds = [rollback for rollback in spy.rollbacks if rollback["length_before"] > rollback["intended"]]
        self.assertGreaterEqual(
            len(removing_rounds), 2, f"expected several rounds with rejected drafts: {spy.rollbacks}"
        )
        for round_idx, rollback in enumerate(removing_rounds, start=1):
            if EXPECTED_ASSISTANT_ROLLBACK[assistant_name] == "partial":
                self.assertGreater(rollback["intended"], 0)
                self.assertEqual(rollback["length"], rollback["intended"], f"round {round_idx}: {rollback}")
                self.assertEqual(set(rollback["attention_lengths"]), {rollback["intended"]}, f"round {round_idx}")
            else:
                self.assertEqual(rollback["length"], 0, f"round {round_idx}: {rollback}")
                self.assertEqual(set(rollback["attention_lengths"]), {0}, f"round {round_idx}")
                self.assertFalse(any(rollback["linear_has_previous_state"]), f"round {round_idx}: stale states")

    def test_assistant_cache_is_kept_when_every_draft_is_accepted(self):
        # An assistant with the main model's weights: every draft is accepted, so the candidate generator has nothing
        # to remove from the assistant cache in those rounds, and must not touch it (`crop(-0)` would empty it)
        with _AssistantSpy() as spy:
            sequences = _generate(_model("llama", seed=0), 5, assistant_model=_model("llama", seed=0))
        self.assertEqual(sequences.tolist(), _greedy("llama", 5).tolist())
        self.assertGreaterEqual(len(spy.rollbacks), 1)
        for round_idx, rollback in enumerate(spy.rollbacks, start=1):
            self.assertEqual(rollback["length_before"], rollback["intended"], f"round {round_idx}: {rollback}")
            self.assertEqual(rollback["length"], rollback["intended"], f"round {round_idx}: {rollback}")
