# Step 1 of the fix for transformers 5.25.x (with the clamp of `cache_utils.py`), in
# `transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py`: the index keys move with the key and value states,
# however many tokens are removed. The exporter applies it to `modular_minimax_m3_vl.py` as well.


class MiniMaxM3VLSparseCacheLayer:
    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        # The index keys cover the same tokens as the key and value states (a layer may not have any yet)
        if tokens_to_remove != 0 and self.idx_keys is not None:
            self.idx_keys = self.idx_keys[..., : self.get_seq_length(), :]


class MiniMaxM3VLSparseStaticCacheLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Roll the write offset of both the main and the indexer buffers back, see `StaticLayer.crop` (clamped, in place).
        """
        super().crop(tokens_to_remove)
        if self.idx_keys is not None:
            self.idx_cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)
