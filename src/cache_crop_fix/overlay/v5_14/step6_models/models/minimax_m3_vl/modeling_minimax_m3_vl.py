# Our version of the `crop` methods of the MiniMax-M3-VL sparse cache layers
# (transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py, 5.14.x): the index keys follow the key and value
# states, in the dynamic layer (which computed a relative index after the states were already cropped, as noted in
# the review of #47720) and in the static one (which had no `crop`). The exporter applies it to
# `modular_minimax_m3_vl.py` as well.


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
        # In place and without reading either write position on the host (no device synchronization); the freed index
        # slots are hidden by the indexer's causal masking until the next `update_index` overwrites them
        if self.idx_keys is not None:
            self.idx_cumulative_length.clamp_(max=self.cumulative_length)
