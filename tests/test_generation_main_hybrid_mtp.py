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
"""End-to-end MTP decoding (`generate(use_mtp=True)`) with hybrid main models (transformers 5.25 only).

The sibling of `test_generation_main_hybrid.py` (same tiny float64 models, same main-cache spy) for the fourth drafter:
the model's own multi-token-prediction layers, loaded from the checkpoint by `MtpModel.from_pretrained`. Of the 26
families whose 5.25 modeling code hands states to the cache, two have MTP layers: Inkling (hybrid convolution and
attention layers) and Bailing-hybrid (MLA attention and routed experts; it needs the upstream step 11, before which its
config cannot build them); and Bailing-hybrid with a linear attention last layer and MTP layers of linear attention,
which no checkpoint has but a config may name (they need the fork step 22: the MTP cache then rolls recurrent states
back). Each runs with one and with two MTP layers (with two, the generator crops its `MtpCache` to
redo a chain the main model rejected), with a dynamic and with a static main cache. For every case the tests check

- the output equals plain greedy decoding,
- after every round, every layer of the main cache equals that of a fresh forward over the tokens it must hold,
- after every round, every layer of the `MtpCache` equals that of one MTP forward from an empty cache over the kept
  tokens, fed with the main model's hidden states of those tokens (as `MtpModel.forward` chains its layers).

The 24 other families have no `num_mtp_layers`: `use_mtp=True` raises before generating (stock too).
On stock 5.25, Bailing-hybrid raises (its config), and with MTP layers of linear attention too (a `TypeError`, or
wrong states where that is fixed alone); Inkling passes (its layers have convolutions only: nothing to restore).
"""

import os
import tempfile
from functools import cache

import pytest
from parameterized import parameterized

import transformers
from transformers import is_torch_available
from transformers.testing_utils import require_torch

from .numerics import MODEL_DTYPE, TinyModelTestCase
from .test_generation_main_hybrid import (
    COMMON,
    MAIN_MODELS,
    MAX_NEW_TOKENS,
    _compare_caches,
    _input_ids,
    _main_model,
    _MainCacheSpy,
    _set_generation_config,
)


pytestmark = pytest.mark.skipif(
    not transformers.__version__.startswith("5.25"), reason="MTP decoding of hybrid models in transformers 5.25 only"
)

if is_torch_available():
    import torch
    from safetensors.torch import save_file

    if transformers.__version__.startswith("5.25"):
        from transformers.cache_utils import MtpCache
        from transformers.generation.candidate_generator import MTPCandidateGenerator
        from transformers.modeling_layers import MtpModel


# The families with MTP layers, and where their checkpoints keep them (`MtpModel.from_pretrained` finds them there)
MTP_FAMILIES = {
    "inkling": lambda config, layer_idx: f"model.mtp.layers.{layer_idx}.",
    "bailing_hybrid": lambda config, layer_idx: f"model.layers.{config.num_hidden_layers + layer_idx}.",
}
# Configurations of a family that no checkpoint has (yet): (family, its arguments for a number of MTP layers).
# Bailing-hybrid with a linear attention last layer and MTP layers of linear attention, whose recurrent states the MTP
# cache rolls back (fork step 22)
MTP_CONFIGS = {
    "bailing_hybrid_linear": (
        "bailing_hybrid",
        lambda num_mtp_layers: {
            "layer_types": ["full_attention", "linear_attention"],
            "mtp_layer_types": ["linear_attention"] * num_mtp_layers,
            "mtp_mlp_layer_types": ["sparse"] * num_mtp_layers,
        },
    )
}
MTP_CASES = (*MTP_FAMILIES, *MTP_CONFIGS)
NUM_MTP_LAYERS = (1, 2)
CHECKPOINTS = tempfile.TemporaryDirectory()


def _mtp_checkpoint_weights(model, num_mtp_layers, prefix):
    """The main model's weights and those of randomly initialised MTP layers, named as the family's checkpoints."""
    torch.manual_seed(1)
    mtp_model = MtpModel(model, num_mtp_layers)
    with torch.no_grad():  # the generic `MtpModel` does not know the family's modules (e.g. its experts)
        for module in mtp_model.layers.modules():
            model._init_weights(module)
    weights = dict(model.state_dict())
    for name, tensor in mtp_model.layers.state_dict().items():
        layer_idx, name = name.split(".", 1)
        if not prefix(model.config, 0).startswith("model.mtp."):
            # A decoder layer's own weights sit next to the MTP projections (`MtpModel` nests them in `mtp_block`)
            name = name.removeprefix("mtp_block.")
        weights[prefix(model.config, int(layer_idx)) + name] = tensor
    return weights


@cache
def _mtp_model(name, num_mtp_layers):
    """The main model `name` with `num_mtp_layers` MTP layers, loaded from a checkpoint that has them."""
    family, extra_arguments = MTP_CONFIGS.get(name, (name, lambda num_mtp_layers: {}))
    config_class, model_class, arguments = MAIN_MODELS[family]
    config = getattr(transformers, config_class)(
        **{**COMMON, **arguments, **extra_arguments(num_mtp_layers), "num_mtp_layers": num_mtp_layers},
        experts_implementation="eager",
    )
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config).to(MODEL_DTYPE)
    checkpoint = os.path.join(CHECKPOINTS.name, f"{name}-{num_mtp_layers}")
    model.save_pretrained(checkpoint)
    weights = _mtp_checkpoint_weights(model, num_mtp_layers, MTP_FAMILIES[family])
    save_file({key: tensor.contiguous() for key, tensor in weights.items()}, f"{checkpoint}/model.safetensors")
    model = getattr(transformers, model_class).from_pretrained(
        checkpoint, dtype=MODEL_DTYPE, use_kernels=False, experts_implementation="eager"
    )
    return _set_generation_config(model.eval())


class _MtpCacheSpy:
    """Wraps `MTPCandidateGenerator.get_candidates`: after each round, compares the generator's `MtpCache` with that of
    one MTP forward from an empty cache over the kept tokens, fed with the main model's hidden states of those tokens
    (collected round by round as the generator slices them)."""

    def __init__(self):
        self.rounds = []  # per round: mismatches

    def __enter__(self):
        spy, original = self, MTPCandidateGenerator.__dict__["get_candidates"]
        self._original = original

        def get_candidates(
            generator, input_ids, model_kwargs, model_outputs, is_first_iteration, n_last_matches, **kw
        ):
            if not is_first_iteration:
                prefill = generator.is_main_model_prefill
                kept = input_ids.shape[1] - 1 if prefill else n_last_matches + 1
                hidden_states = model_outputs.hidden_states[-1][:, :kept]
                spy.hidden_states = hidden_states if prefill else torch.cat([spy.hidden_states, hidden_states], 1)
            result = original(
                generator, input_ids, model_kwargs, model_outputs, is_first_iteration, n_last_matches, **kw
            )
            if not is_first_iteration:
                fresh = MtpCache(config=generator.mtp_model.config)
                with torch.no_grad():
                    generator.mtp_model(
                        input_ids=input_ids[:, 1:],
                        last_hidden_states=spy.hidden_states,
                        attention_mask=None,
                        position_ids=torch.arange(1, input_ids.shape[1])[None],
                        mtp_cache=fresh,
                    )
                spy.rounds.append(_compare_caches(generator.mtp_cache, fresh))
            return result

        MTPCandidateGenerator.get_candidates = get_candidates
        return self

    def __exit__(self, *exc_info):
        MTPCandidateGenerator.get_candidates = self._original
        return False


@require_torch
class HybridMainModelMtpGenerationTest(TinyModelTestCase):
    @parameterized.expand(
        [
            (name, num_mtp_layers, cache_implementation)
            for name in MTP_CASES
            for num_mtp_layers in NUM_MTP_LAYERS
            for cache_implementation in ("dynamic", "static")
        ],
        name_func=lambda func, num, param: f"{func.__name__}_{'_'.join(map(str, param.args))}",
    )
    def test_matches_greedy_and_both_caches_equal_fresh_forwards_after_every_round(
        self, name, num_mtp_layers, cache_implementation
    ):
        self.check_mtp_generation(name, num_mtp_layers, cache_implementation, _input_ids())

    @parameterized.expand(
        [(name,) for name in MTP_CASES], name_func=lambda func, num, param: f"{func.__name__}_{param.args[0]}"
    )
    def test_one_token_prompt_with_two_mtp_layers(self, name):
        """The MTP layers have seen one token when a round re-feeds the last two (upstream step 12)."""
        self.check_mtp_generation(name, 2, "dynamic", _input_ids()[:, :1])

    def check_mtp_generation(self, name, num_mtp_layers, cache_implementation, input_ids):
        model = _mtp_model(name, num_mtp_layers)
        kwargs = {"cache_implementation": "static"} if cache_implementation == "static" else {}
        with _MainCacheSpy(model, input_ids.shape[1]) as main_spy, _MtpCacheSpy() as mtp_spy:
            sequences = model.generate(
                input_ids, use_mtp=True, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, **kwargs
            )

        problems = []
        # The MTP layers do not change the main model: its greedy decoding is that of the sweep's model
        greedy = model.generate(input_ids, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
        if sequences.tolist() != greedy.tolist():
            problems.append(f"tokens differ from greedy:\n  {sequences.tolist()}\n  {greedy.tolist()}")
        for round_idx, (drafts, rejected, mismatches) in enumerate(main_spy.rounds, start=1):
            if mismatches:
                problems.append(
                    f"main cache, round {round_idx} ({rejected}/{drafts} rejected): {'; '.join(mismatches)}"
                )
        for round_idx, mismatches in enumerate(mtp_spy.rounds, start=1):
            if mismatches:
                problems.append(f"MTP cache, round {round_idx}: {'; '.join(mismatches)}")
        if problems:
            self.fail("\n".join(problems))
        rounds = [(drafts, rejected) for drafts, rejected, _ in main_spy.rounds]
        self.assertGreaterEqual(len(mtp_spy.rounds), 3, "expected several rounds")
        self.assertTrue(any(rejected > 0 for _, rejected in rounds), f"no draft rejected: {rounds}")

    @parameterized.expand(
        [(name,) for name in MAIN_MODELS if name not in MTP_FAMILIES],
        name_func=lambda func, num, param: f"{func.__name__}_{param.args[0]}",
    )
    def test_families_without_mtp_layers_raise_before_generating(self, name):
        """`use_mtp=True` on a model without MTP layers raises before the first forward (a limit of the model)."""
        model = _main_model(name)
        forwards = []
        hook = model.register_forward_pre_hook(lambda *args: forwards.append(1))
        try:
            with self.assertRaisesRegex(ValueError, "num_mtp_layers"):
                model.generate(_input_ids(), use_mtp=True, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
        finally:
            hook.remove()
        self.assertEqual(forwards, [])
