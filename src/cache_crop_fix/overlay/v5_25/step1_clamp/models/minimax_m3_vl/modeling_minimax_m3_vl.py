# Step 1 of the fix for transformers 5.25.x (with the clamp of `cache_utils.py`), in
# `transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py`: the static layer's index offset stops at 0, as its
# main offset does (the dynamic layer's index keys are sliced, which empties them). The exporter applies it to
# `modular_minimax_m3_vl.py` as well.


class MiniMaxM3VLSparseStaticCacheLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Roll the write offset of both the main and the indexer buffers back, see `StaticLayer.crop`.
        """
        super().crop(tokens_to_remove)
        if self.idx_keys is not None and tokens_to_remove:
            self.idx_cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)
