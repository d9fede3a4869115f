"""The surviving mutants of the 5.24 overlay (`overlay/v5_24`) argued equivalent (see `__init__.py`)."""

OPERATOR: dict[tuple[str, str, str], str] = {
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

SEMANTIC: dict[tuple[str, str, str], str] = {}
