# Step 21 of the fix for transformers 5.25.x, fork only, in `transformers/cache_utils.py`: the edges of
# `DynamicLayer.crop` that `generate` does not reach. A layer without any token yet (the empty 1-D states
# `early_initialization` leaves, as for `torch.export`) is left as it is instead of raising an `IndexError`, and a
# removal beyond 64 bits empties the layer without the warning of a truncated slice bound (the indexer of
# `DynamicIndexedLayer` is cut to the kept tokens for the same reason).
#
# Each class below is named like the upstream class it changes and holds only the methods this step replaces; the
# patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The
# classes here are never instantiated.


class DynamicLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer. Removing more tokens than the layer holds
        empties it.
        """
        # Legacy path: `tokens_to_remove` represents the final absolute size that the cache should have
        if tokens_to_remove > 0:
            raise ValueError(
                f"Calling `crop` with a positive value (`{tokens_to_remove}`) is not supported. "
                "Please use a negative integer to remove that number of tokens from the cache instead."
            )

        # Nothing to do in these cases: 0 tokens to crop or the layer is not initialized (can happen with KV sharing)
        if tokens_to_remove == 0 or not self.is_initialized:
            return

        # Crop the cache. Slicing empties the layer when more tokens are removed than it holds, but it truncates a bound
        # beyond 64 bits with a warning: clamp those first (no layer holds 2**62 tokens)
        if tokens_to_remove < -(2**62):
            tokens_to_remove = -(2**62)
        try:
            keys = self.keys[..., :tokens_to_remove, :]
        except IndexError:
            # No token yet: `early_initialization` leaves empty 1-D states until the first `update` (caught rather than
            # checked, so that the usual crop pays nothing for it)
            return
        self.keys = keys
        self.values = self.values[..., :tokens_to_remove, :]


class DynamicIndexedLayer:
    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        if tokens_to_remove == 0:
            return
        # The indexer positions and keys cover the same tokens as the key and value states
        new_length = self.get_seq_length()
        if self.indexer_position_ids is not None:
            self.indexer_position_ids = self.indexer_position_ids[..., :new_length]
        if not self.is_indexer_initialized or self.indexer_keys.numel() == 0:
            return
        self.indexer_keys = self.indexer_keys[:, :new_length, :]
