"""Mutation testing of the overlay of each target with cosmic-ray (`make mutate`, `make mutate TARGET=v5_14`).

Why cosmic-ray: it writes each mutant into the source FILE on disk and runs the tests in a fresh process, which is
what the patcher needs (it re-creates the overlay's functions from their code objects and reads their source for the
decorators; a tool that swaps functions for trampolines at runtime, as mutmut 3 does, would be installed as the
trampoline, with globals that upstream's modules do not define).

The session runs in a scratch copy of `src/` and `tests/` (`build/mutation/<target>/`), so an interrupted run never
leaves a mutant in the work tree, and the work tree can be edited while it runs. The tests run with
`PYTHONPATH=<copy>/src`, which comes before the editable install on `sys.path`.

Mutants that cannot change behaviour by construction are marked skipped before the run, each with its reason:
- in a type annotation (annotations are never used at runtime by this code);
- in a definition that a later step of the target defines again: the patcher installs only the last one, so the
  stacked fix never runs it (it is live only in the intermediate exported commits);
- operators left out for cost (see `EXCLUDED_OPERATORS`): replacing an arithmetic operator by a bitwise or power
  operator, or a comparison by an identity/membership test; every such mutant of this code either raises on ints and
  tensors or is a stronger form of a kept mutant (`+` -> `-`, `<` -> `<=`, ...).

Every survivor must be killed by a test or be listed in `EQUIVALENT` with a one-line argument; the report flags the
others as unexplained, and the script exits non-zero if there is any.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
OVERLAY = ROOT / "src" / "cache_crop_fix" / "overlay"
BUILD = ROOT / "build" / "mutation"

# The tests of each target, in the order they run against a mutant (fast unit tests first, the end-to-end generation
# runs last; `-x` stops at the first failure). A mutant runs only those of them that execute the function it is in
# (measured by one coverage run of the whole selection at the start of the session, `coverage.json`), and the whole
# selection if it is outside any function (module level, a decorator, a default value's signature line).
TEST_SELECTION = {
    "v5_14": (
        "tests/v5_14/utils/test_cache_utils.py",
        "tests/v5_14/utils",
        "tests/v5_14/generation",
        "tests/v5_14/models",
        "tests/test_call_sites.py",
        "tests/test_stateful.py",
        "tests/test_stateful_hybrid.py",
        "tests/test_stateful_history.py",
        "tests/test_generation.py::AssistedGenerationCropTest::test_assistant_model_matches_greedy_llama_prompt_1",
        "tests/test_generation.py::AssistedGenerationCropTest::test_assistant_model_matches_greedy_gemma2_prompt_7",
        "tests/test_generation.py::AssistedGenerationCropTest::test_sliding_window_is_crossed_mistral",
        "tests/test_generation_hybrid.py::HybridAssistedGenerationTest::test_hybrid_assistant_matches_greedy_1_qwen3_next",
        "tests/test_generation_hybrid.py::HybridAssistedGenerationTest::test_hybrid_assistant_matches_greedy_2_lfm2",
        "tests/test_generation_hybrid.py::AssistantRollbackModeTest",
        "tests/test_generation_history.py",
    ),
    # the upstream main target: its upstream-style tests, then the project's history tests (they hold for both targets)
    "v5_24": ("tests/v5_24", "tests/test_stateful_history.py", "tests/test_generation_history.py"),
    # upstream main (5.25): its upstream-style tests, the host-sync counts, then the end-to-end hybrid generation
    "v5_25": ("tests/v5_25", "tests/test_syncs.py", "tests/test_generation_main_hybrid.py"),
}
# The first phase of a two-phase session (`--fast`): the unit tests of the target, which kill most mutants in seconds.
# The end-to-end generation and stateful tests then run only for the survivors of the first phase (`--recheck`, which
# runs every test that executes the mutated function).
FAST_TESTS = {
    "v5_14": ("tests/v5_14/", "tests/test_call_sites.py"),
    "v5_24": ("tests/v5_24/",),
    "v5_25": ("tests/v5_25/", "tests/test_syncs.py"),
}
# Left out of the first phase although under FAST_TESTS: end-to-end runs of a model (a minute or more per mutant on the
# shared machine); they run in the second phase.
SLOW_TESTS = {"v5_25": ("tests/v5_25/utils/test_cache_utils.py::AssistedDecodingStatesTest",)}
# Deselected for speed: the quanto/hqq backend tests build native kernels (minutes on a cold cache); the in-repo
# quantizer tests of the same `crop` run instead.
DESELECT = {"v5_14": "not QuantizedBackendsCropTest", "v5_24": "", "v5_25": ""}
TIMEOUT = 300.0

# Left out for cost (2 shared cores): a full cosmic-ray operator set gives ~590 mutants of the 5.14 overlay (after the
# annotation and superseded skips), ~3 hours. We keep the classic "sufficient" set (Offutt et al.): relational
# operators to their boundary (`<` <-> `<=`, `>` <-> `>=`) and negation (`==` <-> `!=`), arithmetic `+` <-> `-` and
# `*` <-> `/`, numbers +-1, `not` added or removed, `and` <-> `or`, minus removed, empty loops, exceptions, booleans,
# decorators. The operators left out replace an operator by a far one (e.g. `-` by `//`, `>` by `==`): on this code
# such mutants change the result for nearly every input, so any test that kills the boundary mutant kills them.
EXCLUDED_OPERATORS = (
    r"core/ReplaceBinaryOperator_(?!Add_Sub$|Sub_Add$|Mul_Div$|Div_Mul$)",
    r"core/ReplaceComparisonOperator_(?!Lt_LtE$|LtE_Lt$|Gt_GtE$|GtE_Gt$|Eq_NotEq$|NotEq_Eq$)",
    r"core/ReplaceUnaryOperator_USub_UAdd$",  # `+k` is `k`: the same program as the `Delete_USub` mutant
    r"core/ReplaceUnaryOperator_USub_(Not|Invert)$",  # `not k` / `~k` for an int count: covered by `Delete_USub`
)

# Survivors argued equivalent, keyed by (file relative to the target's overlay, the mutated line as cosmic-ray writes it,
# stripped, operator).
# The argument is the one line the docs show for it.
# 5.14 (`overlay/v5_14`)
EQUIVALENT_V5_14: dict[tuple[str, str, str], str] = {
    (
        "step3_atomic/generation/candidate_generator.py",
        "self.assistant_kwargs, input_ids.shape[1], self.assistant_model.config.is_encoder_decoder",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step5_quantized/cache_utils.py",
        "residual_length = self.keys.shape[-2] if self.keys.dim() == 4 else -1",
        "core/NumberReplacer",
    ): "with an empty residual part `new_length < seq_length <= quantized_length` either way, so the same "
    "re-quantizing branch runs, which does not read `quantized_length`.",
    (
        "step1_clamp/cache_utils.py",
        "if self.is_indexer_initialized and self.indexer_keys.numel() >= 0 and self.indexer_keys.shape[1] > new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "indexer keys are only empty as a 3-D tensor (`update_indexer` concatenates right after its lazy "
    "initialization), and then `shape[1] > new_length` is false either way.",
    (
        "step1_clamp/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if self.idx_keys is not None and self.idx_keys.shape[-2] >= new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the extra slice `[..., :new_length, :]` keeps every index key (same values).",
    (
        "step2_deprecate/models/pi0/modeling_pi0.py",
        "position_ids=attention_mask.cumsum(1) - 1 if attention_mask is not None else None,",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the attention mask is 2-D (batch, sequence), so `cumsum(1)` is `cumsum(-1)` (upstream's own line).",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "buffered_length = -1 if buffered_kv is None else buffered_kv.shape[1]",
        "core/NumberReplacer",
    ): "only the `0` matters here: `buffered_length` is read only when `buffered_kv is not None` (the shape "
    "mutants of this line are killed).",
    (
        "step1_clamp/cache_utils.py",
        "if not max_length > 0 and max_length >= self.keys.shape[-2]:",
        "core/AddNot",
    ): "the early return only skips a slice that keeps everything (`[..., :max_length, :]` with `max_length` at "
    "least the length); for `max_length <= 0` the condition is false either way (an empty layer returned above).",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "new_length = max(seq_length + max_length, 0) if max_length <= 0 else min(max_length, seq_length)",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "only `max_length == 0` takes the other branch: `new_length` is then the length (nothing to remove) instead "
    "of 0 (a full rollback), and both return before any check.",
    (
        "step1_clamp/cache_utils.py",
        "if max_length > 1 and max_length >= self.keys.shape[-2]:",
        "core/NumberReplacer",
    ): "for `max_length == 1` the early return only skips `[..., :1, :]` of a layer of at most 1 token: the same values.",
    (
        "step1_clamp/cache_utils.py",
        "if max_length > 0 and max_length > self.keys.shape[-2]:",
        "core/ReplaceComparisonOperator_GtE_Gt",
    ): "when `max_length` equals the length the skipped slice `[..., :max_length, :]` keeps every token.",
    (
        "step7_history/cache_utils.py",
        "self.conv_states[0].clone() if has_past or self.conv_states[0] is not None else None",
        "core/ReplaceAndWithOr",
    ): "without a past the next history entry holds no recurrent states (`None`), and restoring such an entry never reads its conv states.",
    (
        "step7_history/cache_utils.py",
        "self.has_previous_state[ 1] = True",
        "core/NumberReplacer",
    ): "`has_previous_state[0]` is already true whenever a non-empty entry is restored (only a full rollback, which clears the history, or restoring the first entry sets it false); key 1 is never read (`number_of_states == 1`).",
    (
        "step7_history/cache_utils.py",
        "if missing >= 0 and not self.record_past:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "with nothing missing the padding is `(0, 0)`: the same states.",
    (
        "step7_history/cache_utils.py",
        "self.prefetch(layer_idx - 1, self.only_non_sliding)",
        "core/ReplaceBinaryOperator_Add_Sub",
    ): "not testable here, not argued equivalent: upstream's own line of `Cache.update` (which step 7 rewrites whole), reached only with offloading, which needs CUDA streams.",
    (
        "step7_history/cache_utils.py",
        "if history_length > -1:",
        "core/NumberReplacer",
    ): "with `history_length=0` the two lists are computed again from the layers that already have a history (it can only grow): the same lists, or an empty one that `update` loops over.",
    (
        "step7_history/generation/candidate_generator.py",
        "new_cache_size = max(input_ids.shape[-1] - 1 - remove_from_pkv - num_added_tokens, -1)",
        "core/NumberReplacer",
    ): "a size of -1 removes one token more than the cache holds: the same full rollback as removing all of them.",
    (
        "step7_history/generation/candidate_generator.py",
        "new_cache_size = max(input_ids.shape[1] - 1 - remove_from_pkv - num_added_tokens, 0)",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step7_history/generation/candidate_generator.py",
        "self.assistant_kwargs = _prepare_token_type_ids(self.assistant_kwargs, input_ids.shape[1])",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step7_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_history_length", -1) < history_length:',
        "core/NumberReplacer",
    ): "`history_length` is `num_assistant_tokens + 1 >= 1`, so a default of -1 or 0 gives the same comparison.",
    (
        "step7_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_history_length", 1) < history_length:',
        "core/NumberReplacer",
    ): "differs only for `num_assistant_tokens == 0` (`history_length == 1`), and then `_prepare_assistant_cache` already gave the cache `history_length=1`.",
    (
        "step7_history/cache_utils.py",
        "self.has_previous_state[ -1] = True",
        "core/NumberReplacer",
    ): "`has_previous_state[0]` is already true whenever a non-empty entry is restored (only a full rollback, which clears the history, or restoring the first entry sets it false); key -1 is never read (`number_of_states == 1`).",
    (
        "step7_history/generation/candidate_generator.py",
        "self.assistant_kwargs, input_ids.shape[1], self.assistant_model.config.is_encoder_decoder",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step7_history/generation/candidate_generator.py",
        "decoder_cache.activate_past_recording(history_length=int(self.num_assistant_tokens) + 2)",
        "core/NumberReplacer",
    ): "a history one entry longer keeps more states (memory) but restores exactly the same ones.",
    (
        "step7_history/generation/candidate_generator.py",
        "history_length = int(self.num_assistant_tokens) + 2",
        "core/NumberReplacer",
    ): "a history one entry longer keeps more states (memory) but restores exactly the same ones.",
    (
        "step7_history/cache_utils.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step7_history/generation/candidate_generator.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step7_history/cache_utils.py",
        "if max_length >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "`max_length == 0` returned just above.",
    (
        "step7_history/cache_utils.py",
        "if history_length >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "with `history_length=0` the two lists are computed again from the layers that already have a history (it can only grow): the same lists, or an empty one that `update` loops over.",
    (
        "step7_history/cache_utils.py",
        "self.prefetch(layer_idx + 0, self.only_non_sliding)",
        "core/NumberReplacer",
    ): "not testable here, not argued equivalent: upstream's own line of `Cache.update` (which step 7 rewrites whole), reached only with offloading, which needs CUDA streams.",
    (
        "step7_history/cache_utils.py",
        "if history_length > 0 and (history is None or history.maxlen <= history_length):",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "a history already as long as asked is rebuilt with the same entries and length (the set-up below runs only for a new one).",
    (
        "step7_history/cache_utils.py",
        "if max_length > -1:",
        "core/NumberReplacer",
    ): "`max_length == 0` returned just above.",
    (
        "step7_history/cache_utils.py",
        "layer._record_update_length(key_states.shape[2])",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    # Session of 2026-12-02 (steps 1-7, both phases)
    (
        "step1_clamp/cache_utils.py",
        "if not self.is_indexer_initialized or self.indexer_keys.numel() == -1:",
        "core/NumberReplacer",
    ): "an initialized indexer is empty only with `shape[1] == 0` (`update_indexer` concatenates right after its lazy initialization), and then `shape[1] > effective` is false: nothing is sliced either way.",
    (
        "step1_clamp/cache_utils.py",
        "effective = max_length if max_length >= -1 else max(self.indexer_keys.shape[1] - abs(max_length), 0)",
        "core/NumberReplacer",
    ): "for `max_length == -1` the absolute branch slices `[:, :-1]`, which removes the last token as the relative branch does (an empty indexer returned above).",
    (
        "step1_clamp/cache_utils.py",
        "if self.indexer_keys.shape[1] >= effective:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the slice `[:, :effective]` keeps every indexer key: the same values.",
    (
        "step2_deprecate/cache_utils.py",
        "elif max_length >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "`max_length == 0` is handled by the `if` above, so `>= 0` and `> 0` select the same values here.",
    (
        "step2_deprecate/cache_utils.py",
        "elif max_length > -1:",
        "core/NumberReplacer",
    ): "`max_length == 0` is handled by the `if` above, so `> -1` and `> 0` select the same (integer) values here.",
    (
        "step2_deprecate/generation/candidate_generator.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the import then runs at runtime and succeeds, but binds names in the overlay module, whose globals the installed methods never read (they run with upstream's).",
    (
        "step3_atomic/cache_utils.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the import then runs at runtime and succeeds, but binds names in the overlay module, whose globals the installed methods never read (they run with upstream's).",
    (
        "step3_atomic/generation/candidate_generator.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the import then runs at runtime and succeeds, but binds names in the overlay module, whose globals the installed methods never read (they run with upstream's).",
    (
        "step4_static/cache_utils.py",
        "if self.is_indexer_initialized and indexer_length >= new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the zeroed slice is empty and the length is set to itself.",
    (
        "step5_quantized/cache_utils.py",
        "residual_length = self.keys.shape[2] if self.keys.dim() == 4 else 0",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the residual states are 4-D when this branch is taken (`dim() == 4`), so `shape[2]` is `shape[-2]`.",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "new_length = max(seq_length + max_length, -1) if max_length < 0 else min(max_length, seq_length)",
        "core/NumberReplacer",
    ): "`Cache._check_crop` hands a layer a full rollback as `0`, so a negative `max_length` here removes fewer tokens than the layer holds: `seq_length + max_length >= 1`, and the `max` with 0, 1 or -1 is never taken.",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "new_length = max(seq_length + max_length, 1) if max_length < 0 else min(max_length, seq_length)",
        "core/NumberReplacer",
    ): "`Cache._check_crop` hands a layer a full rollback as `0`, so a negative `max_length` here removes fewer tokens than the layer holds: `seq_length + max_length >= 1`, and the `max` with 0, 1 or -1 is never taken.",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "if new_length == 0 or tokens_to_remove == -1:",
        "core/NumberReplacer",
    ): "`tokens_to_remove` is never negative, and for 0 the loop below raises nothing (`buffered_length < 0` is false): the same outcome as the early return.",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "elif new_length <= seq_length:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "when nothing was removed every buffer is sliced to its own length: the same values.",
    (
        "step6_models/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if self.idx_keys is not None and self.idx_keys.shape[2] > new_length:",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the index keys are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step6_models/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if self.idx_keys is not None and self.idx_keys.shape[-2] >= new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the extra slice `[..., :new_length, :]` keeps every index key (same values).",
    (
        "step6_models/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if self.idx_keys is not None and index_length >= new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the zeroed slice is empty and the length is set to itself.",
    (
        "step7_history/cache_utils.py",
        "if missing > -1 and not self.record_past:",
        "core/NumberReplacer",
    ): "`missing` is an int: `> -1` differs from `> 0` only for `missing == 0`, and padding by 0 columns gives the same states.",
    (
        "step7_history/cache_utils.py",
        "self.prefetch(layer_idx + 2, self.only_non_sliding)",
        "core/NumberReplacer",
    ): "not testable here, not argued equivalent: upstream's own line of `Cache.update` (which step 7 rewrites whole), reached only with offloading, which needs CUDA streams.",
    (
        "step7_history/cache_utils.py",
        "def activate_past_recording(self, history_length: int = -1):",
        "core/NumberReplacer",
    ): "a default of `-1` acts as `0`: the layers keep no history for any `history_length <= 0`.",
    (
        "step7_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) is None or past_key_values.get_seq_length() > 0:',
        "core/ReplaceAndWithOr",
    ): "re-deciding every round gives the same decision: it depends on the layer types, `record_past` and whether the recurrent layers have a history, none of which changes during a generation.",
    (
        "step7_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) is None and past_key_values.get_seq_length() >= 0:',
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "the assistant cache is empty only in the first round, and then it is the one `_prepare_assistant_cache` made (recording, with a history for every linear layer), for which the decision is the same before and after the first forward pass.",
    (
        "step7_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) is None and past_key_values.get_seq_length() > -1:',
        "core/NumberReplacer",
    ): "the assistant cache is empty only in the first round, and then it is the one `_prepare_assistant_cache` made (recording, with a history for every linear layer), for which the decision is the same before and after the first forward pass.",
    (
        "step7_history/generation/candidate_generator.py",
        "self.generation_config, model_kwargs, None, input_ids.shape[ 1], self.main_model_max_length",
        "core/NumberReplacer",
    ): "the batch size is read only for static cache implementations, and the assistant's is `dynamic_full` here (a `DynamicCache`).",
    (
        "step7_history/generation/candidate_generator.py",
        'if any(getattr(layer, "is_sliding", True) for layer in attention_layers):',
        "core/ReplaceFalseWithTrue",
    ): "every attention layer class of transformers 5.14 defines `is_sliding` (`DynamicLayer`, `StaticLayer` and their subclasses): the default is never read.",
    (
        "step7_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_history_length", 0) <= history_length:',
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "with equal lengths `activate_past_recording` is called with the `maxlen` the history already has: the same history.",
}


# 5.24 (`overlay/v5_24`)
EQUIVALENT_V5_24: dict[tuple[str, str, str], str] = {
    (
        "step1_clamp/cache_utils.py",
        "if number_of_tokens == -1 or not self.is_initialized or self.keys.numel() == 0:",
        "core/NumberReplacer",
    ): "with 0 tokens to remove the slices `[..., :length, :]` keep every token: the same values.",
    (
        "step1_clamp/cache_utils.py",
        "if number_of_tokens == 0 or not self.is_initialized or self.keys.numel() == -1:",
        "core/NumberReplacer",
    ): "an initialized layer without elements is sliced to `[..., :0, :]`: the same empty states.",
    (
        "step1_clamp/cache_utils.py",
        "new_length = max(self.keys.shape[2] - number_of_tokens, 0)",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step1_clamp/cache_utils.py",
        "if number_of_tokens == -1 or number_of_tokens >= seq_length:",
        "core/NumberReplacer",
    ): "removing 0 tokens needs exactly the tokens the window stores (the last `sliding_window - 1`, or every token seen or recorded), so the check below never raises for 0.",
    (
        "step1_clamp/cache_utils.py",
        "stored_length = self.keys.shape[2]",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step1_clamp/cache_utils.py",
        "if not self.is_initialized or self.cumulative_length == -1:",
        "core/NumberReplacer",
    ): "an initialized layer that holds no token is sliced to `[:, :, 0:0]`: the same empty states and length.",
    (
        "step1_clamp/cache_utils.py",
        "if not self.is_initialized and self.cumulative_length == 0:",
        "core/ReplaceOrWithAnd",
    ): "a layer never initialized has `cumulative_length == 0` (both return); an initialized empty one is sliced to the same empty states.",
    (
        "step1_clamp/cache_utils.py",
        "first_stored_token = seq_length - self.keys.shape[2]",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step1_clamp/cache_utils.py",
        "start = end = -1",
        "core/NumberReplacer",
    ): "`[:, :, k:k]` is empty for any `k`: the same empty states.",
    (
        "step1_clamp/cache_utils.py",
        "start = end = 1",
        "core/NumberReplacer",
    ): "`[:, :, k:k]` is empty for any `k`: the same empty states.",
    (
        "step2_atomic/cache_utils.py",
        "if conv_states.shape[-1] <= kernel_size:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "at the kernel size the padding is `(0, 0)`: the same values.",
    (
        "step2_atomic/generation/candidate_generator.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step2_atomic/generation/candidate_generator.py",
        "target_cache_size = input_ids.shape[1] - 1 - remove_from_pkv - num_added_tokens",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step2_atomic/generation/candidate_generator.py",
        "self.assistant_kwargs, input_ids.shape[1], self.assistant_model.config.is_encoder_decoder",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step2_atomic/generation/candidate_generator.py",
        "self.assistant_kwargs = _prepare_token_type_ids(self.assistant_kwargs, input_ids.shape[1])",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step3_static/cache_utils.py",
        "if indexer_length >= new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the zeroed slice is empty and the length is set to itself.",
    (
        "step4_quantized/cache_utils.py",
        "if number_of_tokens > -1 and number_of_tokens >= self.cumulative_length:",
        "core/NumberReplacer",
    ): "this `crop` only gets 0 tokens or at least the length (partial crops are refused before, or handled by the subclass): for 0 it resets only an empty layer, which changes nothing.",
    (
        "step4_quantized/cache_utils.py",
        "if number_of_tokens >= 0 and number_of_tokens >= self.cumulative_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "this `crop` only gets 0 tokens or at least the length (partial crops are refused before, or handled by the subclass): for 0 it resets only an empty layer, which changes nothing.",
    (
        "step4_quantized/cache_utils.py",
        "if number_of_tokens > 0 or number_of_tokens >= self.cumulative_length:",
        "core/ReplaceAndWithOr",
    ): "this `crop` only gets 0 tokens or at least the length (partial crops are refused before, or handled by the subclass): for 0 it resets only an empty layer, which changes nothing.",
    (
        "step4_quantized/cache_utils.py",
        "residual_length = self.keys.shape[2] if self.is_initialized and self.keys.dim() == 4 else 0",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the residual states are 4-D when this branch is taken (`dim() == 4`), so `shape[2]` is `shape[-2]`.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "elif buffered_kv is not None and removed_tokens >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "with 0 removed tokens the buffers are sliced to their own length: the same values.",
    (
        "step5_models/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if self.idx_keys is not None and index_length >= new_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "when the lengths are equal the zeroed slice is empty and the length is set to itself.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if prefill_tokens_to_remove > -1 and self.is_initialized:",
        "core/NumberReplacer",
    ): "with 0 prefill tokens to remove the prefill keeps its length: sliced (dynamic) or zeroed (static) over an empty range.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if prefill_tokens_to_remove >= 0 and self.is_initialized:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "with 0 prefill tokens to remove the prefill keeps its length: sliced (dynamic) or zeroed (static) over an empty range.",
    # Step 6 (history) and step 2's `Cache.crop` after its full-rollback trims
    (
        "step2_atomic/cache_utils.py",
        "number_of_tokens >= 0",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "with nothing to remove, `0 < get_seq_length() <= 0` is false anyway: no full rollback either way.",
    (
        "step2_atomic/cache_utils.py",
        "number_of_tokens > -1",
        "core/NumberReplacer",
    ): "with nothing to remove, `0 < get_seq_length() <= 0` is false anyway: no full rollback either way.",
    (
        "step6_history/cache_utils.py",
        "def activate_past_recording(self, history_length: int = -1) -> None:",
        "core/NumberReplacer",
    ): "a default of `-1` acts as `0`: no history is kept for any `history_length <= 0`.",
    (
        "step6_history/cache_utils.py",
        "def activate_past_recording(self, history_length: int = -1):",
        "core/NumberReplacer",
    ): "a default of `-1` acts as `0`: the layers keep no history for any `history_length <= 0`.",
    (
        "step6_history/cache_utils.py",
        "if history_length > 0 and (history is None or history.maxlen <= history_length):",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "with `maxlen == history_length` the history is re-created from its own entries with the same `maxlen`: the same history.",
    (
        "step6_history/cache_utils.py",
        "if history and history[-1][ 4] is not None and not self._history_copies_states:",
        "core/NumberReplacer",
    ): "the kept version (`[4]`) is `None` exactly when the kept states (`[3]`) are `None` or inference tensors, and for inference tensors `_tensor_version` gives `None` on both sides of the check below, which is then false either way.",
    (
        "step6_history/cache_utils.py",
        "self.has_previous_state[ -1] = True",
        "core/NumberReplacer",
    ): "`has_previous_state[0]` is already true whenever a non-empty entry is restored (only a full rollback, which clears the history, or restoring the first entry sets it false); other keys are never read (`number_of_states == 1`).",
    (
        "step6_history/cache_utils.py",
        "if missing >= 0 and not self.record_past:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "padding by `missing == 0` columns gives the same states.",
    (
        "step6_history/cache_utils.py",
        "if self.is_conv_states_initialized[state_idx] and conv_states.shape[-1] >= kernel_size:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "with exactly `kernel_size` states the window is the whole tensor, as a view (same values, same version counter).",
    (
        "step6_history/generation/candidate_generator.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the import then runs at runtime and succeeds, but binds names in the overlay module, whose globals the installed methods never read (they run with upstream's).",
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) is None or cache.get_seq_length() > 0:',
        "core/ReplaceAndWithOr",
    ): 're-deciding every round gives the same decision, except after two refused crops set `"full"`; then the crop is refused again, changes nothing, and the cache is rolled back fully as before (same results, one refused check per round).',
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) is None and cache.get_seq_length() > 1:',
        "core/NumberReplacer",
    ): "the decision waits until the assistant has processed 2 tokens instead of 1; until then the default rollback runs, which removes the same drafts or, if a layer refuses, rolls back fully (exact either way).",
    (
        "step6_history/generation/candidate_generator.py",
        "target_cache_size = input_ids.shape[1] - 1 - remove_from_pkv - num_added_tokens",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]`.",
    (
        "step6_history/generation/candidate_generator.py",
        "self.assistant_kwargs, input_ids.shape[1], self.assistant_model.config.is_encoder_decoder",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step6_history/generation/candidate_generator.py",
        "self.assistant_kwargs = _prepare_token_type_ids(self.assistant_kwargs, input_ids.shape[1])",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "`input_ids` is always 2-D (batch, sequence) here, so `shape[1]` is `shape[-1]` (upstream's own line).",
    (
        "step6_history/generation/candidate_generator.py",
        "self.generation_config, model_kwargs, None, input_ids.shape[ 1], self.main_model_max_length",
        "core/NumberReplacer",
    ): "the batch size is read only for static cache implementations, and the generator sets the assistant's `cache_implementation` to `None` (a `DynamicCache`).",
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) == "full" and tokens_to_remove > 0:',
        "core/ReplaceComparisonOperator_GtE_Gt",
    ): "when the cache already holds exactly the tokens to keep, not emptying it keeps the same states (the full rollback would only encode them again).",
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) == "full" and tokens_to_remove >= 1:',
        "core/NumberReplacer",
    ): "when the cache already holds exactly the tokens to keep, not emptying it keeps the same states (the full rollback would only encode them again).",
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_rollback", None) == "full" and tokens_to_remove >= -1:',
        "core/NumberReplacer",
    ): "emptying a cache that lacks the newest token too: the assistant encodes the sequence again, the same states (slower).",
    (
        "step6_history/generation/candidate_generator.py",
        "self._assistant_history_length = int(self.num_assistant_tokens) - 1",
        "core/ReplaceBinaryOperator_Add_Sub",
    ): "a recorded length below the real one only makes `_set_assistant_history_length` activate the history again with the `maxlen` it already has: the same history.",
    (
        "step6_history/generation/candidate_generator.py",
        "self._assistant_history_length = int(self.num_assistant_tokens) + 0",
        "core/NumberReplacer",
    ): "a recorded length below the real one only makes `_set_assistant_history_length` activate the history again with the `maxlen` it already has: the same history.",
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_history_length", -1) < history_length:',
        "core/NumberReplacer",
    ): "`_assistant_history_length` is set whenever a history exists, and `history_length` is at least 2 (`num_assistant_tokens >= 1`): a default of -1 or 1 decides the same.",
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_history_length", 1) < history_length:',
        "core/NumberReplacer",
    ): "`_assistant_history_length` is set whenever a history exists, and `history_length` is at least 2 (`num_assistant_tokens >= 1`): a default of -1 or 1 decides the same.",
    (
        "step6_history/generation/candidate_generator.py",
        'if getattr(self, "_assistant_history_length", 0) <= history_length:',
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "with equal lengths `activate_past_recording` is called with the `maxlen` the history already has: the same history.",
    (
        "step6_history/cache_utils.py",
        "if missing > -1 and not self.record_past:",
        "core/NumberReplacer",
    ): "`missing` is an int: `> -1` differs from `> 0` only for `missing == 0`, and padding by 0 columns gives the same states.",
    (
        "step6_history/cache_utils.py",
        "if conv_states.shape[-1] <= kernel_size:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "at the kernel size the padding is `(0, 0)`: the same values.",
    (
        "step1_clamp/cache_utils.py",
        "if type(tokens_to_remove) is int and tokens_to_remove < 0:",
        "core/ReplaceComparisonOperator_LtE_Lt",
    ): "`0` then takes the general path below, which returns the same `0`.",
    (
        "step1_clamp/cache_utils.py",
        "if type(tokens_to_remove) is int and tokens_to_remove <= -1:",
        "core/NumberReplacer",
    ): "`0` then takes the general path below, which returns the same `0`.",
    (
        "step1_clamp/cache_utils.py",
        "if new_length == -1:",
        "core/NumberReplacer",
    ): "`new_length` is never negative, and for `new_length == 0` the computed `start` and `end` are equal anyway: the same empty slice.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "elif buffered_kv is not None and removed_tokens > -1:",
        "core/NumberReplacer",
    ): "with 0 removed tokens the buffers are sliced to their own length: the same values.",
    (
        "step6_history/cache_utils.py",
        "if history and history[-1][ 2] is not None and not self._history_copies_states:",
        "core/NumberReplacer",
    ): "the kept conv version (`[2]`) is `None` exactly when no past was kept (`[3]` is `None`) or the tensors are inference tensors, and for those `_tensor_version` gives `None` on both sides of the check below, which is then false either way.",
    (
        "step6_history/cache_utils.py",
        "self.has_previous_state[ 1] = True",
        "core/NumberReplacer",
    ): "`has_previous_state[0]` is already true whenever a non-empty entry is restored (only a full rollback, which clears the history, or restoring the first entry sets it false); other keys are never read (`number_of_states == 1`).",
}

# 5.25 (`overlay/v5_25`)
EQUIVALENT_V5_25: dict[tuple[str, str, str], str] = {
    (
        "step3_refuse/cache_utils.py",
        "if tokens_to_remove >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "`super().crop(0)` (`DynamicLayer.crop`) returns before changing anything.",
    (
        "step5_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if prefill_tokens_to_remove >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "for 0, `max(prefill_cumulative_length - 0, 0)` is the same length.",
    (
        "step2_history/cache_utils.py",
        "if tokens_to_remove >= 0 and tokens_to_remove == self.num_tokens_linear:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "differs only for `crop(0)` of a layer holding no token, which `reset` leaves as it is (zero states and counts, an empty history).",
    (
        "step2_history/cache_utils.py",
        "if tokens_to_remove > -1:",
        "core/NumberReplacer",
    ): "for 0 both counts are decreased by 0.",
    (
        "step2_history/cache_utils.py",
        "tokens_to_remove >= 0 or self.conv_states[i].shape[-1] != self.conv_kernel_size[i]",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "for `crop(0)` of conv states already `kernel` wide the block only takes views of the whole tensor (same storage and values) and pads nothing.",
    (
        "step2_history/cache_utils.py",
        "self.recurrent_states_num_tokens[i] = -1",
        "core/NumberReplacer",
    ): "the first forward after the reset then never counts as adjacent, which only drops the state from before its first token: only a full rollback (a reset) would restore it.",
    (
        "step1_clamp/cache_utils.py",
        "new_length = max(self.keys.shape[2] + tokens_to_remove, 0)",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step3_refuse/cache_utils.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step5_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step3_refuse/cache_utils.py",
        "first_stored_token = seq_length - self.keys.shape[2]",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step3_refuse/cache_utils.py",
        "self.cumulative_length = self.keys.shape[2]",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step2_history/cache_utils.py",
        "if padding_length > -1:",
        "core/NumberReplacer",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step2_history/cache_utils.py",
        "if padding_length >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step2_history/cache_utils.py",
        "if stored.shape[-1] <= kernel_size:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step2_history/cache_utils.py",
        "if not self.record_past and num_new_tokens <= kernel_size:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step2_history/cache_utils.py",
        "if tokens_to_remove == -1 or tokens_to_remove >= num_tokens:",
        "core/NumberReplacer",
    ): "for 0 the checks below cannot raise: stored conv states are at least `kernel` wide (`0 > stored - kernel` is false) and no history is shorter than 0.",
    (
        "step4_minimax/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if tokens_to_remove != 1 and self.idx_keys is not None:",
        "core/NumberReplacer",
    ): "`tokens_to_remove` is never 1 here (`super().crop` raised for positive values); for 0 the index keys are sliced to the length they already have.",
    (
        "step2_history/cache_utils.py",
        "def __init__(self, number_of_states: int = 2, **kwargs):",
        "core/NumberReplacer",
    ): "a second state that is never updated stays uninitialized: every loop over the states skips it (no tensor, an empty history).",
    (
        "step2_history/cache_utils.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step1_clamp/cache_utils.py",
        "if tokens_to_remove == 1:",
        "core/NumberReplacer",
    ): "`tokens_to_remove` is never 1 here (`super().crop` raised for positive values), and for 0 the slices below keep every index position and key.",
    (
        "step2_history/cache_utils.py",
        "if tokens_to_remove > -1 and tokens_to_remove == self.num_tokens_linear:",
        "core/NumberReplacer",
    ): "differs only for `crop(0)` of a layer holding no token, which `reset` leaves as it is (zero states and counts, an empty history).",
    (
        "step2_history/cache_utils.py",
        "if tokens_to_remove >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "for 0 both counts are decreased by 0.",
    (
        "step2_history/cache_utils.py",
        "tokens_to_remove > -1 or self.conv_states[i].shape[-1] != self.conv_kernel_size[i]",
        "core/NumberReplacer",
    ): "for `crop(0)` of conv states already `kernel` wide the block only takes views of the whole tensor (same storage and values) and pads nothing.",
    (
        "step3_refuse/cache_utils.py",
        "if tokens_to_remove > -1:",
        "core/NumberReplacer",
    ): "`super().crop(0)` (`DynamicLayer.crop`) returns before changing anything.",
    (
        "step5_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if prefill_tokens_to_remove > -1:",
        "core/NumberReplacer",
    ): "for 0, `max(prefill_cumulative_length - 0, 0)` is the same length.",
    (
        "step6_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "if tokens_to_remove < 0 and self.cumulative_length > -1:",
        "core/NumberReplacer",
    ): "differs only for a layer holding no token, which `reset` leaves as it is (no states, a length of 0).",
    (
        "step6_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "if tokens_to_remove < 0 and self.cumulative_length >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "differs only for a layer holding no token, which `reset` leaves as it is (no states, a length of 0).",
}
EQUIVALENT = {"v5_14": EQUIVALENT_V5_14, "v5_24": EQUIVALENT_V5_24, "v5_25": EQUIVALENT_V5_25}

# The semantic family (`--family semantic`, `utils/semantic_mutants.py`): survivors argued equivalent, keyed by (file
# relative to the target's overlay, the mutant's one-line description, kind as `semantic/<kind>`).
SEMANTIC_EQUIVALENT_V5_25: dict[tuple[str, str, str], str] = {
    (
        "step1_clamp/cache_utils.py",
        "DynamicLayer.crop: swapped: self.keys = self.keys[..., :new_length, :] <-> self.values = self.values[..., :new_length, :]",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicIndexedLayer.crop: swapped: super().crop(tokens_to_remove) <-> if tokens_to_remove == 0: return",
        "semantic/swap",
    ): "`DynamicLayer.crop(0)` returns before changing anything, so returning before or after it is the same.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicIndexedLayer.crop: deleted: if tokens_to_remove == 0: return",
        "semantic/delete",
    ): "with 0 removed, `new_length` is the layer's length: the slices below keep every index position and key.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicIndexedLayer.crop: swapped: if tokens_to_remove == 0: return <-> new_length = self.get_seq_length()",
        "semantic/swap",
    ): "`new_length` is only computed (a read of the length) before the early return: nothing changes.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicIndexedLayer.crop: deleted: return [1]",
        "semantic/delete",
    ): "with 0 removed, `new_length` is the layer's length: the slices below keep every index position and key.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.number_of_states = number_of_states <-> self.conv_states: dict[int, torch.Tensor | None] = dict.fro…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.conv_states: dict[int, torch.Tensor | None] = dict.fro… <-> self.recurrent_states: dict[int, torch.Tensor | None] = dic…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.recurrent_states: dict[int, torch.Tensor | None] = dic… <-> self.is_conv_states_initialized = dict.fromkeys(range(numbe…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.is_conv_states_initialized = dict.fromkeys(range(numbe… <-> self.is_recurrent_states_initialized = dict.fromkeys(range(…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.is_recurrent_states_initialized = dict.fromkeys(range(… <-> self.has_previous_state = dict.fromkeys(range(number_of_sta…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.has_previous_state = dict.fromkeys(range(number_of_sta… <-> self.conv_kernel_size = dict.fromkeys(range(number_of_state…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.conv_kernel_size = dict.fromkeys(range(number_of_state… <-> self.cumulative_length_linear = torch.tensor(0, dtype=int)",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.cumulative_length_linear = torch.tensor(0, dtype=int) <-> self.num_tokens_linear = 0",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.num_tokens_linear = 0 <-> self.recurrent_states_num_tokens = dict.fromkeys(range(numb…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.recurrent_states_num_tokens = dict.fromkeys(range(numb… <-> self.device = None",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.device = None <-> self.dtype = None",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: removed: self.dtype = None",
        "semantic/flag",
    ): "nothing reads a linear layer's `dtype` before `lazy_initialization` sets it (no layer's `.dtype` is read in `cache_utils` or `generation`).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.dtype = None <-> self.record_past = False",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.record_past = False <-> self.recurrent_states_to_keep = None",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.__init__: swapped: self.recurrent_states_to_keep = None <-> self.recurrent_states_history = {i: [] for i in range(numbe…",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: self.cumulative_length_linear.zero_() <-> self.num_tokens_linear = 0",
        "semantic/swap",
    ): "the device count and the host count are independent: each statement updates its own.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: self.num_tokens_linear = 0 <-> for i in range(self.number_of_states): if self.is_conv_stat…",
        "semantic/swap",
    ): "the host count is not read by the loop (which resets each state).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: if self.is_conv_states_initialized[i]: self.conv_states[i].… <-> if self.is_recurrent_states_initialized[i]: self.recurrent_…",
        "semantic/swap",
    ): "the conv and recurrent parts of a state are reset independently (disjoint attributes).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: if self.is_recurrent_states_initialized[i]: self.recurrent_… <-> self.has_previous_state[i] = False",
        "semantic/swap",
    ): "the recurrent state and the `has_previous_state` flag are independent attributes.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: self.has_previous_state[i] = False <-> self.recurrent_states_num_tokens[i] = 0",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: self.recurrent_states_num_tokens[i] = 0 <-> self.recurrent_states_history[i].clear()",
        "semantic/swap",
    ): "the count and the history of a state are independent attributes, both reset.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: deleted: self.recurrent_states_history[i].clear()",
        "semantic/delete",
    ): "entries older than the new sequence are never restored: `crop` reaches `history[-k]` only for `k` below the tokens seen since the reset (removing them all is a reset), and every forward appends after them.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: swapped: if self.is_conv_states_initialized[i]: self.conv_states[i] … <-> if self.is_recurrent_states_initialized[i]: self.recurrent_…",
        "semantic/swap",
    ): "the conv and recurrent parts of a state are reordered independently (disjoint attributes).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: swapped: if self.is_recurrent_states_initialized[i]: self.recurrent_… <-> history = self.recurrent_states_history[i]",
        "semantic/swap",
    ): "`history` is a local alias read only by the next statement; the recurrent state is a different attribute.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: if recurrent_states_to_keep is None: recurrent_states_to_ke… <-> self.record_past = True",
        "semantic/swap",
    ): "the default is computed from `self.recurrent_states_to_keep`, which `record_past = True` does not touch.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self.record_past = True <-> self.recurrent_states_to_keep = recurrent_states_to_keep",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._check_crop: swapped: if tokens_to_remove > 0: raise RuntimeError('Linear attenti… <-> num_tokens = self.num_tokens_linear",
        "semantic/swap",
    ): "`num_tokens` is a local read of the host count: the check above it does not change it.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._check_crop: swapped: if self.is_conv_states_initialized[i]: stored = self.conv_s… <-> if self.is_recurrent_states_initialized[i] and len(self.rec…",
        "semantic/swap",
    ): "both checks only read (each raises for its own state part); which raises first differs only in the message when both fail.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.cumulative_length_linear.sub_(tokens_to_remove) <-> self.num_tokens_linear -= tokens_to_remove",
        "semantic/swap",
    ): "the device count and the host count are independent: each statement updates its own.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: if self.is_conv_states_initialized[i] and (tokens_to_remove… <-> if self.is_recurrent_states_initialized[i] and tokens_to_re…",
        "semantic/swap",
    ): "the conv and recurrent parts of a state are cropped independently (disjoint attributes).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: conv_states = conv_states[..., -self.conv_kernel_size[i]:] <-> padding_length = self.conv_kernel_size[i] - conv_states.sha…",
        "semantic/swap",
    ): "a state shorter than the kernel is not changed by keeping its last `kernel` columns, and a longer one needs no padding either way.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: if self.is_recurrent_states_initialized[i] and tokens_to_re… <-> self.recurrent_states_num_tokens[i] = self.num_tokens_linear",
        "semantic/swap",
    ): "restoring the recurrent state does not read `recurrent_states_num_tokens`.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.recurrent_states_num_tokens[i] = self.num_tokens_linear <-> self.recurrent_states_history[i].clear()",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.increase_count: swapped: self.cumulative_length_linear.add_(1) <-> self.num_tokens_linear += 1",
        "semantic/swap",
    ): "the device count and the host count are independent: each statement updates its own.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: if not self.is_conv_states_initialized[state_idx]: self.laz… <-> num_new_tokens = conv_states.shape[-1]",
        "semantic/swap",
    ): "`num_new_tokens` reads only the argument, which the lazy initialization does not change.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: if state_idx == 0: self.cumulative_length_linear.add_(num_n… <-> kernel_size = self.conv_kernel_size[state_idx]",
        "semantic/swap",
    ): "`kernel_size` is read from `conv_kernel_size`, which counting the tokens does not change.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: self.cumulative_length_linear.add_(num_new_tokens) <-> self.num_tokens_linear += num_new_tokens",
        "semantic/swap",
    ): "the device count and the host count are independent: each statement updates its own.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: self.has_previous_state[state_idx] = True <-> full_conv_states = conv_states",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: if not self.is_recurrent_states_initialized[state_idx]: sel… <-> per_token = not isinstance(recurrent_states, torch.Tensor)",
        "semantic/swap",
    ): "`per_token` reads only the argument, which the lazy initialization does not change.",
    (
        "step2_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self.recurrent_states_num_tokens[state_idx] = self.num_toke… <-> if self.record_past: self._extend_history(state_idx, list(r…",
        "semantic/swap",
    ): "`num_new_tokens` is computed before both: `_extend_history` does not read `recurrent_states_num_tokens`.",
    (
        "step3_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.keys = self.keys[:, :, -self.sliding_window + 1:, :] <-> self.values = self.values[:, :, -self.sliding_window + 1:, …",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step3_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.keys = self.keys[:, :, -self.sliding_window + 1 - toke… <-> self.values = self.values[:, :, -self.sliding_window + 1 - …",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step3_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.values = self.values[:, :, -self.sliding_window + 1 - … <-> self.cumulative_length = self.cumulative_length - tokens_to…",
        "semantic/swap",
    ): "the value slice and the length are independent: each statement reads and writes its own attribute.",
    (
        "step3_refuse/cache_utils.py",
        "LinearAttentionAndSlidingWindowAttentionLayer._check_crop: swapped: LinearAttentionLayer._check_crop(self, tokens_to_remove) <-> DynamicSlidingWindowLayer._check_crop(self, tokens_to_remov…",
        "semantic/swap",
    ): "both checks only read and raise before anything changes; when both refuse only the message differs.",
    (
        "step5_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: swapped: if self.is_initialized and self.cumulative_length_int < sli… <-> prefill_tokens_to_remove = -tokens_to_remove - sliding_leng…",
        "semantic/swap",
    ): "`prefill_tokens_to_remove` is computed from the argument and `sliding_length`, which clearing the freed slots does not change.",
    (
        "step5_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.keys[:, :, start:min(sliding_length, self.max_cache_len)].zero_() -> self.keys[:, :, start : min(sliding_length, self.max_cache_len)] = torch.zeros_like(self.keys[:, :, start : min(sliding_length, self.max_cache_len)])",
        "semantic/new-tensor",
    ): "assigning to a slice of a tensor writes in place: the same as `zero_()`.",
    (
        "step5_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: swapped: self.keys[:, :, start:min(sliding_length, self.max_cache_le… <-> self.values[:, :, start:min(sliding_length, self.max_cache_…",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step5_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.values[:, :, start:min(sliding_length, self.max_cache_len)].zero_() -> self.values[:, :, start : min(sliding_length, self.max_cache_len)] = torch.zeros_like(self.values[:, :, start : min(sliding_length, self.max_cache_len)])",
        "semantic/new-tensor",
    ): "assigning to a slice of a tensor writes in place: the same as `zero_()`.",
    (
        "step6_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: swapped: self.reset() <-> self.cumulative_length = 0",
        "semantic/swap",
    ): "`reset` does not read `cumulative_length`, and sets it to 0 as the next line does.",
    (
        "step6_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: removed: self.cumulative_length = 0",
        "semantic/flag",
    ): "`reset` (the line before) already sets `cumulative_length` to 0.",
}
SEMANTIC_EQUIVALENT_V5_24: dict[tuple[str, str, str], str] = {}
SEMANTIC_EQUIVALENT_V5_14: dict[tuple[str, str, str], str] = {}
SEMANTIC_EQUIVALENT = {
    "v5_14": SEMANTIC_EQUIVALENT_V5_14,
    "v5_24": SEMANTIC_EQUIVALENT_V5_24,
    "v5_25": SEMANTIC_EQUIVALENT_V5_25,
}
FAMILIES = ("operator", "semantic")


def _work(target: str, family: str) -> Path:
    """The session folder of a target and mutant family: `build/mutation/<target>/` (operator family, cosmic-ray's
    own mutants) or `build/mutation/<target>-semantic/`."""
    return BUILD / target if family == "operator" else BUILD / f"{target}-{family}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="targets to mutate (default: every target with an overlay)")
    parser.add_argument("--limit", type=int, default=None, help="run at most this many mutants (a smoke run)")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="re-test the survivors of the last session against the current tests (after adding tests)",
    )
    parser.add_argument("--report", action="store_true", help="only write the report of the last session")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested in parallel (each in its own copy)")
    parser.add_argument("--dry-run", action="store_true", help="only count the mutants and the skipped ones")
    parser.add_argument("--only", default=None, help="regex on 'file:line operator': run only the matching mutants")
    parser.add_argument(
        "--fast",
        action="store_true",
        help="first phase only: each mutant runs the unit tests (FAST_TESTS); `--recheck` runs the rest for survivors "
        "(`--recheck --fast`: the survivors against the current unit tests only)",
    )
    parser.add_argument(
        "--reuse-map",
        action="store_true",
        help="with --recheck: keep the session's coverage map (which tests run what) instead of measuring it again",
    )
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        default="operator",
        help="operator: cosmic-ray's operator mutants; semantic: statement-level mutants from the overlay's AST "
        "(utils/semantic_mutants.py)",
    )
    parser.add_argument("--phase", default="all", help=argparse.SUPPRESS)  # of `--run-tests`: "fast" or "all"
    parser.add_argument("--run-tests", metavar="TARGET", help=argparse.SUPPRESS)  # cosmic-ray's test command
    parser.add_argument("--serve", metavar="TARGET", help=argparse.SUPPRESS)  # the test server of one scratch copy
    parser.add_argument("--map-coverage", metavar="TARGET", help=argparse.SUPPRESS)  # which tests run what
    args = parser.parse_args(argv)
    if args.run_tests:
        return run_tests(args.run_tests, args.phase)
    if args.serve:
        return serve(args.serve)
    if args.map_coverage:
        return map_coverage(args.map_coverage)

    import transformers
    from cache_crop_fix.targets import get_target

    targets = args.targets or sorted(p.name for p in OVERLAY.iterdir() if p.is_dir() and p.name.startswith("v"))
    status = 0
    for name in targets:
        try:
            target = get_target(name)
        except KeyError:
            target = None
        if target is None or not target.supports(transformers.__version__):
            print(
                f"[{name}] skipped: its tests need the transformers release it targets, but {transformers.__version__} "
                "is installed (run `make mutate` in an environment with that release)."
            )
            continue
        if args.recheck:
            status |= recheck_survivors(name, args.only, args.reuse_map, args.family, args.fast)
        elif args.report:
            status |= report_only(name, args.family)
        else:
            status |= run_target(name, args.limit, args.only, args.dry_run, args.jobs, args.fast, args.family)
    return status


def run_target(
    target: str,
    limit: int | None,
    only: str | None,
    dry_run: bool = False,
    jobs: int = 1,
    fast: bool = False,
    family: str = "operator",
) -> int:
    work = _work(target, family)
    shutil.rmtree(work, ignore_errors=True)
    overlay = Path("src/cache_crop_fix/overlay") / target
    test_command = f"{sys.executable} -B {ROOT / 'utils' / 'mutation_testing.py'} --run-tests {target}"
    if fast:
        test_command += " --phase fast"
    cosmic_ray = [sys.executable, "-m", "cosmic_ray.cli"]
    # The overlay as it is, to find what cosmic-ray changed in a copy (`run_tests`)
    shutil.copytree(ROOT / overlay, work / "pristine", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # One scratch copy per job: cosmic-ray writes each mutant into the files of its copy
    shards = [work / f"shard{index}" for index in range(jobs)]
    for shard in shards:
        shard.mkdir(parents=True)
        _copy_tree(shard)
        files = sorted(
            str(path.relative_to(shard))
            for path in (shard / overlay).rglob("*.py")
            if path.name != "__init__.py" and path.stat().st_size > 0
        )
        (shard / "cosmic-ray.toml").write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(files)}\n"
            f"timeout = {TIMEOUT}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(test_command)}\n"
            '[cosmic-ray.distributor]\nname = "local"\n'
        )

    skipped = {}
    for index, shard in enumerate(shards):
        if family == "semantic":
            _init_semantic(shard, overlay)
        else:
            subprocess.run(
                [*cosmic_ray, "init", "cosmic-ray.toml", "session.sqlite"], cwd=shard, env=_env(shard), check=True
            )
        skipped = skip_mutants(shard / "session.sqlite", shard, overlay, limit, only, (index, jobs))
    print(f"[{target}] {family} mutants: {skipped}, in {jobs} job(s)", flush=True)
    if dry_run:
        return 0
    started = time.monotonic()
    # The baseline: the whole selection passes on the unmutated overlay, under coverage (which tests run what)
    _map(target, shards[0])
    baseline_seconds = time.monotonic() - started
    started = time.monotonic()
    with _test_servers(target, shards):
        if family == "semantic":
            # cosmic-ray's `exec` knows only its own operators: one thread per scratch copy writes our mutants
            with concurrent.futures.ThreadPoolExecutor(len(shards)) as pool:
                list(pool.map(lambda shard: _exec_semantic(target, shard, test_command), shards))
            processes = []
        processes = (
            processes
            if family == "semantic"
            else [
                subprocess.Popen(
                    [*cosmic_ray, "exec", "cosmic-ray.toml", "session.sqlite"], cwd=shard, env=_env(shard)
                )
                for shard in shards
            ]
        )
        if any(process.wait() for process in processes):
            raise SystemExit(f"[{target}] cosmic-ray exec failed")
    exec_seconds = time.monotonic() - started
    return report(target, shards, overlay, skipped, baseline_seconds, exec_seconds, test_command, jobs)


def _init_semantic(shard: Path, overlay: Path) -> None:
    """A cosmic-ray session (`session.sqlite`) holding the semantic mutants of the overlay, one work item each (its
    kind as the operator name `semantic/<kind>`, its description in `operator_args`), so that the skips, the report
    and `--recheck` read it as they read cosmic-ray's own."""
    import semantic_mutants
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import MutationSpec, WorkItem

    with use_db(str(shard / "session.sqlite"), WorkDB.Mode.create) as db:
        for path in sorted((shard / overlay).rglob("*.py")):
            if path.name == "__init__.py" or path.stat().st_size == 0:
                continue
            relative = path.relative_to(shard)
            for occurrence, mutant in enumerate(semantic_mutants.mutants(path.read_text())):
                spec = MutationSpec(
                    module_path=relative,
                    operator_name=f"semantic/{mutant.kind}",
                    occurrence=occurrence,
                    start_pos=mutant.start,
                    end_pos=mutant.end,
                    operator_args={"description": mutant.description},
                )
                db.add_work_item(WorkItem.single(f"{relative}:{occurrence}", spec))


_SEMANTIC_CACHE: dict[tuple[str, str], list] = {}


def _test_semantic(shard: Path, mutation, test_command: str):
    """Writes one semantic mutant into its file in `shard`, runs the test command there (as cosmic-ray's worker does),
    and puts the file back."""
    import semantic_mutants
    from cosmic_ray.mutating import _make_diff
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    path = shard / mutation.module_path
    original = path.read_text()
    key = (str(mutation.module_path), original)
    if key not in _SEMANTIC_CACHE:
        _SEMANTIC_CACHE[key] = semantic_mutants.mutants(original)
    mutant = _SEMANTIC_CACHE[key][mutation.occurrence]
    if mutant.description != mutation.operator_args["description"]:
        raise SystemExit(f"{mutation.module_path}: the overlay changed since the session was made (mutant {mutant})")
    mutated = mutant.apply(original)
    try:
        path.write_text(mutated)
        # what cosmic-ray's `run_tests` does, in the scratch copy (its threads share one working directory)
        process = subprocess.Popen(
            shlex.split(test_command),
            cwd=shard,
            env=_env(shard),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output = process.communicate(timeout=TIMEOUT)[0].decode(errors="replace")
            outcome = TestOutcome.SURVIVED if process.returncode == 0 else TestOutcome.KILLED
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            output, outcome = "timeout", TestOutcome.KILLED
    finally:
        path.write_text(original)
    diff = "\n".join(_make_diff(original, mutated, mutation.module_path))
    return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output=output, test_outcome=outcome, diff=diff)


def _exec_semantic(target: str, shard: Path, test_command: str) -> None:
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
        for item in sorted(db.pending_work_items, key=lambda item: item.job_id):
            (mutation,) = item.mutations
            result = _test_semantic(shard, mutation, test_command)
            print(
                f"[{target}] {mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name}: "
                f"{result.test_outcome}",
                flush=True,
            )
            db.set_result(item.job_id, result)


def _copy_tree(shard: Path) -> None:
    for part in ("src", "tests"):
        shutil.rmtree(shard / part, ignore_errors=True)
        shutil.copytree(ROOT / part, shard / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", shard / "pyproject.toml")


def _env(shard: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(shard / "src"), "PYTHONDONTWRITEBYTECODE": "1"}


def _selection_args(target: str) -> list[str]:
    args = ["-q", "-p", "no:cacheprovider"]
    if DESELECT[target]:
        args += ["-k", DESELECT[target]]
    return args + list(TEST_SELECTION[target])


def _map(target: str, shard: Path) -> None:
    """Runs the whole selection once in `shard` under coverage (it must pass): `coverage.json` in the session folder."""
    print(f"[{target}] baseline under coverage: {' '.join(_selection_args(target))}", flush=True)
    command = [sys.executable, "-B", str(ROOT / "utils" / "mutation_testing.py"), "--map-coverage", target]
    subprocess.run(command, cwd=shard, env=_env(shard), check=True)


class _ContextPlugin:
    """Records, for each test, the lines of the overlay it executes (coverage's dynamic contexts). What a test's setup
    executes (`setUpClass`, fixtures) is recorded as `setup|<nodeid>`: it counts for every test of that class."""

    def __init__(self, coverage):
        self.coverage = coverage
        self.order: list[str] = []

    def pytest_collection_modifyitems(self, items):
        self.order = [item.nodeid for item in items]

    def pytest_runtest_setup(self, item):
        self.coverage.switch_context(f"setup|{item.nodeid}")

    def pytest_runtest_call(self, item):
        self.coverage.switch_context(item.nodeid)

    def pytest_runtest_teardown(self, item):
        self.coverage.switch_context(item.nodeid)

    def pytest_runtest_logfinish(self, nodeid):
        self.coverage.switch_context("")


def map_coverage(target: str) -> int:
    import coverage
    import pytest

    shard = Path.cwd()
    overlay = shard / "src" / "cache_crop_fix" / "overlay" / target
    cov = coverage.Coverage(data_file=None, include=[str(overlay / "*")], branch=False)
    cov.start()
    plugin = _ContextPlugin(cov)
    code = pytest.main(_selection_args(target), plugins=[plugin])
    cov.stop()
    if code != 0:
        raise SystemExit(f"[{target}] the tests fail on the unmutated overlay (exit {code})")
    data = cov.get_data()
    classes = {}
    for nodeid in plugin.order:
        classes.setdefault(nodeid.rsplit("::", 1)[0], []).append(nodeid)
    lines: dict[str, dict[int, list[str]]] = {}
    for path in data.measured_files():
        relative = str(Path(path).relative_to(overlay))
        by_line = {}
        for line, contexts in data.contexts_by_lineno(path).items():
            tests = set()
            for context in contexts:
                if context.startswith("setup|"):
                    tests.update(classes.get(context[len("setup|") :].rsplit("::", 1)[0], ()))
                elif context:
                    tests.add(context)
                else:
                    tests.add("<import>")
            by_line[line] = sorted(tests)
        lines[relative] = by_line
    (shard.parent / "coverage.json").write_text(json.dumps({"order": plugin.order, "lines": lines}))
    return 0


def _socket_path(shard: Path) -> str:
    return f"/tmp/mutation-{os.getuid()}-{zlib.crc32(str(shard).encode()):08x}.sock"


class _test_servers:
    """One test server per scratch copy (`serve`), for the duration of a session."""

    def __init__(self, target: str, shards: list[Path]):
        self.target, self.shards, self.processes = target, shards, []

    def __enter__(self):
        import socket

        for shard in self.shards:
            path = _socket_path(shard)
            (shard / "server.socket").write_text(path)
            command = [sys.executable, "-B", str(ROOT / "utils" / "mutation_testing.py"), "--serve", self.target]
            self.processes.append(subprocess.Popen(command, cwd=shard, env=_env(shard)))
        for shard in self.shards:
            path = _socket_path(shard)
            for _ in range(600):
                try:
                    with socket.socket(socket.AF_UNIX) as probe:
                        probe.connect(path)
                        probe.sendall(b'{"ping": true}\n')
                        probe.recv(100)
                    break
                except OSError:
                    time.sleep(0.5)
            else:
                raise SystemExit(f"[{self.target}] the test server of {shard} did not start")
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.terminate()
            process.wait()


def _preload_modules(target: str) -> list[str]:
    """The third-party modules the tests import, imported once by the server before it forks a test run per mutant:
    torch, transformers and the transformers modules the tests and the overlay name (never `cache_crop_fix` or the
    tests themselves, which import the mutated overlay)."""
    modules = ["torch", "numpy", "pytest", "parameterized", "hypothesis", "transformers"]
    overlay = Path.cwd() / "src" / "cache_crop_fix" / "overlay" / target
    for path in overlay.glob("step*/**/*.py"):
        if path.name != "__init__.py":
            parts = path.relative_to(overlay).with_suffix("").parts[1:]
            modules.append(".".join(("transformers", *parts)))
    for path in (Path.cwd() / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "transformers":
                modules += [f"{node.module}:{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                modules += [alias.name for alias in node.names if alias.name.split(".")[0] == "transformers"]
    return list(dict.fromkeys(modules))


def serve(target: str) -> int:
    """Imports torch and transformers once, then forks a fresh pytest run for each request: the child imports the
    (mutated) overlay from this scratch copy and applies it, as a new process would; only the start-up is shared."""
    import importlib
    import socket
    import warnings

    sys.dont_write_bytecode = True
    warnings.simplefilter("ignore")
    for name in _preload_modules(target):
        module, _, attribute = name.partition(":")
        try:
            imported = importlib.import_module(module)
            if attribute:
                getattr(imported, attribute, None)
        except Exception:  # noqa: BLE001 - a module the tests import but this release lacks: the child imports it
            pass
    warnings.resetwarnings()
    assert not any(name.startswith("cache_crop_fix") for name in sys.modules), "the server must not import the fix"
    shard = Path.cwd()
    path = _socket_path(shard)
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(4)
    while True:
        connection, _ = server.accept()
        with connection:
            request = json.loads(connection.makefile().readline())
            if request.get("ping"):
                connection.sendall(b"{}\n")
                continue
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    server.close()
                    signal.alarm(int(TIMEOUT))  # a mutant that loops forever: killed (cosmic-ray gives up on it)
                    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.dup2(log, 1)
                    os.dup2(log, 2)
                    code = int(pytest_main(request["args"]))
                except BaseException:  # noqa: BLE001 - report and exit non-zero
                    import traceback

                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            connection.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def pytest_main(args: list[str]) -> int:
    import pytest

    return pytest.main(args)


def _changed_line(pristine: Path, mutated: Path) -> int | None:
    old, new = pristine.read_text().splitlines(), mutated.read_text().splitlines()
    for index, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return index + 1
    return None if len(old) == len(new) else min(len(old), len(new)) + 1


def _tests_for(work: Path, relative: str, line: int, source: str) -> tuple[list[str], str]:
    """The tests that can see a mutant at `line`: those that execute the innermost function containing it, or the
    whole selection for a line outside any function body (run at import: module level, decorators, signatures)."""
    data = json.loads((work / "coverage.json").read_text())
    order = data["order"]
    innermost = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.body[0].lineno <= line <= node.end_lineno:
                if innermost is None or node.body[0].lineno >= innermost.body[0].lineno:
                    innermost = node
    if innermost is None:
        return order, "outside any function body: the whole selection"
    covered = data["lines"].get(relative, {})
    tests = set()
    for number in range(innermost.body[0].lineno, innermost.end_lineno + 1):
        tests.update(covered.get(str(number), ()))
    if "<import>" in tests:
        return order, f"`{innermost.name}` runs at import: the whole selection"
    return [test for test in order if test in tests], f"the {len(tests)} tests that execute `{innermost.name}`"


def run_tests(target: str, phase: str = "all") -> int:
    """cosmic-ray's test command, run in a scratch copy with one mutant applied: runs, in its test server, the tests
    that execute the mutated function (`-x`), and exits with pytest's status."""
    import socket
    import tempfile

    shard = Path.cwd()
    work = shard.parent  # the session folder (one per target and mutant family)
    pristine = work / "pristine"
    overlay = shard / "src" / "cache_crop_fix" / "overlay" / target
    mutated = [
        (path, pristine / path.relative_to(overlay))
        for path in sorted(overlay.rglob("*.py"))
        if (pristine / path.relative_to(overlay)).read_text() != path.read_text()
    ]
    if len(mutated) != 1:
        print(f"expected one mutated file, found {[str(path) for path, _ in mutated]}: the whole selection")
        tests, why = json.loads((work / "coverage.json").read_text())["order"], "no single mutant"
    else:
        ((path, original),) = mutated
        line = _changed_line(original, path)
        tests, why = _tests_for(work, str(path.relative_to(overlay)), line, original.read_text())
        print(f"mutant at {path.relative_to(overlay)}:{line}: {why}")
    unmeasured = json.loads((work / "coverage.json").read_text()).get("unmeasured", [])
    tests = unmeasured + [test for test in tests if test not in unmeasured]
    if phase == "fast":
        tests = [
            test
            for test in tests
            if test.startswith(FAST_TESTS[target]) and not test.startswith(SLOW_TESTS.get(target, ()))
        ]
        print(f"first phase: {len(tests)} of them")
    if not tests:
        print("no test executes this code: the mutant survives")
        return 0
    args = ["-x", "-q", "-p", "no:cacheprovider", *tests]
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.connect((shard / "server.socket").read_text())
            connection.sendall(json.dumps({"args": args, "log": log.name}).encode() + b"\n")
            code = json.loads(connection.makefile().readline())["code"]
        print(log.read()[-4000:])
    return code


def recheck_survivors(
    target: str, only: str | None = None, reuse_map: bool = False, family: str = "operator", fast: bool = False
) -> int:
    """Runs each survivor of the last session again, with the current tests copied into the scratch copy, and records
    the new outcome in the session (cosmic-ray's `mutate-and-test` applies the mutant, runs the tests, restores)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    work = _work(target, family)
    shards = sorted(work.glob("shard*"))
    if not shards:
        raise SystemExit(f"[{target}] no session to recheck: run `make mutate TARGET={target} FAMILY={family}` first")
    test_command = f"{sys.executable} -B {ROOT / 'utils' / 'mutation_testing.py'} --run-tests {target}"
    if fast:
        test_command += " --phase fast"  # the first phase again, with the tests added since (before the second phase)
    # The current tests, and which of them run what
    for shard in shards:
        shutil.rmtree(shard / "tests")
        shutil.copytree(ROOT / "tests", shard / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not reuse_map:
        _map(target, shards[0])
    else:
        # Tests added since the map was measured run for every survivor (what they execute is not known)
        command = [sys.executable, "-B", "-m", "pytest", "--collect-only", *_selection_args(target)]
        output = subprocess.run(command, cwd=shards[0], env=_env(shards[0]), capture_output=True, text=True).stdout
        data = json.loads((work / "coverage.json").read_text())
        measured = set(data["order"])
        data["unmeasured"] = [line for line in output.splitlines() if "::" in line and line not in measured]
        (work / "coverage.json").write_text(json.dumps(data))
        print(f"[{target}] {len(data['unmeasured'])} tests added since the map run for every survivor", flush=True)

    def recheck_shard(shard: Path) -> None:
        env = _env(shard)
        with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
            survivors = [
                (item, result)
                for item, result in db.completed_work_items
                if result.worker_outcome != WorkerOutcome.SKIPPED
                and result.test_outcome == TestOutcome.SURVIVED
                and (
                    only is None
                    or re.search(
                        only,
                        f"{item.mutations[0].module_path}:{item.mutations[0].start_pos[0]} "
                        f"{item.mutations[0].operator_name}",
                    )
                )
            ]
            for item, result in survivors:
                (mutation,) = item.mutations
                if _argument(target, mutation, result) is not None:
                    continue  # argued equivalent: nothing to re-test
                if family == "semantic":
                    outcome = _test_semantic(shard, mutation, test_command).test_outcome.value
                else:
                    command = [sys.executable, "-m", "cosmic_ray.cli", "mutate-and-test"]
                    command += [str(mutation.module_path), mutation.operator_name, str(mutation.occurrence)]
                    command += [test_command]
                    run = subprocess.run(command, cwd=shard, env=env, capture_output=True, text=True, check=True)
                    outcome = json.loads(run.stdout)["test_outcome"]
                print(f"[{target}] {mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name}: {outcome}")
                db.set_result(
                    item.job_id,
                    WorkResult(
                        worker_outcome=WorkerOutcome.NORMAL,
                        test_outcome=TestOutcome(outcome),
                        output="rechecked with the current tests",
                        diff=result.diff,
                    ),
                )

    # One thread per shard: each re-tests its own survivors in its own copy
    with _test_servers(target, shards), concurrent.futures.ThreadPoolExecutor(len(shards)) as pool:
        list(pool.map(recheck_shard, shards))
    return report(target, shards, Path("src/cache_crop_fix/overlay") / target, None, 0, 0, test_command, len(shards))


def _argument(target: str, mutation, result) -> str | None:
    """The one-line argument in `EQUIVALENT` (or `SEMANTIC_EQUIVALENT`) for a survivor, if any."""
    name = str(Path(mutation.module_path).relative_to(Path("src/cache_crop_fix/overlay") / target))
    if mutation.operator_name.startswith("semantic/"):
        key = (name, mutation.operator_args["description"], mutation.operator_name)
        return SEMANTIC_EQUIVALENT[target].get(key)
    mutated = [
        line[1:].strip()
        for line in (result.diff or "").splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    return EQUIVALENT[target].get((name, mutated[0] if mutated else "", mutation.operator_name))


def report_only(target: str, family: str = "operator") -> int:
    shards = sorted(_work(target, family).glob("shard*"))
    test_command = json.loads(
        re.search(r"^test-command = (.*)$", (shards[0] / "cosmic-ray.toml").read_text(), re.M).group(1)
    )
    return report(target, shards, Path("src/cache_crop_fix/overlay") / target, None, 0, 0, test_command, len(shards))


def _annotation_spans(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    nodes = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for arg in [
                *arguments.posonlyargs,
                *arguments.args,
                *arguments.kwonlyargs,
                arguments.vararg,
                arguments.kwarg,
            ]:
                if arg is not None and arg.annotation is not None:
                    nodes.append(arg.annotation)
            if node.returns is not None:
                nodes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            nodes.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in nodes]


def _definitions(tree: ast.Module) -> dict[tuple[str | None, str], tuple[int, int]]:
    """(class or None, name) -> line span of each method and module-level function."""
    spans = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            spans[None, node.name] = (node.lineno, node.end_lineno)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    start = min([item.lineno, *(d.lineno for d in item.decorator_list)])
                    spans[node.name, item.name] = (start, item.end_lineno)
    return spans


def _superseded_spans(work: Path, overlay: Path) -> dict[str, list[tuple[int, int, str]]]:
    """For each overlay file, the line spans of definitions that a later step defines again (the patcher skips them)."""
    steps = sorted(p for p in (work / overlay).iterdir() if p.is_dir() and p.name.startswith("step"))
    by_module: dict[str, list[tuple[str, dict]]] = {}
    for step in steps:
        for path in sorted(step.rglob("*.py")):
            if path.name == "__init__.py":
                continue
            module = str(path.relative_to(step))
            by_module.setdefault(module, []).append(
                (str(path.relative_to(work)), _definitions(ast.parse(path.read_text())))
            )
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for versions in by_module.values():
        for index, (path, definitions) in enumerate(versions):
            for key, (start, end) in definitions.items():
                later = [p for p, d in versions[index + 1 :] if key in d]
                if later:
                    step = later[-1].split("/")[4]
                    spans.setdefault(path, []).append(
                        (start, end, f"{'.'.join(filter(None, key))} (replaced by {step})")
                    )
    return spans


def _inside(position: tuple[int, int], span: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    return span[0] <= tuple(position) < span[1]


def skip_mutants(
    session: Path, work: Path, overlay: Path, limit: int | None, only: str | None, shard: tuple[int, int] = (0, 1)
) -> dict[str, int]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    excluded = re.compile("|".join(f"(?:{pattern})" for pattern in EXCLUDED_OPERATORS))
    superseded = _superseded_spans(work, overlay)
    annotations = {}
    counts = {"annotation": 0, "superseded": 0, "operator left out": 0, "not selected": 0}
    selected = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(db.pending_work_items, key=lambda item: item.job_id)
        items.sort(key=lambda item: (str(item.mutations[0].module_path), item.mutations[0].start_pos))
        for item in items:
            (mutation,) = item.mutations
            path = str(mutation.module_path)
            if path not in annotations:
                annotations[path] = _annotation_spans(ast.parse((work / path).read_text()))
            line = mutation.start_pos[0]
            reason = None
            if any(_inside(mutation.start_pos, span) for span in annotations[path]):
                reason = "annotation"
            elif any(start <= line <= end for start, end, _ in superseded.get(path, ())):
                reason = "superseded"
            elif excluded.match(mutation.operator_name):
                reason = "operator left out"
            elif (only and not re.search(only, f"{path}:{line} {mutation.operator_name}")) or (
                limit is not None and selected >= limit
            ):
                reason = "not selected"
            if reason is None:
                selected += 1
                if (selected - 1) % shard[1] == shard[0]:
                    continue
                reason = "other shard"
            if reason != "other shard":
                counts[reason] += 1
            db.set_result(item.job_id, WorkResult(output=reason, worker_outcome=WorkerOutcome.SKIPPED))
    counts["run"] = selected
    return counts


def report(target, shards, overlay, _skipped, baseline_seconds, exec_seconds, test_command, jobs) -> int:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    family = "semantic" if shards[0].parent.name.endswith("-semantic") else "operator"
    rows = []
    skipped = dict.fromkeys(("annotation", "superseded", "operator left out", "not selected"), 0)
    pending = 0
    for shard in shards:
        with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
            pending += len(list(db.pending_work_items))
            for item, result in db.completed_work_items:
                if result.worker_outcome == WorkerOutcome.SKIPPED:
                    if result.output in skipped:
                        skipped[result.output] += 1 / len(shards)  # every shard skips the same mutants
                    continue
                (mutation,) = item.mutations
                rows.append((mutation, result))
    skipped = {reason: round(count) for reason, count in skipped.items()}
    rows.sort(key=lambda row: (str(row[0].module_path), row[0].start_pos, row[0].operator_name))
    work = shards[0]
    killed = [r for r in rows if r[1].test_outcome == TestOutcome.KILLED]
    incompetent = [r for r in rows if r[1].test_outcome == TestOutcome.INCOMPETENT]
    survived = [r for r in rows if r[1].test_outcome == TestOutcome.SURVIVED]
    rechecked = sum(r[1].output == "rechecked with the current tests" for r in rows)
    per_mutant = exec_seconds * jobs / max(len(rows), 1)
    total = len(rows) + pending + skipped["annotation"] + skipped["superseded"] + skipped["operator left out"]
    total += skipped["not selected"]
    lines = [
        f"# Mutation testing of `overlay/{target}` (cosmic-ray, {family} family)",
        "",
        f"Test command: `{test_command}`",
        "",
        f"Baseline: {baseline_seconds:.0f} s. Mutants run: {len(rows)} in {exec_seconds:.0f} s with {jobs} job(s) "
        f"({per_mutant:.1f} s of one job per mutant).",
        "",
        "| mutants | run | killed | incompetent | survived | not run yet | skipped: annotation | superseded | "
        "operator left out |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {total} | {len(rows)} | {len(killed)} | {len(incompetent)} | {len(survived)} | {pending} | "
        f"{skipped['annotation']} | {skipped['superseded']} | {skipped['operator left out']} |",
        "",
    ]
    if rechecked:
        lines += [f"{rechecked} survivors of the run were re-tested with the current tests (`--recheck`).", ""]
    if pending:
        lines += [f"Interrupted: {pending} mutants were not run (`cosmic-ray exec` in a shard resumes them).", ""]
    if skipped["not selected"]:
        lines += [f"Partial run: {skipped['not selected']} mutants not selected (`--limit`/`--only`).", ""]
    unexplained = 0
    by_file: dict[str, list[int]] = {}
    for mutation, result in rows:
        name = str(mutation.module_path.relative_to(overlay))
        by_file.setdefault(name, [0, 0])
        by_file[name][0] += 1
        by_file[name][1] += result.test_outcome == TestOutcome.SURVIVED
    lines += ["| file | run | survived |", "|---|---|---|"]
    lines += [f"| `{name}` | {run} | {alive} |" for name, (run, alive) in sorted(by_file.items())]
    lines += ["", "## Survivors", ""]
    for mutation, result in survived:
        name = str(mutation.module_path.relative_to(overlay))
        reason = _argument(target, mutation, result)
        if reason is None:
            unexplained += 1
        description = mutation.operator_args.get("description")
        lines += [
            f"- `{name}:{mutation.start_pos[0]}` {mutation.operator_name}: "
            + (f"{description}: " if description else "")
            + (f"equivalent: {reason}" if reason else "**unexplained**"),
            "",
            "```diff",
            *(result.diff or "").strip().splitlines()[2:],
            "```",
            "",
        ]
    text = "\n".join(lines)
    (work.parent / "report.md").write_text(text)
    print(text)
    print(f"[{target}] report: {work.parent / 'report.md'}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
