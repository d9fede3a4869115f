# Step 21 of the fix for transformers 5.25.x, fork only, in
# `transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py`: the dynamic layer's index keys are cut to the kept
# tokens (not sliced by the removal, which warns beyond 64 bits), and a layer without index keys yet crops its states.
# The exporter applies it to `modular_minimax_m3_vl.py` as well.


class MiniMaxM3VLSparseCacheLayer:
    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        # The index keys cover the same tokens as the key and value states (a layer may not have any yet)
        if tokens_to_remove != 0 and self.idx_keys is not None:
            self.idx_keys = self.idx_keys[..., : self.get_seq_length(), :]
