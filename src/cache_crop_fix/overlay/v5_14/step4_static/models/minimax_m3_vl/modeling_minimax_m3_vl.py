# Our version of `MiniMaxM3VLSparseStaticCacheLayer.crop` (transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py,
# 5.14.x), step 4: the static index keys rewind in place with the static key and value states. The exporter applies it
# to `modular_minimax_m3_vl.py` as well.


class MiniMaxM3VLSparseStaticCacheLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states, and the index keys with them, by rewinding their write positions.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        super().crop(max_length)
        new_length = int(self.get_seq_length())
        index_length = int(self.idx_cumulative_length)
        if self.idx_keys is not None and index_length > new_length:
            self.idx_keys[:, :, new_length:index_length].zero_()
            self.idx_cumulative_length.fill_(new_length)
