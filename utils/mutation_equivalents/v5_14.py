"""The surviving mutants of the 5.14 overlay (`overlay/v5_14`) argued equivalent (see `__init__.py`)."""

OPERATOR: dict[tuple[str, str, str], str] = {
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
        "step2_deprecate/cache_utils.py",
        "if type(max_length) is int and max_length < 0 and tokens_to_remove is None:",
        "core/ReplaceComparisonOperator_LtE_Lt",
    ): "`crop(0)` then takes the general path, where `_check_crop_argument` emits the same `FutureWarning` attributed to the same caller (`stacklevel=3` from the helper) and returns `0` for the same `_crop(0)`.",
    (
        "step2_deprecate/cache_utils.py",
        "if type(max_length) is int and max_length <= -1 and tokens_to_remove is None:",
        "core/NumberReplacer",
    ): "`crop(0)` then takes the general path, where `_check_crop_argument` emits the same `FutureWarning` attributed to the same caller (`stacklevel=3` from the helper) and returns `0` for the same `_crop(0)`.",
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
    (
        "step3_atomic/cache_utils.py",
        "stop = max(max_length, -(2** 61))",
        "core/NumberReplacer",
    ): "any bound between 2**61 and int64's range clamps the same way: no layer holds 2**61 tokens.",
    (
        "step3_atomic/cache_utils.py",
        "if layer.get_seq_length() >= max_length:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "for a layer of exactly `max_length` tokens the extra slice `[..., :max_length, :]` keeps every token (same values).",
    (
        "step3_atomic/cache_utils.py",
        "if type(max_length) is int and max_length < 0 and tokens_to_remove is None:",
        "core/ReplaceComparisonOperator_LtE_Lt",
    ): "`crop(0)` then takes the general path, where `_check_crop_argument` emits the same `FutureWarning` attributed to the same caller (`stacklevel=3` from the helper) and `_crop(0)` puts plain dynamic layers back as built (`_crop_dynamic_layers`), exactly as the fast path does, and crops any other cache as the fast path's own `_crop(0)`.",
    (
        "step3_atomic/cache_utils.py",
        "if type(max_length) is int and max_length <= -1 and tokens_to_remove is None:",
        "core/NumberReplacer",
    ): "`crop(0)` then takes the general path, where `_check_crop_argument` emits the same `FutureWarning` attributed to the same caller (`stacklevel=3` from the helper) and `_crop(0)` puts plain dynamic layers back as built (`_crop_dynamic_layers`), exactly as the fast path does, and crops any other cache as the fast path's own `_crop(0)`.",
}

SEMANTIC: dict[tuple[str, str, str], str] = {
    (
        "step1_clamp/cache_utils.py",
        "DynamicLayer.crop: swapped: self.keys = self.keys[..., :max_length, :] <-> self.values = self.values[..., :max_length, :]",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step2_deprecate/cache_utils.py",
        "_as_crop_int: deleted: if type(value) is int: return value",
        "semantic/delete",
    ): "a fast path: a plain int then takes the general path, where it is no bool and no tensor, and `operator.index` returns it unchanged.",
    (
        "step2_deprecate/cache_utils.py",
        "_as_crop_int: deleted: return value",
        "semantic/delete",
    ): "a fast path: a plain int then takes the general path, where it is no bool and no tensor, and `operator.index` returns it unchanged.",
    (
        "step2_deprecate/cache_utils.py",
        "_as_crop_int: swapped: if type(value) is int: return value <-> is_bool = isinstance(value, bool) or (isinstance(value, tor…",
        "semantic/swap",
    ): "`is_bool` only reads the argument's type and dtype: computing it before the fast path changes nothing.",
    (
        "step2_deprecate/cache_utils.py",
        "_as_crop_int: swapped: is_bool = isinstance(value, bool) or (isinstance(value, tor… <-> is_multi_dim_tensor = isinstance(value, torch.Tensor) and v…",
        "semantic/swap",
    ): "two local reads of the argument's type, dtype and dimensions: neither reads what the other writes.",
    (
        "step2_deprecate/cache_utils.py",
        "_as_crop_int: swapped: if not (is_bool or is_multi_dim_tensor): try: return operat… <-> description = f'a tensor of shape {tuple(value.shape)}' if …",
        "semantic/swap",
    ): "`description` only reads the argument (its shape or `repr`): computing it before the conversion changes nothing but time.",
    (
        "step2_deprecate/cache_utils.py",
        "Cache.crop: deleted: if type(max_length) is int and max_length <= 0 and (tokens_to_remove is None): if max_len…",
        "semantic/delete",
    ): "a fast path: `_check_crop_argument` returns a non-positive int unchanged when `tokens_to_remove` is `None`, warning for `0` with the same message attributed to the same caller (`stacklevel=3` from the helper), and `_crop` then runs on it.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: in history.maxlen < history_length: history_length -> history_length + 1",
        "semantic/off-by-one",
    ): "with `maxlen == history_length` the history is re-created from its own entries with the same `maxlen`: the same history.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: LinearAttentionCacheLayerMixin._check_crop(self, tokens_to_… moved past if tokens_to_remove == 0: for state_idx in range(self.numbe…",
        "semantic/check-moved",
    ): "`_check_crop(0)` returns at once, and the block it moves past runs only for 0: any other argument is still checked before anything changes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: history.clear() <-> self._history_has_past = False",
        "semantic/swap",
    ): "two independent statements: the history and the flag are different attributes, and neither reads the other.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self._history_has_past = False <-> self._history_pending_tokens = None",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute to a constant.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self._history_pending_tokens = None <-> self._history_conv_state = None",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute to a constant.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: removed: self._history_pending_tokens = None [1]",
        "semantic/flag",
    ): "the pending count is `None` between two forward passes: each pass sets it (attention layer first) and the recurrent update consumes it, or the attention layer writes into the entry the update made (linear layer first), and a layer without recurrent states never reads it; rollbacks happen between passes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: removed: self._history_pending_tokens = None [2]",
        "semantic/flag",
    ): "the pending count is `None` between two forward passes: each pass sets it (attention layer first) and the recurrent update consumes it, or the attention layer writes into the entry the update made (linear layer first), and a layer without recurrent states never reads it; rollbacks happen between passes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: removed: self._history_pending_tokens = None",
        "semantic/flag",
    ): "the pending count is `None` between two forward passes: each pass sets it (attention layer first) and the recurrent update consumes it, or the attention layer writes into the entry the update made (linear layer first), and a layer without recurrent states never reads it; rollbacks happen between passes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: removed: self._history_conv_state = None [1]",
        "semantic/flag",
    ): "the next entry is made with `_history_has_past` false, so it holds no recurrent states, and restoring such an entry never reads its conv states; the update then copies the current conv states again (a layer without conv states never has any to keep).",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: removed: self._history_conv_state = None [2]",
        "semantic/flag",
    ): "the next entry is made with `_history_has_past` false, so it holds no recurrent states, and restoring such an entry never reads its conv states; the update then copies the current conv states again (a layer without conv states never has any to keep).",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: removed: self.has_previous_state[0] = True",
        "semantic/flag",
    ): "an entry with recurrent states is restored only after at least two updates since the last reset (an entry without them is the oldest), and each update's conv step already set `has_previous_state[0]`.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: removed: self._history_has_past = True",
        "semantic/flag",
    ): "an entry with recurrent states is restored only after an update since the last reset (an entry without them is the oldest), and every update sets `_history_has_past`.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: if any(self.is_recurrent_states_initialized.values()): dept… <-> for state_idx, is_initialized in self.is_conv_states_initia…",
        "semantic/swap",
    ): "with recurrent states the history then restores `conv_states[0]` from the entry (every entry with recurrent states holds a copy), or the layer has no past and its next update does not read the sliced conv states.",
    (
        "step7_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._prepare_assistant_cache: removed: self.generation_config.cache_implementation = None",
        "semantic/flag",
    ): "`_update_past_and_masks`, its only caller, sets it to `None` right after in the same call, since the cache is then in `assistant_kwargs`.",
    (
        "step7_history/generation/candidate_generator.py",
        "AssistedCandidateGenerator._set_assistant_history_length: in getattr(self, '_assistant_history_length', 0) < history_len…: history_length -> history_length + 1",
        "semantic/off-by-one",
    ): "with equal lengths `activate_past_recording` is called with the `maxlen` the history already has: the same history.",
    (
        "step3_atomic/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: self._check_crop(max_length) moved past new_length = _get_crop_length(max_length, self.get_seq_leng…",
        "semantic/check-moved",
    ): "`new_length` is only computed (a read of the length): the check still runs before anything changes.",
    (
        "step4_static/cache_utils.py",
        "StaticSlidingWindowLayer.crop: self._check_crop(max_length) moved past new_length = _get_crop_length(max_length, seq_length)",
        "semantic/check-moved",
    ): "`new_length` is only computed (a read of the length): the check still runs before anything changes.",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache._check_crop: super()._check_crop(max_length) moved past seq_length = self.get_seq_length()",
        "semantic/check-moved",
    ): "`seq_length` is only read: the check still runs before anything else.",
    (
        "step3_atomic/cache_utils.py",
        "LinearAttentionAndSlidingWindowAttentionLayer.crop: self._check_crop(max_length) moved past DynamicSlidingWindowLayer.crop(self, max_length)",
        "semantic/check-moved",
    ): "`DynamicSlidingWindowLayer.crop` starts with `self._check_crop`, this class's check of both parts: both are still checked before either changes.",
    (
        "step4_static/cache_utils.py",
        "LinearAttentionAndStaticFullAttentionLayer.crop: self._check_crop(max_length) moved past StaticLayer.crop(self, max_length)",
        "semantic/check-moved",
    ): "`StaticLayer.crop` starts with `self._check_crop`, this class's check of both parts: both are still checked before either changes.",
    (
        "step4_static/cache_utils.py",
        "LinearAttentionAndStaticSlidingWindowAttentionLayer.crop: self._check_crop(max_length) moved past StaticSlidingWindowLayer.crop(self, max_length)",
        "semantic/check-moved",
    ): "`StaticSlidingWindowLayer.crop` starts with `self._check_crop`, this class's check of both parts: both are still checked before either changes.",
    (
        "step4_static/cache_utils.py",
        "StaticLayer.crop: self._check_crop(max_length) moved past if max_length < 0: self.cumulative_length.sub_(min(-max_len…",
        "semantic/check-moved",
    ): "the `_check_crop` of the layers that reach here never raises (`StaticLayer`'s and its subclasses'), or the caller already passed it (the static hybrid layer's `crop` checks both parts first).",
    (
        "step4_static/cache_utils.py",
        "StaticSlidingWindowLayer.crop: self.keys[:, :, new_length:seq_length].zero_() -> self.keys[:, :, new_length:seq_length] = torch.zeros_like(self.keys[:, :, new_length:seq_length])",
        "semantic/new-tensor",
    ): "assigning to a slice of a tensor writes in place: the same as `zero_()`.",
    (
        "step4_static/cache_utils.py",
        "StaticSlidingWindowLayer.crop: self.values[:, :, new_length:seq_length].zero_() -> self.values[:, :, new_length:seq_length] = torch.zeros_like(self.values[:, :, new_length:seq_length])",
        "semantic/new-tensor",
    ): "assigning to a slice of a tensor writes in place: the same as `zero_()`.",
    (
        "step6_models/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: in new_length < seq_length: seq_length -> seq_length + 1",
        "semantic/off-by-one",
    ): "with 0 removed tokens the buffers are sliced to their own length: the same values.",
    (
        "step6_models/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "MiniMaxM3VLSparseCacheLayer.crop: in self.idx_keys.shape[-2] > new_length: new_length -> new_length - 1",
        "semantic/off-by-one",
    ): "when the lengths are equal the extra slice `[..., :new_length, :]` keeps every index key (same values).",
    (
        "step3_atomic/cache_utils.py",
        "_crop_dynamic_layers: in layer.get_seq_length() > max_length: max_length -> max_length - 1",
        "semantic/off-by-one",
    ): "when the length equals `max_length` the extra slice `[..., :max_length, :]` keeps every token (same values).",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self.history = collections.deque(history or (), maxlen=hist… <-> if history is None: has_past = self.is_recurrent_states_ini…",
        "semantic/swap",
    ): "the block reads the local `history` (the old one) and the layer's states, never `self.history`: the same values either way.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.has_previous_state[0] = False <-> self._history_has_past = False",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self._history_has_past = False <-> self._history_conv_state = None",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.recurrent_states[0] = recurrent_state <-> self.has_previous_state[0] = True",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.has_previous_state[0] = True <-> self._history_has_past = True",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self._history_has_past = True <-> if conv_state is not None: self.conv_states[0] = conv_state…",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.conv_states[0] = conv_state <-> self._history_conv_state = conv_state.clone()",
        "semantic/swap",
    ): "both read only the local `conv_state` (the second copies it) and write different attributes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self._history_recurrent_version = _tensor_version(self.recu… <-> self._history_pending_tokens = None",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: self.has_previous_state[state_idx] = True <-> missing = kernel_size - conv_states.shape[-1]",
        "semantic/swap",
    ): "`missing` reads the kernel size and the argument, not the flag.",
    (
        "step3_atomic/cache_utils.py",
        "EncoderDecoderCache._check_crop: deleted: return self.self_attention_cache._check_crop(max_length)",
        "semantic/delete",
    ): "no caller in the stacked fix: `EncoderDecoderCache.crop` crops through the self-attention cache's own `crop` (which checks first), and step 7's candidate generator no longer calls `_check_crop`.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self._history_has_past = has_past <-> self._history_conv_state = self.conv_states[0].clone() if h…",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self._history_conv_state = self.conv_states[0].clone() if h… <-> self._history_recurrent_version = _tensor_version(self.recu…",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: if history is None or self.number_of_states != 1: if not se… <-> if not self.is_recurrent_states_initialized[state_idx]: sel…",
        "semantic/swap",
    ): "the lazy initialization then runs first, and the branch's own one is skipped: the same initialized states either way.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: if not self.is_recurrent_states_initialized[state_idx]: sel… <-> previous_states = self.recurrent_states[state_idx] if self.…",
        "semantic/swap",
    ): "`previous_states` reads the states only when `_history_has_past` is true, and then they are initialized (the lazy initialization does nothing).",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self._history_pending_tokens = None <-> self._history_has_past = True",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self._history_has_past = True <-> self.recurrent_states[state_idx] = recurrent_states",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self.recurrent_states[state_idx] = recurrent_states <-> self._history_recurrent_version = _tensor_version(recurrent…",
        "semantic/swap",
    ): "the version is read from the argument, the very tensor stored: the same value before or after storing it.",
    (
        "step7_history/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self._history_recurrent_version = _tensor_version(recurrent… <-> if self.is_conv_states_initialized[state_idx]: self._histor…",
        "semantic/swap",
    ): "two independent statements: each sets its own attribute (from a constant or a local), and neither reads what the other writes.",
    (
        "step7_history/cache_utils.py",
        "Cache.update: swapped: if self.layer_class_to_replicate is not None: while len(sel… <-> if self.offloading: torch.cuda.default_stream(key_states.de…",
        "semantic/swap",
    ): "upstream's lines: the loop appends layers up to `layer_idx` only, so the offloading prefetch of `layer_idx + 1` (CUDA only) sees the same layers before or after it.",
    (
        "step3_atomic/cache_utils.py",
        "_crop_dynamic_layers: swapped: layer.keys = layer.keys[..., :stop, :] <-> layer.values = layer.values[..., :stop, :]",
        "semantic/swap",
    ): "two stores of independent attributes, each reading only its own: the same states in either order.",
    (
        "step3_atomic/cache_utils.py",
        "_crop_dynamic_layers: swapped: layer.keys = layer.keys[..., :max_length, :] <-> layer.values = layer.values[..., :max_length, :]",
        "semantic/swap",
    ): "two stores of independent attributes, each reading only its own: the same states in either order.",
    (
        "step3_atomic/cache_utils.py",
        "_crop_dynamic_layers: swapped: layer.keys, layer.values = (None, None) <-> layer.is_initialized = False",
        "semantic/swap",
    ): "three stores of constants to independent attributes, nothing read in between: the same layer in either order.",
    (
        "step3_atomic/cache_utils.py",
        "Cache.crop: deleted: if type(max_length) is int and max_length <= 0 and (tokens_to_remove is None): if max_len…",
        "semantic/delete",
    ): "a fast path: `_check_crop_argument` returns a non-positive int unchanged when `tokens_to_remove` is `None`, warning for `0` with the same message attributed to the same caller (`stacklevel=3` from the helper), and `_crop` then gives the same layers (`_crop_dynamic_layers` puts plain dynamic layers back as built for `0`).",
    (
        "step3_atomic/cache_utils.py",
        "Cache.crop: swapped: warnings.warn(_CROP_0_WARNING, FutureWarning, stacklevel=2) <-> layers = self.layers",
        "semantic/swap",
    ): "`layers` is a local alias of `self.layers`, read only after the warning: binding it before the warning (even one turned into an error) changes nothing.",
    (
        "step3_atomic/cache_utils.py",
        "Cache.crop: deleted: for layer in layers: if type(layer) is not DynamicLayer: break else: for layer in layers:…",
        "semantic/delete",
    ): "a fast path: `crop(0)` then reaches `self._crop(0)`, which sends plain dynamic layers to `_crop_dynamic_layers`, and that puts each initialized one back as built exactly as the deleted loop does.",
    (
        "step3_atomic/cache_utils.py",
        "Cache.crop: swapped: layer.keys, layer.values = (None, None) <-> layer.is_initialized = False",
        "semantic/swap",
    ): "independent attribute stores on the same layer, with nothing read between them.",
    (
        "step3_atomic/cache_utils.py",
        "Cache.crop: deleted: return [1]",
        "semantic/delete",
    ): "`crop(0)` then also runs `self._crop(0)`, whose `_crop_dynamic_layers` finds every layer already not initialized and changes nothing.",
    (
        "step3_atomic/cache_utils.py",
        "Cache.crop: swapped: try: warnings.warn(_CROP_0_FUTURE_WARNING, stacklevel=2) ex… <-> layers = self.layers",
        "semantic/swap",
    ): "`layers = self.layers` only binds a local: binding it before the warning changes nothing, also when the warning raises.",
}
