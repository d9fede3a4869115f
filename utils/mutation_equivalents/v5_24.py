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
    (
        "step2_atomic/cache_utils.py",
        "if type(tokens_to_remove) is int and tokens_to_remove < 0:",
        "core/ReplaceComparisonOperator_LtE_Lt",
    ): "`crop(0)` then takes `_get_number_of_tokens_to_remove(0)`, which returns the same 0 for a plain int.",
    (
        "step2_atomic/cache_utils.py",
        "if type(tokens_to_remove) is int and tokens_to_remove <= -1:",
        "core/NumberReplacer",
    ): "`crop(0)` then takes `_get_number_of_tokens_to_remove(0)`, which returns the same 0 for a plain int.",
    (
        "step2_atomic/cache_utils.py",
        "stop = -number_of_tokens if number_of_tokens < 2**62 else -(2** 61)",
        "core/NumberReplacer",
    ): "a stop of `-(2**61)` or `-(2**62)` is before the first token of any tensor: the same empty slice, and neither is truncated (with a warning) by torch.",
    (
        "step2_atomic/cache_utils.py",
        "stop = -number_of_tokens if number_of_tokens <= 2**62 else -(2**62)",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "at `number_of_tokens == 2**62` both branches give the stop `-(2**62)`.",
    (
        "step2_atomic/cache_utils.py",
        "device = on_device[ -1].device",
        "core/NumberReplacer",
    ): "the lengths are gathered on the device of any one of them before `tolist` copies them to the host: the same numbers whichever device is taken.",
    (
        "step2_atomic/cache_utils.py",
        "stop = -number_of_tokens if number_of_tokens < 2** 61 else -(2**62)",
        "core/NumberReplacer",
    ): "between `2**61` and `2**62` tokens the stop `-(2**62)` replaces `-number_of_tokens`: both are before the first token of any tensor and fit in int64, so the same empty slice.",
}

SEMANTIC: dict[tuple[str, str, str], str] = {
    (
        "step1_clamp/cache_utils.py",
        "_get_number_of_tokens_to_remove: deleted: if type(tokens_to_remove) is int and tokens_to_remove <= 0: return -tokens_to_remove",
        "semantic/delete",
    ): "the fast path returns `-tokens_to_remove` for a plain int `<= 0`; without it, the general path below returns the same number (`operator.index` of an int is the int).",
    (
        "step1_clamp/cache_utils.py",
        "_get_number_of_tokens_to_remove: swapped: if type(tokens_to_remove) is int and tokens_to_remove <= 0:… <-> value = tokens_to_remove",
        "semantic/swap",
    ): "`value = tokens_to_remove` is only a local alias read after the fast path: assigning it before the fast path's return changes nothing.",
    (
        "step1_clamp/cache_utils.py",
        "_get_number_of_tokens_to_remove: deleted: return -tokens_to_remove",
        "semantic/delete",
    ): "without the fast path's `return`, a plain int `<= 0` takes the general path below, which returns the same `-tokens_to_remove`.",
    (
        "step1_clamp/cache_utils.py",
        "_get_number_of_tokens_to_remove: swapped: is_bool = isinstance(value, bool) or (isinstance(value, tor… <-> is_tensor_with_dims = isinstance(value, torch.Tensor) and v…",
        "semantic/swap",
    ): "two local flags computed from `value` alone (`isinstance`, `dtype`, `dim`): neither reads what the other writes.",
    (
        "step1_clamp/cache_utils.py",
        "_get_number_of_tokens_to_remove: swapped: is_tensor_with_dims = isinstance(value, torch.Tensor) and v… <-> number = None",
        "semantic/swap",
    ): "`is_tensor_with_dims` and `number = None` are independent locals: neither reads what the other writes.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicLayer.crop: swapped: self.keys = self.keys.narrow(-2, 0, new_length) <-> self.values = self.values.narrow(-2, 0, new_length)",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self._check_crop(-number_of_tokens) <-> if not self.is_initialized or self.cumulative_length == 0: …",
        "semantic/swap",
    ): "`_check_crop` of a layer that holds no token (every subclass's: sliding, hybrid sliding, DeepSeek-V4, UnlimitedOcr) never refuses (any removal is a full rollback of 0 tokens), so checking after the early return is the same.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: if not self.is_initialized or self.cumulative_length == 0: … <-> seq_length = self.cumulative_length",
        "semantic/swap",
    ): "`seq_length = self.cumulative_length` is a local read: computing it before the early return changes nothing.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.keys = self.keys.narrow(-2, start, end - start) <-> self.values = self.values.narrow(-2, start, end - start)",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.values = self.values.narrow(-2, start, end - start) <-> self.cumulative_length = new_length",
        "semantic/swap",
    ): "the value slice reads `start`/`end` (locals), not `cumulative_length`: the two assignments are independent.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicIndexedLayer.crop: swapped: if self.indexer_position_ids is not None: self.indexer_posi… <-> if self.is_indexer_initialized: self.indexer_keys = self.in…",
        "semantic/swap",
    ): "the indexer positions and the indexer keys are sliced independently (each reads `new_length` and its own attribute).",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: deleted: layer._check_crop(-number_of_tokens)",
        "semantic/delete",
    ): "the attention part's `crop` (`DynamicLayer`, `DynamicSlidingWindowLayer`, `StaticLayer`, `StaticSlidingWindowLayer`) calls `self._check_crop` first, which is the hybrid layer's whole check, before anything changes.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: swapped: for layer in layers_to_crop: layer.crop(-number_of_tokens) <-> for layer in layers_to_reset: layer.reset()",
        "semantic/swap",
    ): "`layers_to_crop` and `layers_to_reset` are disjoint lists of distinct layers: cropping the ones and resetting the others commute.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: swapped: if type(tokens_to_remove) is int and tokens_to_remove <= 0:… <-> layers = self.layers",
        "semantic/swap",
    ): "`layers = self.layers` is a local read: it commutes with the argument's conversion.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: deleted: for layer in layers: if type(layer) is not DynamicLayer: break else: stop = -number_of_to…",
        "semantic/delete",
    ): "without the fast path, a cache of plain `DynamicLayer`s takes the general path: no layer checks anything (`DynamicLayer` is skipped) and each `DynamicLayer.crop` cuts the same tokens (clamped at 0, as the capped `stop`), and returns for layers holding none.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: swapped: for layer in layers: if type(layer) is not DynamicLayer: br… <-> layers_to_crop, layers_to_reset = (layers, [])",
        "semantic/swap",
    ): "`layers_to_crop, layers_to_reset = layers, []` only binds locals, which the fast path neither reads nor writes.",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: layer._check_crop(-number_of_tokens) moved past is_full_rollback = _is_full_rollback_of_layer(layer, number…",
        "semantic/check-moved",
    ): "`_is_full_rollback_of_layer` only reads the layer's length: reading it before the check changes nothing.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: swapped: layer.keys = layer.keys[..., :stop, :] <-> layer.values = layer.values[..., :stop, :]",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicLayer.crop: self._check_crop(-number_of_tokens) moved past if number_of_tokens == 0 or not self.is_initialized or self…",
        "semantic/check-moved",
    ): "every transformers class whose `crop` reaches `DynamicLayer.crop` has the no-op `_check_crop` of `CacheLayerMixin` (`DynamicLayer`, `DynamicIndexedLayer`, MiniMax-M3-VL's sparse layer) or checked itself before (`_crop_hybrid`), so checking after the early return is the same.",
    (
        "step1_clamp/cache_utils.py",
        "DynamicLayer.crop: deleted: self._check_crop(-number_of_tokens)",
        "semantic/delete",
    ): "every transformers class whose `crop` reaches `DynamicLayer.crop` has the no-op `_check_crop` of `CacheLayerMixin` (`DynamicLayer`, `DynamicIndexedLayer`, MiniMax-M3-VL's sparse layer) or checked itself before (`_crop_hybrid`): the check is never the one that refuses.",
    (
        "step3_static/cache_utils.py",
        "StaticLayer.crop: self._check_crop(-number_of_tokens) moved past self.cumulative_length.sub_(min(number_of_tokens, self.max_…",
        "semantic/check-moved",
    ): "every transformers class whose `crop` reaches `StaticLayer.crop` has the no-op `_check_crop` of `CacheLayerMixin` (`StaticLayer`, `StaticIndexedLayer`, MiniMax-M3-VL's sparse static layer) or checked itself before (`_crop_hybrid`), so checking after the move is the same.",
    (
        "step3_static/cache_utils.py",
        "StaticLayer.crop: deleted: self._check_crop(-number_of_tokens)",
        "semantic/delete",
    ): "every transformers class whose `crop` reaches `StaticLayer.crop` has the no-op `_check_crop` of `CacheLayerMixin` (`StaticLayer`, `StaticIndexedLayer`, MiniMax-M3-VL's sparse static layer) or checked itself before (`_crop_hybrid`): the check is never the one that refuses.",
    (
        "step3_static/cache_utils.py",
        "StaticLayer.crop: swapped: self._check_crop(-number_of_tokens) <-> if number_of_tokens == 0 or not self.is_initialized: return",
        "semantic/swap",
    ): "every transformers class whose `crop` reaches `StaticLayer.crop` has the no-op `_check_crop` of `CacheLayerMixin` or checked itself before (`_crop_hybrid`), so skipping it on the early return changes nothing.",
    (
        "step3_static/cache_utils.py",
        "StaticLayer.crop: deleted: if number_of_tokens == 0 or not self.is_initialized: return",
        "semantic/delete",
    ): "removing 0 tokens subtracts 0, and a layer never updated has `cumulative_length` 0 (a tensor from `__init__`), which `sub_(...).clamp_(min=0)` leaves at 0 in place.",
    (
        "step3_static/cache_utils.py",
        "StaticLayer.crop: swapped: if number_of_tokens == 0 or not self.is_initialized: return <-> self.cumulative_length.sub_(min(number_of_tokens, self.max_…",
        "semantic/swap",
    ): "removing 0 tokens subtracts 0, and a layer never updated has `cumulative_length` 0 (a tensor from `__init__`), which `sub_(...).clamp_(min=0)` leaves at 0 in place: moving the write position before the early return is the same.",
    (
        "step3_static/cache_utils.py",
        "StaticLayer.crop: deleted: return",
        "semantic/delete",
    ): "removing 0 tokens subtracts 0, and a layer never updated has `cumulative_length` 0 (a tensor from `__init__`), which `sub_(...).clamp_(min=0)` leaves at 0 in place.",
    (
        "step3_static/cache_utils.py",
        "StaticSlidingWindowLayer.crop: swapped: self._check_crop(-number_of_tokens) <-> seq_length = self.cumulative_length_int",
        "semantic/swap",
    ): "`seq_length = self.cumulative_length_int` is a local read: reading it before the check changes nothing.",
    (
        "step3_static/cache_utils.py",
        "StaticSlidingWindowLayer.crop: swapped: self.cumulative_length.fill_(new_length) <-> self.cumulative_length_int = new_length",
        "semantic/swap",
    ): "the device counter and the host counter are set independently to the same `new_length`.",
    (
        "step3_static/cache_utils.py",
        "StaticIndexedLayer.crop: swapped: super().crop(tokens_to_remove) <-> number_of_tokens = _get_number_of_tokens_to_remove(tokens_t…",
        "semantic/swap",
    ): "`_get_number_of_tokens_to_remove` is a pure validation: calling it before `super().crop` raises the same error for the same argument, or returns the same number.",
    (
        "step3_static/cache_utils.py",
        "StaticIndexedLayer.crop: deleted: if number_of_tokens == 0: return",
        "semantic/delete",
    ): "with 0 removed, the positions are sliced to their own length (the same values) and the indexer position is clamped to the key position it never passes between two forwards: nothing changes.",
    (
        "step3_static/cache_utils.py",
        "StaticIndexedLayer.crop: swapped: if number_of_tokens == 0: return <-> if self.indexer_position_ids is not None: kept_positions = …",
        "semantic/swap",
    ): "with 0 removed, the positions are sliced to their own length (the same values) before the return: nothing changes.",
    (
        "step3_static/cache_utils.py",
        "StaticIndexedLayer.crop: deleted: return",
        "semantic/delete",
    ): "with 0 removed, the positions are sliced to their own length (the same values) and the indexer position is clamped to the key position it never passes between two forwards: nothing changes.",
    (
        "step3_static/cache_utils.py",
        "StaticIndexedLayer.crop: swapped: if self.indexer_position_ids is not None: kept_positions = … <-> if self.is_indexer_initialized: self.indexer_cumulative_len…",
        "semantic/swap",
    ): "the indexer positions and the indexer write position are updated independently (each reads `number_of_tokens` or `cumulative_length`, and its own attribute).",
    (
        "step4_quantized/cache_utils.py",
        "BaseQuantizedLayer.crop: in number_of_tokens >= self.cumulative_length: self.cumulative_length -> self.cumulative_length - 1",
        "semantic/off-by-one",
    ): "`BaseQuantizedLayer.crop` is reached with `cumulative_length - 1` tokens only through `BaseQuantizedLayer._check_crop`, which refuses every count strictly between 0 and `cumulative_length` (`QuantizedLayer` and `Fp8QuantizedLayer` call it only for 0 or at least every token).",
    (
        "step4_quantized/cache_utils.py",
        "QuantizedLayer._check_crop: swapped: residual_length = self.keys.shape[-2] if self.is_initialize… <-> number_of_tokens = -tokens_to_remove",
        "semantic/swap",
    ): "two locals computed from the layer and the argument: neither reads what the other writes.",
    (
        "step4_quantized/cache_utils.py",
        "QuantizedLayer.crop: self._check_crop(-number_of_tokens) moved past if number_of_tokens == 0 or number_of_tokens >= self.cumula…",
        "semantic/check-moved",
    ): "the check never refuses 0 or at least every token (the only counts that take the early branch), and `BaseQuantizedLayer.crop` checks again there.",
    (
        "step4_quantized/cache_utils.py",
        "QuantizedLayer.crop: swapped: self.keys = self.keys[..., :-number_of_tokens, :] <-> self.values = self.values[..., :-number_of_tokens, :]",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step4_quantized/cache_utils.py",
        "QuantizedLayer.crop: swapped: self.values = self.values[..., :-number_of_tokens, :] <-> self.cumulative_length -= number_of_tokens",
        "semantic/swap",
    ): "the value slice and the count update are independent (the slice reads `number_of_tokens`, a local).",
    (
        "step4_quantized/cache_utils.py",
        "Fp8QuantizedLayer.crop: swapped: quantized_values, value_scale = self._quantized_values <-> self._quantized_keys = (quantized_keys[..., :-number_of_tok…",
        "semantic/swap",
    ): "unpacking the value states and slicing the key states are independent.",
    (
        "step4_quantized/cache_utils.py",
        "Fp8QuantizedLayer.crop: swapped: self._quantized_keys = (quantized_keys[..., :-number_of_tok… <-> self._quantized_values = (quantized_values[..., :-number_of…",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step4_quantized/cache_utils.py",
        "Fp8QuantizedLayer.crop: swapped: self._quantized_values = (quantized_values[..., :-number_of… <-> self.cumulative_length -= number_of_tokens",
        "semantic/swap",
    ): "the value slice and the count update are independent (the slice reads `number_of_tokens`, a local).",
    (
        "step4_quantized/cache_utils.py",
        "BaseQuantizedLayer.crop: self._check_crop(-number_of_tokens) moved past if number_of_tokens > 0 and number_of_tokens >= self.cumula…",
        "semantic/check-moved",
    ): "the check never refuses 0 or at least every token (the counts that reset), and for the others it raises before anything changes either way.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache._check_crop: swapped: DynamicSlidingWindowLayer._check_crop(self, tokens_to_remov… <-> number_of_tokens = -tokens_to_remove",
        "semantic/swap",
    ): "`number_of_tokens = -tokens_to_remove` only binds a local: computing it before the window's check changes nothing.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache._check_crop: DynamicSlidingWindowLayer._check_crop(self, tokens_to_remov… moved past for name, buffered_kv in self.buffer_kv.items(): if buffere…",
        "semantic/check-moved",
    ): "the same crops are refused, with a `ValueError` before anything changes (the early return skips only `0` and full rollbacks, which the window never refuses); only the message differs when both refuse, naming the compressor (only a full rollback) instead of the window (both reasons hold; no code branches on the message).",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: swapped: removed_tokens = seq_length - self.cumulative_length <-> self.values = self.keys",
        "semantic/swap",
    ): "`removed_tokens` reads the counters, `self.values = self.keys` rebinds the values: independent.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: swapped: self.values = self.keys <-> for name, buffered_kv in self.buffer_kv.items(): if self.cu…",
        "semantic/swap",
    ): "the compressor loop reads and writes only the compressor buffers and counts, not the keys or values.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: swapped: self.buffer_kv[name] = self.buffer_gate[name] = self.compre… <-> self.entry_count[name] = 0",
        "semantic/swap",
    ): "the buffers and the entry count of a compressor are reset independently.",
    (
        "step5_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: swapped: self.buffer_kv[name] = buffered_kv[:, :kept_length] <-> self.buffer_gate[name] = self.buffer_gate[name][:, :kept_le…",
        "semantic/swap",
    ): "the compressor's buffer and gate are sliced independently (each from its own tensor, to the same `kept_length`).",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrDynamicReferenceSlidingWindowLayer.crop: swapped: self.prefill_keys = self.prefill_keys[..., :new_prefill_len… <-> self.prefill_values = self.prefill_values[..., :new_prefill…",
        "semantic/swap",
    ): "the prefill key and value slices are independent: each reads and writes its own attribute.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrDynamicReferenceSlidingWindowLayer.crop: swapped: self.prefill_values = self.prefill_values[..., :new_prefill… <-> self.prefill_cumulative_length = new_prefill_length",
        "semantic/swap",
    ): "the prefill value slice reads `new_prefill_length` (a local), not `prefill_cumulative_length`: the two assignments are independent.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrDynamicReferenceSlidingWindowLayer.crop: swapped: DynamicSlidingWindowLayer.crop(self, tokens_to_remove) <-> prefill_tokens_to_remove = -int(tokens_to_remove) - sliding…",
        "semantic/swap",
    ): "`prefill_tokens_to_remove` is a local computed from the argument and `sliding_length` (read before): computing it before the sliding crop changes nothing (an invalid argument raises in `int()` or in the crop, before anything changes).",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: swapped: if self.is_initialized and self.cumulative_length_int < sli… <-> prefill_tokens_to_remove = -int(tokens_to_remove) - sliding…",
        "semantic/swap",
    ): "`prefill_tokens_to_remove` is a local computed from the argument and `sliding_length`: computing it before clearing the freed slots changes nothing.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: in self.cumulative_length_int < sliding_length: sliding_length -> sliding_length + 1",
        "semantic/off-by-one",
    ): "with `cumulative_length_int == sliding_length` (nothing removed) the cleared slice `[start:min(sliding_length, max_cache_len)]` starts at `sliding_length`: it is empty.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: in sliding_length <= self.max_cache_len: self.max_cache_len -> self.max_cache_len + 1",
        "semantic/off-by-one",
    ): "`sliding_length == max_cache_len + 1` is beyond the window, where only a full rollback passes the check: `start` is then `cumulative_length_int == 0` either way.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: swapped: self.keys[:, :, start:min(sliding_length, self.max_cache_le… <-> self.values[:, :, start:min(sliding_length, self.max_cache_…",
        "semantic/swap",
    ): "the key and value slots are cleared independently.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.keys[:, :, start:min(sliding_length, self.max_cache_len)].zero_() -> self.keys[:, :, start : min(sliding_length, self.max_cache_len)] = torch.zeros_like(self.keys[:, :, start : min(sliding_length, self.max_cache_len)])",
        "semantic/new-tensor",
    ): "assigning zeros to a slice writes into the same storage as `zero_()` does: the same tensor, the same values.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.values[:, :, start:min(sliding_length, self.max_cache_len)].zero_() -> self.values[:, :, start : min(sliding_length, self.max_cache_len)] = torch.zeros_like(self.values[:, :, start : min(sliding_length, self.max_cache_len)])",
        "semantic/new-tensor",
    ): "assigning zeros to a slice writes into the same storage as `zero_()` does: the same tensor, the same values.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: swapped: self.prefill_keys[:, :, new_prefill_length:self.prefill_cum… <-> self.prefill_values[:, :, new_prefill_length:self.prefill_c…",
        "semantic/swap",
    ): "the prefill key and value slots are cleared independently.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.prefill_keys[:, :, new_prefill_length:self.prefill_cumulative_length].zero_() -> self.prefill_keys[:, :, new_prefill_length : self.prefill_cumulative_length] = torch.zeros_like(self.prefill_keys[:, :, new_prefill_length : self.prefill_cumulative_length])",
        "semantic/new-tensor",
    ): "assigning zeros to a slice writes into the same storage as `zero_()` does: the same tensor, the same values.",
    (
        "step5_models/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.prefill_values[:, :, new_prefill_length:self.prefill_cumulative_length].zero_() -> self.prefill_values[:, :, new_prefill_length : self.prefill_cumulative_length] = torch.zeros_like(self.prefill_values[:, :, new_prefill_length : self.prefill_cumulative_length])",
        "semantic/new-tensor",
    ): "assigning zeros to a slice writes into the same storage as `zero_()` does: the same tensor, the same values.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.conv_states[0] = conv_state <-> self.recurrent_states[0] = recurrent_state",
        "semantic/swap",
    ): "the conv and recurrent states are restored independently (each from its own local).",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.recurrent_states[0] = recurrent_state <-> self.has_previous_state[0] = True",
        "semantic/swap",
    ): "restoring the recurrent states and setting `has_previous_state` are independent.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: removed: self.has_previous_state[0] = True",
        "semantic/flag",
    ): "an entry with states was pushed while `has_previous_state[0]` was True, and nothing sets it False without clearing the history (`reset`) or popping that entry first: it is already True.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self.history = collections.deque(history or (), maxlen=hist… <-> if history is None: self._history_copies_states = False sel…",
        "semantic/swap",
    ): "the block reads the local `history` (the previous deque or `None`), not `self.history`: the two statements are independent.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self._history_copies_states = False <-> self._history_conv_version = _tensor_version(self.conv_stat…",
        "semantic/swap",
    ): "two independent attribute initializations.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._crop_conv_states: swapped: if not is_initialized: continue <-> kernel_size = self.conv_kernel_size[state_idx]",
        "semantic/swap",
    ): "`kernel_size` is read from `conv_kernel_size`, a dict holding every state index (`None` until initialized): reading it before skipping an uninitialized state changes nothing.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._crop_conv_states: swapped: if number_of_tokens == 0 and conv_states.shape[-1] == kerne… <-> kept_length = conv_states.shape[-1] - number_of_tokens",
        "semantic/swap",
    ): "`kept_length` is a local: computing it before the `continue` changes nothing.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: for i in range(self.number_of_states): if self.is_conv_stat… <-> if history is not None: history.clear() self._history_conv_…",
        "semantic/swap",
    ): "the history is cleared either way, and `_history_conv_version` is read only with a non-empty history, whose every entry is pushed by an update that sets it again after writing the conv states.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: if self.is_conv_states_initialized[i] and history is not No… <-> if self.is_recurrent_states_initialized[i] and history is n…",
        "semantic/swap",
    ): "the conv and recurrent states of a state index are reset independently.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: if self.is_recurrent_states_initialized[i] and history is n… <-> self.has_previous_state[i] = False",
        "semantic/swap",
    ): "resetting the recurrent states and `has_previous_state` are independent.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: swapped: history.clear() <-> self._history_conv_version = _tensor_version(self.conv_stat…",
        "semantic/swap",
    ): "`history.clear()` and the version read of the conv states are independent.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reset: deleted: self._history_conv_version = _tensor_version(self.conv_states[0])",
        "semantic/delete",
    ): "`_history_conv_version` is read only with a non-empty history, whose every entry is pushed by an update that sets it again after writing the conv states: the value set by `reset` is never read.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: swapped: for i in range(self.number_of_states): if self.is_conv_stat… <-> if getattr(self, 'history', None) is not None: self.history…",
        "semantic/swap",
    ): "the history is cleared either way, and `_history_conv_version` is read only with a non-empty history, whose every entry is pushed by an update that sets it again after writing the conv states.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: swapped: if self.is_conv_states_initialized[i]: self.conv_states[i] … <-> if self.is_recurrent_states_initialized[i]: self.recurrent_…",
        "semantic/swap",
    ): "the conv and recurrent states of a state index are reordered independently.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: swapped: self.history.clear() <-> self._history_conv_version = _tensor_version(self.conv_stat…",
        "semantic/swap",
    ): "`history.clear()` and the version read of the conv states are independent.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: deleted: self._history_conv_version = _tensor_version(self.conv_states[0])",
        "semantic/delete",
    ): "`_history_conv_version` is read only with a non-empty history, whose every entry is pushed by an update that sets it again after writing the conv states: the value set by `reorder_cache` is never read.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: if not self.is_conv_states_initialized[state_idx]: self.laz… <-> history = getattr(self, 'history', None)",
        "semantic/swap",
    ): "`history` is a local read of an attribute that lazy initialization does not set: the two are independent.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: if history is not None and self.number_of_states == 1: self… <-> kernel_size = self.conv_kernel_size[state_idx]",
        "semantic/swap",
    ): "`kernel_size` is a local read of `conv_kernel_size`, which `_push_history` does not change.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: if recurrent_state is None: self.has_previous_state[0] = Fa… <-> self._history_conv_version = _tensor_version(self.conv_stat…",
        "semantic/swap",
    ): "with a history the layer records its past, so each conv tensor it holds is made fresh (a `cat`, a pad, a `clone`, or a view of one) and has version 0 while the history trusts it (an in-place write makes the history refuse anyway): the version read before the restore is the one read after.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: deleted: self._history_conv_version = _tensor_version(self.conv_states[0]) [2]",
        "semantic/delete",
    ): "with a history the layer records its past, so each conv tensor it holds is made fresh (a `cat`, a pad, a `clone`, or a view of one) and has version 0 while the history trusts it (an in-place write makes the history refuse anyway): the version kept from before the restore is the restored one's.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: self.has_previous_state[state_idx] = True <-> missing = kernel_size - conv_states.shape[-1]",
        "semantic/swap",
    ): "`missing` is a local computed from the kernel size and the new states: independent of `has_previous_state`.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: deleted: self._history_conv_version = _tensor_version(self.conv_states[0])",
        "semantic/delete",
    ): "`_history_conv_version` is read only with a non-empty history, whose every entry is pushed by an update that sets it after writing the conv states: the initial value is never read.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: if self.record_past: self.conv_states[state_idx] = states e… <-> if history is not None: self._history_conv_version = _tenso…",
        "semantic/swap",
    ): "with a history the layer records its past, so each conv tensor it holds is made fresh (a `cat`, a pad, a `clone`, or a view of one) and has version 0 while the history trusts it: the version read before storing the new states is the one read after.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self.recurrent_states[state_idx] = recurrent_states <-> conv_states, kernel_size = (self.conv_states[state_idx], se…",
        "semantic/swap",
    ): "`conv_states, kernel_size = ...` are local reads of the conv states, which storing the recurrent states does not change.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self.conv_states[state_idx] = window.clone() if conv_states… <-> self._history_conv_version = _tensor_version(self.conv_stat…",
        "semantic/swap",
    ): "the window is a view of the conv states (sharing their version counter) or a fresh `clone` (version 0 like every recorded conv tensor, see `update_conv_state`): the version read before the restriction is the one read after.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: deleted: self._history_conv_version = _tensor_version(self.conv_states[state_idx])",
        "semantic/delete",
    ): "the window is a view of the conv states (sharing their version counter) or a fresh `clone` (version 0 like every recorded conv tensor): the version already recorded is the window's.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: deleted: return recurrent_states",
        "semantic/delete",
    ): "without the return, the states just stored are copied onto themselves and the same tensor is returned; the version bump happens before the tensor is pushed to the history, which records the version at push time.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._push_history: swapped: if has_past and (not self.is_recurrent_states_initialized[0… <-> if history and history[-1][3] is not None and (not self._hi…",
        "semantic/swap",
    ): "the copy detection reads only the last entry's recurrent states, which are `None` for a layer without recurrent states (the only one the cleared branch takes), so running it before that branch changes nothing.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._push_history: swapped: if history and history[-1][3] is not None and (not self._hi… <-> conv_state = self.conv_states[0] if has_past else None",
        "semantic/swap",
    ): "`conv_state` is a local read of the conv states, which the copy detection does not change.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self.record_past = True <-> history = getattr(self, 'history', None)",
        "semantic/swap",
    ): "`history` is a local read of an attribute that `record_past = True` does not change.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._get_history_depth: swapped: if not history or _tensor_version(self.conv_states[0]) != s… <-> total = 0",
        "semantic/swap",
    ): "`total = 0` is a local: setting it before the early `return None` changes nothing.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._get_history_depth: swapped: if _tensor_version(conv_state) != conv_version or _tensor_v… <-> if any((t is not None and torch.is_inference(t) for t in (c…",
        "semantic/swap",
    ): "both checks return `None` for the same entry: their order does not matter.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._get_history_depth: swapped: if any((t is not None and torch.is_inference(t) for t in (c… <-> total += num_tokens",
        "semantic/swap",
    ): "`total` is read only after the checks, and the inference check returns `None` either way.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._get_history_depth: deleted: return None [4]",
        "semantic/delete",
    ): "a function that ends returns `None`: the same value as the deleted `return None`.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._check_crop: swapped: if number_of_tokens == 0: return <-> layer_name = self.__class__.__name__",
        "semantic/swap",
    ): "`layer_name` is a local: computing it before the early return changes nothing.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin._check_crop: swapped: if self.number_of_states == 1 and self._get_history_depth(n… <-> history = getattr(self, 'history', None)",
        "semantic/swap",
    ): "`history` is a local read of an attribute that the history check does not change.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: in history.maxlen < history_length: history_length -> history_length + 1",
        "semantic/off-by-one",
    ): "with an equal `maxlen` the history is rebuilt with the same entries and bound, and the flags are not reset (`history` is not `None`): the same history.",
    (
        "step6_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: LinearAttentionCacheLayerMixin._check_crop(self, -number_of… <-> history = getattr(self, 'history', None)",
        "semantic/swap",
    ): "`history` is a local read of an attribute that the check does not change.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: swapped: if self.assistant_kwargs.get('cache', None) is None and sel… <-> has_cache = self.assistant_kwargs.get('cache', None) is not…",
        "semantic/swap",
    ): "`has_cache` then misses the cache prepared in the first round, whose body is a no-op: the new cache is empty (no decision; a crop of at most one token of an empty cache changes nothing) and the masks, taken from the main model's for the same prompt, already have its length.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: swapped: if getattr(self, '_assistant_rollback', None) is None and c… <-> is_default_rollback = remove_from_pkv == 0 and num_added_to…",
        "semantic/swap",
    ): "`is_default_rollback` is a local computed from the arguments only: computing it before the decision changes nothing.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: swapped: num_added_tokens = 0 <-> self._set_assistant_history_length(cache)",
        "semantic/swap",
    ): "`num_added_tokens` is a local that `_set_assistant_history_length` does not read: the two are independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: swapped: if tokens_to_remove >= 0: try: cache.crop(-tokens_to_remove… <-> self.assistant_kwargs = _prepare_attention_mask(self.assist…",
        "semantic/swap",
    ): "the masks depend only on `input_ids`' length, and the crop on the cache: independent (a refused crop is caught either way).",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: swapped: if self._assistant_refused_crops == 1: from ..utils import … <-> cache.crop(-cache.get_seq_length())",
        "semantic/swap",
    ): "the warning reads only `tokens_to_remove`, the error and the cache's class, which emptying the cache does not change: the same message, then the same empty cache.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: deleted: self._assistant_rollback = 'full'",
        "semantic/delete",
    ): "after the second refusal each later round tries the crop again: refused, it changes nothing (no warning: only the first refusal warns) and the cache is emptied as before; accepted, it is exact (a crop removes exactly or refuses): the same drafts and output, one check per round more.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: swapped: self.assistant_kwargs = _prepare_attention_mask(self.assist… <-> self.assistant_kwargs = _prepare_position_ids(self.assistan…",
        "semantic/swap",
    ): "the three upstream helpers each read and write only their own keys of the same dict (masks; position ids; token type ids) and return it: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._update_past_and_masks: swapped: self.assistant_kwargs = _prepare_position_ids(self.assistan… <-> self.assistant_kwargs = _prepare_token_type_ids(self.assist…",
        "semantic/swap",
    ): "the three upstream helpers each read and write only their own keys of the same dict (masks; position ids; token type ids) and return it: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: swapped: from ..cache_utils import EncoderDecoderCache, LinearAttent… <-> model_kwargs = {}",
        "semantic/swap",
    ): "an import and a new local dict: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: swapped: if cache is None: return <-> decoder_cache = cache.self_attention_cache if isinstance(ca…",
        "semantic/swap",
    ): "`isinstance(None, EncoderDecoderCache)` is false: `decoder_cache` is then `None`, never read, as the function returns.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: swapped: if not any((isinstance(layer, LinearAttentionCacheLayerMixi… <-> decoder_cache.activate_past_recording(history_length=int(se…",
        "semantic/swap",
    ): "recording is then activated on an attention-only cache that the function drops (it returns before storing it): no effect.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: deleted: if not any((isinstance(layer, LinearAttentionCacheLayerMixin) for layer in decoder_cache.…",
        "semantic/delete",
    ): "an attention-only cache is then prepared here as `generate` prepares it in the first round (`_prepare_cache_for_generation` already activates recording for an assistant, and `history_length` only concerns linear attention layers), and its rollback is decided `exact` either way.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: deleted: return [2]",
        "semantic/delete",
    ): "an attention-only cache is then prepared here as `generate` prepares it in the first round (`_prepare_cache_for_generation` already activates recording for an assistant, and `history_length` only concerns linear attention layers), and its rollback is decided `exact` either way.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: swapped: decoder_cache.activate_past_recording(history_length=int(se… <-> self._assistant_history_length = int(self.num_assistant_tok…",
        "semantic/swap",
    ): "`activate_past_recording` does not read `_assistant_history_length`: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: deleted: self._assistant_history_length = int(self.num_assistant_tokens) + 1",
        "semantic/delete",
    ): "`_set_assistant_history_length` then sees the default 0 and activates the history again with the `maxlen` it already has (the same history, see the `history_length + 1` off-by-one of `activate_past_recording`), and records the length.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: swapped: self._assistant_history_length = int(self.num_assistant_tok… <-> self.assistant_kwargs['cache'] = cache",
        "semantic/swap",
    ): "an attribute of the generator and a key of `assistant_kwargs`: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._get_assistant_rollback: swapped: from ..cache_utils import EncoderDecoderCache, LinearAttent… <-> from ..utils import logging",
        "semantic/swap",
    ): "two imports of modules already imported: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._get_assistant_rollback: swapped: from ..utils import logging <-> decoder_cache = cache.self_attention_cache if isinstance(ca…",
        "semantic/swap",
    ): "an import and a local read of the cache: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._set_assistant_history_length: in getattr(self, '_assistant_history_length', 0) < history_len…: history_length -> history_length + 1",
        "semantic/off-by-one",
    ): "with equal lengths `activate_past_recording` is called with the `maxlen` the history already has: the same history.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._set_assistant_history_length: swapped: decoder_cache.activate_past_recording(history_length=histor… <-> self._assistant_history_length = history_length",
        "semantic/swap",
    ): "`activate_past_recording` does not read `_assistant_history_length`: independent.",
    (
        "step6_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._set_assistant_history_length: deleted: self._assistant_history_length = history_length",
        "semantic/delete",
    ): "every later round then activates the history again with the `maxlen` it already has: the same history (see the `history_length + 1` off-by-one of `activate_past_recording`).",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: deleted: if number_of_tokens and seq_length is None: seq_length = int(layer.get_seq_length())",
        "semantic/delete",
    ): "without the early read, `_check_crop` reads the length itself only to excuse a refusal and `_is_full_rollback_of_layer` reads it for a removal of at least one token: the same decision from the same length, and at most one host read either way.",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: swapped: if number_of_tokens and seq_length is None: seq_length = in… <-> layer._check_crop(-number_of_tokens, seq_length=seq_length)",
        "semantic/swap",
    ): "`_check_crop` given no length reads it itself, and only to excuse a refusal (which then raises before the early read): the same decision from the same length, and at most one host read either way.",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: deleted: seq_length = int(layer.get_seq_length())",
        "semantic/delete",
    ): "without the early read, `_check_crop` reads the length itself only to excuse a refusal and `_is_full_rollback_of_layer` reads it for a removal of at least one token: the same decision from the same length, and at most one host read either way.",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: layer._check_crop(-number_of_tokens, seq_length=seq_length) moved past if not _is_full_rollback_of_layer(layer, number_of_tokens, …",
        "semantic/check-moved",
    ): "on a partial crop `attention_class.crop` starts with `self._check_crop`, the same hybrid check, before it changes anything; on a full rollback neither part refuses (the linear refusal is excused), so moving the check changes no result (a refusal then reads the length once, in the error path).",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: deleted: layer._check_crop(-number_of_tokens, seq_length=seq_length)",
        "semantic/delete",
    ): "on a partial crop `attention_class.crop` starts with `self._check_crop`, the same hybrid check, before it changes anything; on a full rollback neither part refuses (the linear refusal is excused), so the check is redundant for the result (a refusal then reads the length once, in the error path).",
    (
        "step2_atomic/cache_utils.py",
        "_crop_hybrid: swapped: if issubclass(attention_class, StaticLayer): attention_clas… <-> LinearAttentionCacheLayerMixin.reset(layer)",
        "semantic/swap",
    ): "the attention part (keys, values, write position) and the linear attention part (conv and recurrent states, history) are reset independently: neither reset reads what the other writes.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: swapped: for layer in layers_to_crop: if id(layer) in hybrid_lengths… <-> for layer in layers_to_reset: layer.reset()",
        "semantic/swap",
    ): "`layers_to_reset` and `layers_to_crop` are different layers, all already checked (a crop no longer refuses), so resetting the linear attention layers before cropping the others gives the same cache.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: swapped: layer.keys = keys <-> layer.values = layer.values[..., :stop, :]",
        "semantic/swap",
    ): "two independent assignments: the values are sliced from `layer.values` either way, and nothing reads `layer.keys` in between.",
    (
        "step2_atomic/cache_utils.py",
        "Cache.crop: swapped: if linear_classes and any((issubclass(layer_class, CacheLay… <-> hybrid_classes = {layer_class for layer_class in layer_clas…",
        "semantic/swap",
    ): "`hybrid_classes` is computed from `layer_classes` alone, which the split of the linear layers does not change, and the split does not read `hybrid_classes`: either order gives the same sets and lists before `_read_seq_lengths`.",
}
