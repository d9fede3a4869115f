# Step 5 of the fix for transformers 5.24.x, in `transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py`: the
# index keys move with the key and value states, however many tokens are removed. The exporter applies it to
# `modular_minimax_m3_vl.py` as well.


class MiniMaxM3VLSparseCacheLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer (at most all of them), together with
        their index keys.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        super().crop(tokens_to_remove)
        # The index keys cover the same tokens as the key and value states
        if self.idx_keys is not None:
            self.idx_keys = self.idx_keys[..., : self.get_seq_length(), :]


class MiniMaxM3VLSparseStaticCacheLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer (at most all of them), together with
        their index keys, by moving the write positions of both buffers back, see `StaticLayer.crop`.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        super().crop(tokens_to_remove)
        # In-place and without reading either write position on the host; the freed index slots are hidden by the
        # mask until the next `update_index` overwrites them
        if self.idx_keys is not None:
            self.idx_cumulative_length.clamp_(max=self.cumulative_length)
