# Step 19 of the fix for transformers 5.25.x, fork only, in `transformers/cache_utils.py`: the attention layers that
# cannot put their states back as they were refuse a crop before anything changes (`Cache.crop` asks every layer first,
# since step 18), instead of keeping fewer or other tokens than the kept ones: a sliding window that already dropped the
# tokens it needs, and the quantized layers (a static sliding window refuses since step 17).
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces;
# the patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file.
# The classes here are never instantiated.
import operator
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import (
        DynamicSlidingWindowLayer,
        LinearAttentionLayer,
    )


class DynamicSlidingWindowLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises if the window must show, after the crop, tokens it already dropped: once the window is full, only the tokens
        recorded since the last `crop` (see `activate_past_recording`) can be removed. Removing every token is always possible.
        """
        seq_length = self.cumulative_length
        if tokens_to_remove >= 0 or -tokens_to_remove >= seq_length or seq_length < self.sliding_window:
            return
        if not self.record_past:
            raise RuntimeError(
                "`crop` was called, but the current layer does not track past states, and the sliding window size was already "
                "reached. Call `activate_past_recording` before `crop` to be able to rollback the cache."
            )
        first_stored_token = seq_length - self.keys.shape[-2]
        if max(seq_length + tokens_to_remove - self.sliding_window + 1, 0) < first_stored_token:
            raise ValueError(
                f"Cannot remove {-tokens_to_remove} of the {seq_length} tokens of a `{self.__class__.__name__}`: its sliding "
                f"window of {self.sliding_window} would need tokens it dropped, as it holds the last {self.keys.shape[-2]} "
                "only. Only the tokens added since the last `crop` can be removed, or all of them "
                "(`crop(-cache.get_seq_length())`)."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer. This will also restrict the size of the cached states back to their
        minimal working size, i.e. `sliding_window - 1` if they reached the sliding window length. This means that `crop(0)` will not
        necessarily always be a no-op, as it may still remove useless states (i.e. states that are not needed for the next `forward`).
        Removing more tokens than the layer holds empties it, and a crop that needs tokens the window dropped raises.
        """
        if type(tokens_to_remove) is not int:
            # A numpy integer or a 0-d tensor, from a direct call: `cumulative_length` stays an int
            tokens_to_remove = operator.index(tokens_to_remove)
        # Nothing to remove if the layer is not initialized (can happen with KV sharing, or after a `reset`); a positive
        # value still raises
        if not self.is_initialized:
            return super().crop(tokens_to_remove)
        if tokens_to_remove < 0:
            # Clamp the removal to the tokens seen, so that `cumulative_length` never goes negative
            tokens_to_remove = max(tokens_to_remove, -self.cumulative_length)
            # This part's own check (a hybrid layer's `_check_crop` also checks its linear attention part, cropped
            # already); `crop(0)` and positive values need none
            DynamicSlidingWindowLayer._check_crop(self, tokens_to_remove)
        # If we are beyond the sliding window, we need to be more careful
        if self.get_seq_length() >= self.sliding_window:
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
            # Without any token, the states may still be the empty 1-D ones of `early_initialization`
            if self.cumulative_length:
                self.cumulative_length = self.keys.shape[-2]


class BaseQuantizedLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """Raises for a partial removal: the quantized part would keep the removed tokens (`is_croppable` is `False`)."""
        if 0 < -tokens_to_remove < self.get_seq_length():
            raise ValueError(
                f"`{self.__class__.__name__}` cannot remove {-tokens_to_remove} of its {self.get_seq_length()} tokens: its "
                "quantized states would keep them. Only all of them can be removed (`crop(-cache.get_seq_length())`); use a "
                "non-quantized cache (e.g. `DynamicCache`) to roll tokens back."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Quantized layers can only remove all their tokens (or none): a partial removal raises (see `_check_crop`).
        """
        if tokens_to_remove > 0:
            super().crop(tokens_to_remove)  # raises
        self._check_crop(tokens_to_remove)
        if tokens_to_remove < 0 and self.get_seq_length() > 0:
            self.reset()
            self.cumulative_length = 0


class LinearAttentionAndSlidingWindowAttentionLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        LinearAttentionLayer._check_crop(self, tokens_to_remove)
        DynamicSlidingWindowLayer._check_crop(self, tokens_to_remove)

    def crop(self, tokens_to_remove: int) -> None:
        # Check both parts before cropping either
        self._check_crop(tokens_to_remove)
        LinearAttentionLayer.crop(self, tokens_to_remove)
        DynamicSlidingWindowLayer.crop(self, tokens_to_remove)
