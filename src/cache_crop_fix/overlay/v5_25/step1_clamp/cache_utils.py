# Step 1 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: `crop` clamps oversized removals, so that
# removing more tokens than a layer holds empties it instead of driving its counters negative (`DynamicLayer` and the
# indexer of `DynamicIndexedLayer` already do: slicing a shorter tensor empties it). `StaticIndexedLayer.crop` also cuts
# the positions some models keep in `indexer_position_ids` (Qwen4-Exp concatenates its 3-D positions to them every
# forward, "so cache operations such as reset, crop and beam reordering also update the position history"): after a
# rollback the indexer read the positions of rejected tokens. `DynamicIndexedLayer.crop` already cuts them.
#
# Each class below is named like the upstream class it changes and holds only the methods this step replaces; the
# patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The
# classes here are never instantiated. `DynamicSlidingWindowLayer.crop` gains one statement before its first one: a
# codemod (see `cache_crop_fix.codemod`) rather than a copy of the method.

CODEMODS = {
    "DynamicSlidingWindowLayer.crop": (
        "# If we are beyond the sliding window, we need to be more careful",
        "# Removing more tokens than were seen removes them all (`cumulative_length` must not go negative)\n"
        "tokens_to_remove = max(tokens_to_remove, -self.cumulative_length)\n"
        "# If we are beyond the sliding window, we need to be more careful",
    )
}


class StaticLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer.
        """
        if tokens_to_remove > 0:
            raise RuntimeError(
                "Static layers can only be cropped by passing a negative int, to specify how many tokens to remove"
            )
        if tokens_to_remove == 0:  # `generate` calls `crop(0)` after every forward
            return
        # Note that we do not touch the actual `keys` and `values` tensors, we simply take care of updating `cumulative_length` so that
        # the next `update` will overwrite the stale states
        # Note that has to be performed in-place, as we have a static address that we need to keep
        self.cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)


class StaticSlidingWindowLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer.
        """
        # Note that this is only correct as long as we never went beyond the window, which `is_croppable` guarantees - otherwise the
        # evicted states cannot be recovered
        super().crop(tokens_to_remove)
        self.cumulative_length_int = max(self.cumulative_length_int + tokens_to_remove, 0)


class StaticIndexedLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer.
        """
        super().crop(tokens_to_remove)
        if self.is_indexer_initialized and tokens_to_remove:
            self.indexer_cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)
        if self.indexer_position_ids is not None and tokens_to_remove:
            kept = max(self.indexer_position_ids.shape[-1] + tokens_to_remove, 0)
            self.indexer_position_ids = self.indexer_position_ids[..., :kept]
