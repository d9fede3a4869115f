"""The assistant's own cache and drafts in assisted decoding, round by round, on every target (issue 39).

Assisted decoding equals greedy decoding whatever the assistant's cache holds, because the main model verifies every
draft: only the assistant's cache and drafts can show that its rollback is right. A spy on
`AssistedCandidateGenerator.get_candidates` checks after every round that

- the assistant's cache holds every token but its last draft (never more, never a token twice), and equals, layer by layer (keys and values; conv and recurrent
  states), a fresh forward of the assistant over the tokens it holds (a cache fed a token twice, or rolled back to the
  wrong state, differs),
- the drafts of the round equal those of the assistant drafting from the same prefix without a cache,

and that the output equals greedy decoding. Assistants: attention (Llama), a sliding window of 4 (Mistral), hybrid
(Qwen3-Next: gated delta net and attention), SSM (Mamba2); constant and heuristic schedules; with and without an
explicit attention mask; a dynamic and a static main cache. The main model is a tiny Llama; the assistants share its
embeddings and head, so that some drafts are accepted. All in float64.
"""

import functools

import pytest
import torch
from parameterized import parameterized

import transformers
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.generation.candidate_generator import AssistedCandidateGenerator
from transformers.testing_utils import require_torch

from .compat import CACHE_KWARG, TARGET
from .numerics import MODEL_DTYPE, TinyModelTestCase, assert_states_close, cross_path_atol


VOCAB_SIZE = 64
COMMON = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 32,
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
}
ATTENTION = {"intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2}
ASSISTANTS = {
    "llama": ("LlamaConfig", ATTENTION),
    "mistral": ("MistralConfig", {**ATTENTION, "sliding_window": 4}),
    "qwen3_next": (
        "Qwen3NextConfig",
        {
            **ATTENTION,
            "head_dim": 8,
            "num_experts": 0,
            "linear_num_value_heads": 2,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 8,
            "linear_value_head_dim": 8,
            "layer_types": ["linear_attention", "full_attention"],
        },
    ),
    "mamba2": (
        "Mamba2Config",
        {"num_hidden_layers": 2, "num_heads": 4, "head_dim": 16, "state_size": 8, "n_groups": 1, "chunk_size": 8},
    ),
}
# An SSM-only assistant raises in `AssistedCandidateGenerator.get_candidates` on 5.24.0 and 5.14.1, stock and fixed:
# its cache of linear layers only has no `get_seq_length` (`ValueError`); 5.25 counts their tokens
UNSUPPORTED = {
    ("v5_24", "mamba2"): "a cache of linear layers only has no `get_seq_length` on 5.24 (stock too)",
    ("v5_14", "mamba2"): "a cache of linear layers only has no `get_seq_length` on 5.14 (stock too)",
}
CASES = [
    (assistant, schedule, mask, cache_implementation)
    for assistant in ASSISTANTS
    for schedule in ("constant", "heuristic")
    for mask in (False, True)
    for cache_implementation in ("dynamic", "static")
]
MAX_NEW_TOKENS = 16


def _configure(model, schedule="constant"):
    model.generation_config.update(
        eos_token_id=None,
        pad_token_id=None,
        num_assistant_tokens=3,
        num_assistant_tokens_schedule=schedule,
        assistant_confidence_threshold=0.0,
    )
    return model


@functools.cache
def _main_model():
    torch.manual_seed(0)
    return _configure(LlamaForCausalLM(LlamaConfig(**COMMON, **ATTENTION)).eval().to(MODEL_DTYPE))


def _assistant(name, schedule):
    config_class, arguments = ASSISTANTS[name]
    torch.manual_seed(1)
    config = getattr(transformers, config_class)(**COMMON, **arguments, tie_word_embeddings=False)
    model = transformers.AutoModelForCausalLM.from_config(config).eval().to(MODEL_DTYPE)
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(_main_model().get_input_embeddings().weight)
        model.get_output_embeddings().weight.copy_(_main_model().get_output_embeddings().weight)
    return _configure(model, schedule)


def _layer_states(layer, window=None):
    """The tensors of a cache layer a fresh one must equal: keys and values (their last `window` tokens if given: a
    recording sliding window keeps the tokens since the last `crop`), the working conv columns, the states."""
    states = {}
    if getattr(layer, "keys", None) is not None and layer.keys.numel() > 0:
        states["keys"], states["values"] = layer.keys, layer.values
        if window is not None:
            states["keys"], states["values"] = layer.keys[..., -window:, :], layer.values[..., -window:, :]
    for index in range(getattr(layer, "number_of_states", 0)):
        if layer.is_conv_states_initialized[index]:
            states[f"conv {index}"] = layer.conv_states[index][..., -layer.conv_kernel_size[index] :]
        if layer.is_recurrent_states_initialized[index]:
            states[f"recurrent {index}"] = layer.recurrent_states[index]
    return states


class _AssistantSpy:
    """Checks the assistant's cache and drafts after every round of `get_candidates`."""

    def __init__(self, assistant):
        self.assistant, self.rounds, self.errors = assistant, 0, []

    def __enter__(self):
        self.original = AssistedCandidateGenerator.get_candidates
        spy = self

        @functools.wraps(self.original)
        def get_candidates(generator, input_ids, *args, **kwargs):
            candidates, logits = spy.original(generator, input_ids, *args, **kwargs)
            spy.check(generator.assistant_kwargs[CACHE_KWARG], input_ids, candidates)
            return candidates, logits

        AssistedCandidateGenerator.get_candidates = get_candidates
        return self

    def __exit__(self, *exc_info):
        AssistedCandidateGenerator.get_candidates = self.original

    def check(self, cache, input_ids, candidates):
        if candidates.shape[1] == input_ids.shape[1]:
            return  # no room left for a draft: the round did not draft, nor touch the cache
        self.rounds += 1
        where = f"round {self.rounds}"
        # After drafting, the assistant's cache holds every token but its last draft (which it has not been fed)
        held = candidates.shape[1] - 1
        if any(getattr(layer, "keys", None) is not None for layer in cache.layers) and cache.get_seq_length() != held:
            self.errors.append(
                f"{where}: the assistant's cache holds {int(cache.get_seq_length())} tokens, not {held}"
            )
            return
        num_drafts = candidates.shape[1] - input_ids.shape[1]
        with torch.no_grad():
            fresh = self.assistant(candidates[:, :held], **{CACHE_KWARG: None}, use_cache=True)
            fresh_drafts = self.assistant.generate(
                input_ids, max_new_tokens=num_drafts, min_new_tokens=num_drafts, do_sample=False
            )
        if fresh_drafts.tolist() != candidates.tolist():
            self.errors.append(f"{where}: drafts {candidates.tolist()} != a fresh assistant's {fresh_drafts.tolist()}")
        fresh_cache = getattr(fresh, CACHE_KWARG)
        for layer_idx, (layer, fresh_layer) in enumerate(zip(cache.layers, fresh_cache.layers)):
            fresh_states = _layer_states(fresh_layer)
            # The last tokens of a sliding window (5.14's assistant cache has full attention layers: the mask slides)
            window = fresh_states["keys"].shape[-2] if getattr(fresh_layer, "is_sliding", False) else None
            states = _layer_states(layer, window)
            if states.keys() != fresh_states.keys():
                self.errors.append(f"{where}, layer {layer_idx}: holds {sorted(states)}, not {sorted(fresh_states)}")
                continue
            for name, fresh_state in fresh_states.items():
                try:
                    assert states[name].shape == fresh_state.shape, (states[name].shape, fresh_state.shape)
                    if fresh_state.dtype == MODEL_DTYPE:
                        assert_states_close(states[name], fresh_state, f"{where}, layer {layer_idx}, {name}")
                    else:  # recurrent states some models keep in float32 whatever the model's dtype
                        atol = cross_path_atol(fresh_state)
                        torch.testing.assert_close(states[name], fresh_state, rtol=0, atol=atol)
                except AssertionError as error:
                    self.errors.append(f"{where}, layer {layer_idx}, {name}: {str(error).splitlines()[0]}")


@require_torch
class AssistantCacheAfterEveryRoundTest(TinyModelTestCase):
    @parameterized.expand(CASES)
    def test_assistant_cache_and_drafts_equal_a_fresh_assistants(self, name, schedule, mask, cache_implementation):
        if (TARGET.name, name) in UNSUPPORTED:
            pytest.skip(UNSUPPORTED[(TARGET.name, name)])
        model, assistant = _main_model(), _assistant(name, schedule)
        input_ids = torch.randint(3, VOCAB_SIZE, (1, 7), generator=torch.Generator().manual_seed(7))
        kwargs = {"attention_mask": torch.ones_like(input_ids)} if mask else {}
        kwargs |= {"max_new_tokens": MAX_NEW_TOKENS, "do_sample": False}
        if cache_implementation == "static":
            kwargs["cache_implementation"] = "static"
        greedy = model.generate(input_ids, **kwargs)

        with _AssistantSpy(assistant) as spy:
            assisted = model.generate(input_ids, assistant_model=assistant, **kwargs)

        self.assertEqual(assisted.tolist(), greedy.tolist())
        self.assertGreater(spy.rounds, 1)
        self.assertEqual(spy.errors, [])


class _DFlashSpy:
    """Checks the DFlash drafter's cache and drafts after every round: a fresh drafter, given the main model's hidden
    states over every token but the last (one forward of the main model) and the same noise block, must hold the same
    keys and values and propose the same drafts."""

    def __init__(self, main_model):
        from transformers.generation.candidate_generator import DFlashTokenCandidateGenerator

        self.generator_class, self.main_model, self.rounds, self.errors = (
            DFlashTokenCandidateGenerator,
            main_model,
            0,
            [],
        )

    def __enter__(self):
        self.original = self.generator_class.get_candidates
        spy = self

        @functools.wraps(self.original)
        def get_candidates(generator, input_ids, *args, **kwargs):
            candidates, logits = spy.original(generator, input_ids, *args, **kwargs)
            if candidates.shape[1] > input_ids.shape[1]:
                spy.check(generator, input_ids, candidates)
            return candidates, logits

        self.generator_class.get_candidates = get_candidates
        return self

    def __exit__(self, *exc_info):
        self.generator_class.get_candidates = self.original

    def check(self, generator, input_ids, candidates):
        from transformers.cache_utils import DFlashCache

        self.rounds += 1
        where, context_length = f"round {self.rounds}", input_ids.shape[1] - 1
        with torch.no_grad():
            hidden_states = self.main_model(input_ids[:, :-1], output_hidden_states=True).hidden_states
            context = torch.cat([hidden_states[i + 1] for i in generator.target_layer_ids], dim=-1)
            noise_ids = torch.cat([input_ids[:, -1:], generator.noise_ids_mask.to(input_ids.device)], dim=-1)
            fresh = DFlashCache(config=generator.assistant_model.config)
            fresh.set_previous_accepted_tokens(context_length)
            outputs = generator.assistant_model(
                noise_embeds=generator._get_noise_embeds(noise_ids),
                context_hidden_states=context,
                position_ids=torch.arange(context_length + generator.block_size)[None],
                cache=fresh,
            )
            drafts = generator.main_model_output_embeddings(outputs.last_hidden_state[:, 1:]).argmax(dim=-1)
        num_drafts = candidates.shape[1] - input_ids.shape[1]
        if drafts[:, :num_drafts].tolist() != candidates[:, input_ids.shape[1] :].tolist():
            self.errors.append(f"{where}: drafts {candidates.tolist()} != a fresh drafter's {drafts.tolist()}")
        for layer_idx, (layer, fresh_layer) in enumerate(zip(generator.cache.layers, fresh.layers)):
            for name in ("keys", "values"):
                state, fresh_state = getattr(layer, name), getattr(fresh_layer, name)
                try:
                    assert state.shape == fresh_state.shape, (state.shape, fresh_state.shape)
                    assert_states_close(state, fresh_state, f"{where}, layer {layer_idx}, {name}")
                except AssertionError as error:
                    self.errors.append(f"{where}, layer {layer_idx}, {name}: {str(error).splitlines()[0]}")


@require_torch
@pytest.mark.skipif(TARGET.name != "v5_25", reason="DFlash drafting is new in transformers 5.25")
class DFlashCacheAfterEveryRoundTest(TinyModelTestCase):
    @parameterized.expand(["dynamic", "static"])
    def test_dflash_cache_and_drafts_equal_a_fresh_drafters(self, cache_implementation):
        model = _main_model()
        torch.manual_seed(2)
        config = transformers.MuseGlimmerAssistantConfig(
            **{**COMMON, **ATTENTION, "num_hidden_layers": 1},
            head_dim=8,
            block_size=4,
            mask_token_id=VOCAB_SIZE - 1,
            target_layer_ids=[0, 1],
        )
        drafter = transformers.MuseGlimmerAssistantModel(config).eval().to(MODEL_DTYPE)
        input_ids = torch.randint(3, VOCAB_SIZE, (1, 7), generator=torch.Generator().manual_seed(7))
        kwargs = {"max_new_tokens": MAX_NEW_TOKENS, "do_sample": False}
        if cache_implementation == "static":
            kwargs["cache_implementation"] = "static"
        greedy = model.generate(input_ids, **kwargs)

        with _DFlashSpy(model) as spy:
            assisted = model.generate(input_ids, assistant_model=drafter, speculation_type="dflash", **kwargs)

        self.assertEqual(assisted.tolist(), greedy.tolist())
        self.assertGreater(spy.rounds, 1)
        self.assertEqual(spy.errors, [])
