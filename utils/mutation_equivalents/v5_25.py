"""The surviving mutants of the 5.25 overlay (`overlay/v5_25`) argued equivalent (see `__init__.py`)."""

OPERATOR: dict[tuple[str, str, str], str] = {
    (
        "step19_refuse/cache_utils.py",
        "if tokens_to_remove >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "`super().crop(0)` (`DynamicLayer.crop`) returns before changing anything.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if prefill_tokens_to_remove >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "for 0, `max(prefill_cumulative_length - 0, 0)` is the same length.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if self.is_initialized or self.cumulative_length_int < sliding_length:",
        "core/ReplaceAndWithOr",
    ): "a layer never initialized holds no token (only `update`, which initializes it, raises `cumulative_length_int`): `0 < 0` is false either way; an initialized one enters for `crop(0)` too, where the slice `[cumulative_length_int : end]` is empty.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if self.is_initialized and self.cumulative_length_int <= sliding_length:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "equal lengths only when the crop removes no window token (`crop(0)`, or an empty window; a positive crop raises), where `end = min(sliding_length, max_cache_len)` is at most `cumulative_length_int`: the cleared slice is empty.",
    (
        "step18_exact/cache_utils.py",
        "if tokens_to_remove >= 0 and tokens_to_remove == self.num_tokens_linear:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "differs only for `crop(0)` of a layer holding no token, which `reset` leaves as it is (zero states and counts, an empty history).",
    (
        "step18_exact/cache_utils.py",
        "if tokens_to_remove > -1:",
        "core/NumberReplacer",
    ): "for 0 both counts are decreased by 0.",
    (
        "step18_exact/cache_utils.py",
        "tokens_to_remove >= 0 or self.conv_states[i].shape[-1] != self.conv_kernel_size[i]",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "for `crop(0)` of conv states already `kernel` wide the block only takes views of the whole tensor (same storage and values) and pads nothing.",
    (
        "step18_exact/cache_utils.py",
        "self.recurrent_states_num_tokens[i] = -1",
        "core/NumberReplacer",
    ): "the first forward after the reset then never counts as adjacent, which only drops the state from before its first token: only a full rollback (a reset) would restore it.",
    (
        "step21_edges/cache_utils.py",
        "new_length = max(self.keys.shape[2] + tokens_to_remove, 0)",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step19_refuse/cache_utils.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step19_refuse/cache_utils.py",
        "first_stored_token = seq_length - self.keys.shape[2]",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step19_refuse/cache_utils.py",
        "self.cumulative_length = self.keys.shape[2]",
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`.",
    (
        "step18_exact/cache_utils.py",
        "if padding_length > -1:",
        "core/NumberReplacer",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step18_exact/cache_utils.py",
        "if padding_length >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step18_exact/cache_utils.py",
        "if stored.shape[-1] <= kernel_size:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step18_exact/cache_utils.py",
        "if not self.record_past and num_new_tokens <= kernel_size:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "a padding of 0 columns adds nothing: the same values.",
    (
        "step18_exact/cache_utils.py",
        "if tokens_to_remove == -1 or tokens_to_remove >= num_tokens:",
        "core/NumberReplacer",
    ): "for 0 the checks below cannot raise: stored conv states are at least `kernel` wide (`0 > stored - kernel` is false) and no history is shorter than 0.",
    (
        "step18_exact/cache_utils.py",
        'f"{what} (state {state_idx}) can only be rolled back by {max(available, -1)} token(s), the ones recorded since the "',
        "core/NumberReplacer",
    ): "`available` is never negative: stored conv states are at least `conv_kernel_size` wide (zeros before a short prefill, restricted to it by `crop`) and a history length is at least 0.",
    (
        "step18_exact/cache_utils.py",
        "self.recurrent_states_num_tokens = dict.fromkeys(range(number_of_states), -1)",
        "core/NumberReplacer",
    ): "a fresh layer's first forward then never counts as adjacent, which only drops the state from before its first token: only a full rollback (a reset) would restore it.",
    (
        "step21_edges/models/minimax_m3_vl/modeling_minimax_m3_vl.py",
        "if tokens_to_remove != 1 and self.idx_keys is not None:",
        "core/NumberReplacer",
    ): "`tokens_to_remove` is never 1 here (`super().crop` raised for positive values); for 0 the index keys are sliced to the length they already have.",
    (
        "step18_exact/cache_utils.py",
        "def __init__(self, number_of_states: int = 2, **kwargs):",
        "core/NumberReplacer",
    ): "a second state that is never updated stays uninitialized: every loop over the states skips it (no tensor, an empty history).",
    (
        "step18_exact/cache_utils.py",
        "if not TYPE_CHECKING:",
        "core/AddNot",
    ): "the names imported exist in upstream's module, whose globals the methods run with: importing them at runtime changes nothing.",
    (
        "step21_edges/cache_utils.py",
        "if tokens_to_remove == 1:",
        "core/NumberReplacer",
    ): "`tokens_to_remove` is never 1 here (`super().crop` raised for positive values), and for 0 the slices below keep every index position and key.",
    (
        "step18_exact/cache_utils.py",
        "if tokens_to_remove > -1 and tokens_to_remove == self.num_tokens_linear:",
        "core/NumberReplacer",
    ): "differs only for `crop(0)` of a layer holding no token, which `reset` leaves as it is (zero states and counts, an empty history).",
    (
        "step18_exact/cache_utils.py",
        "if tokens_to_remove >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "for 0 both counts are decreased by 0.",
    (
        "step18_exact/cache_utils.py",
        "tokens_to_remove > -1 or self.conv_states[i].shape[-1] != self.conv_kernel_size[i]",
        "core/NumberReplacer",
    ): "for `crop(0)` of conv states already `kernel` wide the block only takes views of the whole tensor (same storage and values) and pads nothing.",
    (
        "step19_refuse/cache_utils.py",
        "if tokens_to_remove > -1:",
        "core/NumberReplacer",
    ): "`super().crop(0)` (`DynamicLayer.crop`) returns before changing anything.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "if prefill_tokens_to_remove > -1:",
        "core/NumberReplacer",
    ): "for 0, `max(prefill_cumulative_length - 0, 0)` is the same length.",
    (
        "step20_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "if tokens_to_remove < 0 and self.cumulative_length > -1:",
        "core/NumberReplacer",
    ): "differs only for a layer holding no token, which `reset` leaves as it is (no states, a length of 0).",
    (
        "step20_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "if tokens_to_remove < 0 and self.cumulative_length >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "differs only for a layer holding no token, which `reset` leaves as it is (no states, a length of 0).",
    (
        "step21_edges/cache_utils.py",
        "if tokens_to_remove <= -(2**62):",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "`-(2**62)` is then replaced by itself.",
    (
        "step21_edges/cache_utils.py",
        "if tokens_to_remove < -(2** 63):",
        "core/NumberReplacer",
    ): "removals in `[-(2**63), -(2**62))` fit in 64 bits: the slice empties the layer without a warning, as the clamped one does (no layer holds 2**62 tokens).",
    (
        "step21_edges/cache_utils.py",
        "if tokens_to_remove < -(2** 61):",
        "core/NumberReplacer",
    ): "removals in `[-(2**62), -(2**61))` become `-(2**62)`: both empty any layer (no layer holds 2**61 tokens).",
    (
        "step21_edges/cache_utils.py",
        "tokens_to_remove = -(2** 61)",
        "core/NumberReplacer",
    ): "`-(2**61)` empties any layer too (no layer holds 2**61 tokens), and fits in 64 bits.",
    (
        "step21_edges/cache_utils.py",
        "if not self.is_indexer_initialized or self.indexer_keys.numel() == -1:",
        "core/NumberReplacer",
    ): "`numel()` is never -1; an initialized, empty indexer is sliced to the same empty tensor.",
    (
        "step19_refuse/cache_utils.py",
        'f"window of {self.sliding_window} would need tokens it dropped, as it holds the last {self.keys.shape[2]} "',
        "core/ReplaceUnaryOperator_Delete_USub",
    ): "the key states are 4-D (batch, heads, tokens, head_dim), so `shape[2]` is `shape[-2]`: the same number in the message.",
    (
        "step19_refuse/cache_utils.py",
        "if tokens_to_remove <= 0:",
        "core/ReplaceComparisonOperator_Lt_LtE",
    ): "for 0 the clamp keeps 0 (`max(0, -cumulative_length)`) and `_check_crop(0)` returns at once: the same crop.",
    (
        "step19_refuse/cache_utils.py",
        "if tokens_to_remove < 1:",
        "core/NumberReplacer",
    ): "on ints `< 1` adds only 0, for which the clamp keeps 0 and `_check_crop(0)` returns at once: the same crop.",
    (
        "step19_refuse/cache_utils.py",
        "if tokens_to_remove < 0 and self.get_seq_length() >= 0:",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "differs only for a layer holding no token, which `reset` leaves as it is (no states, quantized or not, a length of 0).",
    (
        "step19_refuse/cache_utils.py",
        "if tokens_to_remove < 0 and self.get_seq_length() > -1:",
        "core/NumberReplacer",
    ): "differs only for a layer holding no token, which `reset` leaves as it is (no states, quantized or not, a length of 0).",
    (
        "step18_exact/cache_utils.py",
        "if tokens_to_remove < -1:",
        "core/NumberReplacer",
    ): "`crop(-1)` of plain dynamic layers then takes the general path (each layer's check, which a `DynamicLayer` passes, then its `crop`): the same slices, one call per layer more.",
    (
        "step18_exact/cache_utils.py",
        "stop = tokens_to_remove if tokens_to_remove > -(2** 61) else -(2**62)",
        "core/NumberReplacer",
    ): "removals in `[-(2**62), -(2**61)]` become `-(2**62)`: both empty any layer (no layer holds 2**61 tokens), and neither is truncated by torch.",
    (
        "step18_exact/cache_utils.py",
        "stop = tokens_to_remove if tokens_to_remove > -(2** 63) else -(2**62)",
        "core/NumberReplacer",
    ): "removals in `(-(2**63), -(2**62)]` fit in 64 bits: the slice empties the layer without a warning, as the clamped one does.",
    (
        "step18_exact/cache_utils.py",
        "stop = tokens_to_remove if tokens_to_remove > -(2**62) else -(2** 61)",
        "core/NumberReplacer",
    ): "a stop of `-(2**61)` or `-(2**62)` is before the first token of any tensor: the same empty slice, and neither is truncated (with a warning) by torch.",
    (
        "step18_exact/cache_utils.py",
        "stop = tokens_to_remove if tokens_to_remove > -(2**62) else -(2** 63)",
        "core/NumberReplacer",
    ): "`-(2**63)` still fits in 64 bits: the same empty slice, without a warning.",
    (
        "step18_exact/cache_utils.py",
        "stop = tokens_to_remove if tokens_to_remove >= -(2**62) else -(2**62)",
        "core/ReplaceComparisonOperator_Gt_GtE",
    ): "at `tokens_to_remove == -(2**62)` both branches give the stop `-(2**62)`.",
}

SEMANTIC: dict[tuple[str, str, str], str] = {
    (
        "step21_edges/cache_utils.py",
        "DynamicLayer.crop: swapped: self.keys = self.keys[..., :new_length, :] <-> self.values = self.values[..., :new_length, :]",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step21_edges/cache_utils.py",
        "DynamicIndexedLayer.crop: swapped: super().crop(tokens_to_remove) <-> if tokens_to_remove == 0: return",
        "semantic/swap",
    ): "`DynamicLayer.crop(0)` returns before changing anything, so returning before or after it is the same.",
    (
        "step21_edges/cache_utils.py",
        "DynamicIndexedLayer.crop: deleted: if tokens_to_remove == 0: return",
        "semantic/delete",
    ): "with 0 removed, `new_length` is the layer's length: the slices below keep every index position and key.",
    (
        "step21_edges/cache_utils.py",
        "DynamicIndexedLayer.crop: swapped: if tokens_to_remove == 0: return <-> new_length = self.get_seq_length()",
        "semantic/swap",
    ): "`new_length` is only computed (a read of the length) before the early return: nothing changes.",
    (
        "step21_edges/cache_utils.py",
        "DynamicIndexedLayer.crop: deleted: return [1]",
        "semantic/delete",
    ): "with 0 removed, `new_length` is the layer's length: the slices below keep every index position and key.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: swapped: if self.is_conv_states_initialized[i]: self.conv_states[i] … <-> if self.is_recurrent_states_initialized[i]: self.recurrent_…",
        "semantic/swap",
    ): "the conv and recurrent parts of a state are reordered independently (disjoint attributes).",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.reorder_cache: swapped: if self.is_recurrent_states_initialized[i]: self.recurrent_… <-> history = self.recurrent_states_history[i]",
        "semantic/swap",
    ): "`history` is a local alias read only by the next statement; the recurrent state is a different attribute.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: if recurrent_states_to_keep is None: recurrent_states_to_ke… <-> self.record_past = True",
        "semantic/swap",
    ): "the default is computed from `self.recurrent_states_to_keep`, which `record_past = True` does not touch.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.activate_past_recording: swapped: self.record_past = True <-> self.recurrent_states_to_keep = recurrent_states_to_keep",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin._check_crop: swapped: if tokens_to_remove > 0: raise RuntimeError('Linear attenti… <-> num_tokens = self.num_tokens_linear",
        "semantic/swap",
    ): "`num_tokens` is a local read of the host count: the check above it does not change it.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin._check_crop: swapped: if self.is_conv_states_initialized[i]: stored = self.conv_s… <-> if self.is_recurrent_states_initialized[i] and len(self.rec…",
        "semantic/swap",
    ): "both checks only read (each raises for its own state part); which raises first differs only in the message when both fail.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.cumulative_length_linear.sub_(tokens_to_remove) <-> self.num_tokens_linear -= tokens_to_remove",
        "semantic/swap",
    ): "the device count and the host count are independent: each statement updates its own.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: if self.is_conv_states_initialized[i] and (tokens_to_remove… <-> if self.is_recurrent_states_initialized[i] and tokens_to_re…",
        "semantic/swap",
    ): "the conv and recurrent parts of a state are cropped independently (disjoint attributes).",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: conv_states = conv_states[..., -self.conv_kernel_size[i]:] <-> padding_length = self.conv_kernel_size[i] - conv_states.sha…",
        "semantic/swap",
    ): "a state shorter than the kernel is not changed by keeping its last `kernel` columns, and a longer one needs no padding either way.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: if self.is_recurrent_states_initialized[i] and tokens_to_re… <-> self.recurrent_states_num_tokens[i] = self.num_tokens_linear",
        "semantic/swap",
    ): "restoring the recurrent state does not read `recurrent_states_num_tokens`.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.crop: swapped: self.recurrent_states_num_tokens[i] = self.num_tokens_linear <-> self.recurrent_states_history[i].clear()",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionCacheLayerMixin.increase_count: swapped: self.cumulative_length_linear.add_(1) <-> self.num_tokens_linear += 1",
        "semantic/swap",
    ): "the device count and the host count are independent: each statement updates its own.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: if not self.is_conv_states_initialized[state_idx]: self.laz… <-> num_new_tokens = conv_states.shape[-1]",
        "semantic/swap",
    ): "`num_new_tokens` reads only the argument, which the lazy initialization does not change.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: if state_idx == 0: self.cumulative_length_linear.add_(num_n… <-> kernel_size = self.conv_kernel_size[state_idx]",
        "semantic/swap",
    ): "`kernel_size` is read from `conv_kernel_size`, which counting the tokens does not change.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: self.cumulative_length_linear.add_(num_new_tokens) <-> self.num_tokens_linear += num_new_tokens",
        "semantic/swap",
    ): "the device count and the host count are independent: each statement updates its own.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionLayer.update_conv_state: swapped: self.has_previous_state[state_idx] = True <-> full_conv_states = conv_states",
        "semantic/swap",
    ): "two independent statements: neither reads what the other writes (each sets its own attribute from the arguments or a fresh object).",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: if not self.is_recurrent_states_initialized[state_idx]: sel… <-> per_token = not isinstance(recurrent_states, torch.Tensor)",
        "semantic/swap",
    ): "`per_token` reads only the argument, which the lazy initialization does not change.",
    (
        "step18_exact/cache_utils.py",
        "LinearAttentionLayer.update_recurrent_state: swapped: self.recurrent_states_num_tokens[state_idx] = self.num_toke… <-> if self.record_past: self._extend_history(state_idx, list(r…",
        "semantic/swap",
    ): "`num_new_tokens` is computed before both: `_extend_history` does not read `recurrent_states_num_tokens`.",
    (
        "step19_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.keys = self.keys[:, :, -self.sliding_window + 1:, :] <-> self.values = self.values[:, :, -self.sliding_window + 1:, …",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step19_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.keys = self.keys[:, :, -self.sliding_window + 1 - toke… <-> self.values = self.values[:, :, -self.sliding_window + 1 - …",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step19_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: self.values = self.values[:, :, -self.sliding_window + 1 - … <-> self.cumulative_length = self.cumulative_length - tokens_to…",
        "semantic/swap",
    ): "the value slice and the length are independent: each statement reads and writes its own attribute.",
    (
        "step19_refuse/cache_utils.py",
        "LinearAttentionAndSlidingWindowAttentionLayer._check_crop: swapped: LinearAttentionLayer._check_crop(self, tokens_to_remove) <-> DynamicSlidingWindowLayer._check_crop(self, tokens_to_remov…",
        "semantic/swap",
    ): "both checks only read and raise before anything changes; when both refuse only the message differs.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: swapped: if self.is_initialized and self.cumulative_length_int < sli… <-> prefill_tokens_to_remove = -tokens_to_remove - sliding_leng…",
        "semantic/swap",
    ): "`prefill_tokens_to_remove` is computed from the argument and `sliding_length`, which clearing the freed slots does not change.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.keys[:, :, self.cumulative_length_int:end].zero_() -> self.keys[:, :, self.cumulative_length_int : end] = torch.zeros_like(self.keys[:, :, self.cumulative_length_int : end])",
        "semantic/new-tensor",
    ): "assigning to a slice of a tensor writes in place: the same as `zero_()`.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: swapped: self.keys[:, :, self.cumulative_length_int:end].zero_() <-> self.values[:, :, self.cumulative_length_int:end].zero_()",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: self.values[:, :, self.cumulative_length_int:end].zero_() -> self.values[:, :, self.cumulative_length_int : end] = torch.zeros_like(self.values[:, :, self.cumulative_length_int : end])",
        "semantic/new-tensor",
    ): "assigning to a slice of a tensor writes in place: the same as `zero_()`.",
    (
        "step4_ocr/models/unlimited_ocr/modeling_unlimited_ocr.py",
        "UnlimitedOcrStaticReferenceSlidingWindowLayer.crop: in self.cumulative_length_int < sliding_length: sliding_length -> sliding_length + 1",
        "semantic/off-by-one",
    ): "equal lengths only when the crop removes no window token (`crop(0)`, or an empty window; a positive crop raises), where `end = min(sliding_length, max_cache_len)` is at most `cumulative_length_int`: the cleared slice is empty.",
    (
        "step20_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: swapped: self.reset() <-> self.cumulative_length = 0",
        "semantic/swap",
    ): "`reset` does not read `cumulative_length`, and sets it to 0 as the next line does.",
    (
        "step20_deepseek/models/deepseek_v4/modeling_deepseek_v4.py",
        "DeepseekV4HCACache.crop: removed: self.cumulative_length = 0",
        "semantic/flag",
    ): "`reset` (the line before) already sets `cumulative_length` to 0.",
    (
        "step21_edges/cache_utils.py",
        "DynamicLayer.crop: swapped: if tokens_to_remove == 0 or not self.is_initialized: return <-> if tokens_to_remove < -2 ** 62: tokens_to_remove = -2 ** 62",
        "semantic/swap",
    ): "the clamp only changes the local `tokens_to_remove` (never to 0), which the early return does not depend on.",
    (
        "step21_edges/cache_utils.py",
        "DynamicLayer.crop: swapped: self.keys = self.keys[..., :tokens_to_remove, :] <-> self.values = self.values[..., :tokens_to_remove, :]",
        "semantic/swap",
    ): "the key and value slices are independent: each reads and writes its own attribute.",
    (
        "step19_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer._check_crop: swapped: if not self.record_past: raise RuntimeError('`crop` was cal… <-> first_stored_token = seq_length - self.keys.shape[-2]",
        "semantic/swap",
    ): "`first_stored_token` is a local computed from a read of the keys' shape: computing it before the recording check changes nothing.",
    (
        "step19_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: if not self.is_initialized: return <-> if tokens_to_remove < 0: tokens_to_remove = max(tokens_to_r…",
        "semantic/swap",
    ): "a layer never initialized has `cumulative_length == 0`: the clamp makes the removal 0, for which `_check_crop` returns at once, before the same early return.",
    (
        "step19_refuse/cache_utils.py",
        "DynamicSlidingWindowLayer.crop: swapped: tokens_to_remove = max(tokens_to_remove, -self.cumulative_l… <-> DynamicSlidingWindowLayer._check_crop(self, tokens_to_remov…",
        "semantic/swap",
    ): "the clamp changes only removals of more than `cumulative_length` tokens, for which `_check_crop` returns at `-tokens_to_remove >= seq_length` either way.",
    (
        "step19_refuse/cache_utils.py",
        "BaseQuantizedLayer.crop: swapped: if tokens_to_remove > 0: super().crop(tokens_to_remove) <-> self._check_crop(tokens_to_remove)",
        "semantic/swap",
    ): "`_check_crop` only reads and never raises for a positive value (`0 < -tokens_to_remove` is false): raising before or after it is the same.",
    (
        "step19_refuse/cache_utils.py",
        "BaseQuantizedLayer.crop: swapped: self.reset() <-> self.cumulative_length = 0",
        "semantic/swap",
    ): "`reset` sets `cumulative_length` to 0 itself (`CacheLayerMixin.reset`, through `DynamicLayer.reset`): the same 0 in either order.",
    (
        "step19_refuse/cache_utils.py",
        "BaseQuantizedLayer.crop: removed: self.cumulative_length = 0",
        "semantic/flag",
    ): "`reset` (the line before) already sets `cumulative_length` to 0 (`CacheLayerMixin.reset`, through `DynamicLayer.reset`).",
    (
        "step19_refuse/cache_utils.py",
        "LinearAttentionAndSlidingWindowAttentionLayer.crop: deleted: self._check_crop(tokens_to_remove)",
        "semantic/delete",
    ): "`LinearAttentionLayer.crop`, the next statement, first calls `self._check_crop` (this class's: both parts) before changing anything.",
    (
        "step19_refuse/cache_utils.py",
        "LinearAttentionAndStaticSlidingWindowAttentionLayer.crop: deleted: self._check_crop(tokens_to_remove)",
        "semantic/delete",
    ): "`LinearAttentionLayer.crop`, the next statement, first calls `self._check_crop` (this class's: both parts) before changing anything.",
    (
        "step19_refuse/cache_utils.py",
        "LinearAttentionAndStaticSlidingWindowAttentionLayer._check_crop: swapped: LinearAttentionLayer._check_crop(self, tokens_to_remove) <-> StaticSlidingWindowLayer._check_crop(self, tokens_to_remove)",
        "semantic/swap",
    ): "both checks only read and raise before anything changes; when both refuse only the message differs.",
    (
        "step19_refuse/cache_utils.py",
        "LinearAttentionAndStaticSlidingWindowAttentionLayer.crop: swapped: LinearAttentionLayer.crop(self, tokens_to_remove) <-> StaticSlidingWindowLayer.crop(self, tokens_to_remove)",
        "semantic/swap",
    ): "the parts share no state; the static sliding part's check, run again by `LinearAttentionLayer.crop` after its crop, passes (`is_croppable` unchanged, and a refused layer only allows a full removal, after which `0 < -tokens_to_remove < 0` is false).",
    (
        "step21_edges/cache_utils.py",
        "DynamicLayer.crop: swapped: self.keys = keys <-> self.values = self.values[..., :tokens_to_remove, :]",
        "semantic/swap",
    ): "two independent assignments: the values are sliced from `self.values` either way, and nothing reads `self.keys` in between.",
    (
        "step18_exact/cache_utils.py",
        "Cache.crop: deleted: if tokens_to_remove < 0: for layer in layers: if type(layer) is not DynamicLayer: break e…",
        "semantic/delete",
    ): "the fast path for plain dynamic layers only saves calls: without it they take the general path (each layer's check, which a `DynamicLayer` passes, then its `crop`), with the same slices.",
    (
        "step18_exact/cache_utils.py",
        "Cache.crop: swapped: if tokens_to_remove < 0: for layer in layers: if type(layer… <-> if tokens_to_remove: for layer in layers: layer._check_crop…",
        "semantic/swap",
    ): "the checks then run before the fast path: every check passes for plain dynamic layers, and for any other cache the fast path is skipped, so the same layers are cropped the same way.",
    (
        "step18_exact/cache_utils.py",
        "Cache.crop: deleted: for layer in layers: if type(layer) is not DynamicLayer: break else: stop = tokens_to_rem…",
        "semantic/delete",
    ): "the fast path for plain dynamic layers only saves calls: without it they take the general path (each layer's check, which a `DynamicLayer` passes, then its `crop`), with the same slices.",
    (
        "step18_exact/cache_utils.py",
        "Cache.crop: swapped: layer.keys = keys <-> layer.values = layer.values[..., :stop, :]",
        "semantic/swap",
    ): "two independent assignments: the values are sliced from `layer.values` either way, and nothing reads `layer.keys` in between.",
}
