# Step 1 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: `crop` clamps oversized removals, so that
# removing more tokens than a layer holds empties it instead of driving its counters negative (`DynamicLayer` already
# does: slicing a shorter tensor empties it).
#
# Each class below is named like the upstream class it changes and holds only the methods this step replaces; the
# patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The
# classes here are never instantiated.


class DynamicSlidingWindowLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer. This will also restrict the size of the cached states back to their
        minimal working size, i.e. `sliding_window - 1` if they reached the sliding window length. This means that `crop(0)` will not
        necessarily always be a no-op, as it may still remove useless states (i.e. states that are not needed for the next `forward`).
        """
        # Clamp the removal to the tokens seen, so that `cumulative_length` never goes negative
        if tokens_to_remove < 0:
            tokens_to_remove = max(tokens_to_remove, -self.cumulative_length)
        # If we are beyond the sliding window, we need to be more careful
        if self.get_seq_length() >= self.sliding_window:
            if not self.record_past:
                raise RuntimeError(
                    "`crop` was called, but the current layer does not track past states, and the sliding window size was already "
                    "reached. Call `activate_past_recording` before `crop` to be able to rollback the cache."
                )
            if tokens_to_remove > 0:
                raise RuntimeError(
                    "Once the sliding window size has been reached, `DynamicSlidingWindowLayer` can only be cropped by passing a "
                    "negative int, to specify how many tokens to remove"
                )
            # In this case, simply restrict the size back to sliding window without cropping
            if tokens_to_remove == 0:
                self.keys = self.keys[:, :, -self.sliding_window + 1 :, :]
                self.values = self.values[:, :, -self.sliding_window + 1 :, :]
            # In this case, we crop and restrict the size back to the sliding window if still larger
            else:
                tokens_to_remove = abs(tokens_to_remove)
                self.keys = self.keys[:, :, -self.sliding_window + 1 - tokens_to_remove : -tokens_to_remove, :]
                self.values = self.values[:, :, -self.sliding_window + 1 - tokens_to_remove : -tokens_to_remove, :]
                self.cumulative_length = self.cumulative_length - tokens_to_remove

        # If we did not reach the sliding window, we can do the same as for a full attention layer
        else:
            super().crop(tokens_to_remove)
            self.cumulative_length = self.keys.shape[-2]


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


class StaticLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer.
        """
        if tokens_to_remove > 0:
            raise RuntimeError(
                "Static layers can only be cropped by passing a negative int, to specify how many tokens to remove"
            )
        # `generate` calls `crop(0)` after every forward: it launches no kernel
        if tokens_to_remove == 0:
            return
        # Note that we do not touch the actual `keys` and `values` tensors, we simply take care of updating `cumulative_length` so that
        # the next `update` will overwrite the stale states
        # Note that has to be performed in-place, as we have a static address that we need to keep, and without reading it on the host
        # (no device sync): removing more than `max_cache_len` tokens is removing `max_cache_len`, and the count stops at 0
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
