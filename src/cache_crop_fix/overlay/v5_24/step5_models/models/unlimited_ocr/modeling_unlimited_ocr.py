# Step 5 of the fix for transformers 5.24.x, in `transformers/models/unlimited_ocr/modeling_unlimited_ocr.py`: the
# reference sliding window layers remove the sliding window tokens first, then the prefill (reference) tokens, clamp
# what they remove, and refuse what their window already dropped or overwrote. The exporter applies it to
# `modular_unlimited_ocr.py` as well.
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import (
        DynamicSlidingWindowLayer,
        StaticSlidingWindowLayer,
    )


class UnlimitedOcrDynamicReferenceSlidingWindowLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """The prefill tokens are all stored, so only the sliding window part may refuse a crop."""
        DynamicSlidingWindowLayer._check_crop(self, -min(-tokens_to_remove, self.cumulative_length))

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer: the sliding window tokens first, then
        the prefill tokens. Removing at least as many tokens as the layer holds empties it. The prefill length stays as
        it was: the next tokens fill the prefill again, up to it. This also restricts the sliding window states back to
        their minimal working size, see `DynamicSlidingWindowLayer.crop`.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        sliding_length = self.cumulative_length
        # Validates the argument, checks the whole layer (see `_check_crop`), then crops the sliding window part
        DynamicSlidingWindowLayer.crop(self, tokens_to_remove)
        prefill_tokens_to_remove = -int(tokens_to_remove) - sliding_length
        if prefill_tokens_to_remove > 0 and self.is_initialized:
            new_prefill_length = max(self.prefill_cumulative_length - prefill_tokens_to_remove, 0)
            self.prefill_keys = self.prefill_keys[..., :new_prefill_length, :]
            self.prefill_values = self.prefill_values[..., :new_prefill_length, :]
            self.prefill_cumulative_length = new_prefill_length


class UnlimitedOcrStaticReferenceSlidingWindowLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """The prefill tokens are all stored, so only the sliding window part may refuse a crop."""
        StaticSlidingWindowLayer._check_crop(self, -min(-tokens_to_remove, self.cumulative_length_int))

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer: the sliding window tokens first, then
        the prefill tokens, by moving the write positions back and zeroing the freed slots in-place. Removing at least
        as many tokens as the layer holds empties it. The prefill length (and buffer) stays as it was: the next tokens
        fill the prefill again, up to it.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        sliding_length = self.cumulative_length_int
        # Validates the argument, checks the whole layer (see `_check_crop`), then crops the sliding window part
        StaticSlidingWindowLayer.crop(self, tokens_to_remove)
        # Clear the freed sliding slots (host-side bounds, no device sync): the layer then holds what a layer that only saw
        # the kept tokens holds
        if self.is_initialized and self.cumulative_length_int < sliding_length:
            start = self.cumulative_length_int if sliding_length <= self.max_cache_len else 0
            self.keys[:, :, start : min(sliding_length, self.max_cache_len)].zero_()
            self.values[:, :, start : min(sliding_length, self.max_cache_len)].zero_()
        prefill_tokens_to_remove = -int(tokens_to_remove) - sliding_length
        if prefill_tokens_to_remove > 0 and self.is_initialized:
            new_prefill_length = max(self.prefill_cumulative_length - prefill_tokens_to_remove, 0)
            self.prefill_keys[:, :, new_prefill_length : self.prefill_cumulative_length].zero_()
            self.prefill_values[:, :, new_prefill_length : self.prefill_cumulative_length].zero_()
            self.prefill_cumulative_length = new_prefill_length

    @property
    def is_croppable(self) -> bool:
        """
        Whether `crop` can put this layer back as it was: once the prefill length is known, as long as the decoded
        tokens cannot outgrow the sliding window (as upstream), and did not so far.
        """
        if self.prefill_length is None:
            return False
        return self.prefill_max_cache_len <= self.prefill_length and self.cumulative_length_int <= self.max_cache_len
