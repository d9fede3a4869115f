# Our version of `MiniMaxM3VLSparseCacheLayer.crop` (transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py,
# 5.14.x), step 1: the index keys are cut to the length the key and value states keep, so that a full or oversized
# rollback removes them too. The exporter applies it to `modular_minimax_m3_vl.py` as well.


class MiniMaxM3VLSparseCacheLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states, and the index keys with them, along the sequence dimension.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        super().crop(max_length)
        new_length = self.get_seq_length()
        if self.idx_keys is not None and self.idx_keys.shape[-2] > new_length:
            self.idx_keys = self.idx_keys[..., :new_length, :]
