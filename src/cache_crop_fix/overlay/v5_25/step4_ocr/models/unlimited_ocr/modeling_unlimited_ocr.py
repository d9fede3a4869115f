# Step 4 of the fix for transformers 5.25.x, in `transformers/models/unlimited_ocr/modeling_unlimited_ocr.py`: the static
# reference sliding-window layer inherited `StaticSlidingWindowLayer.crop`, which only rolls the sliding window part back:
# its prefill (reference) tokens were never removed. The exporter applies it to `modular_unlimited_ocr.py` as well.
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import StaticSlidingWindowLayer


class UnlimitedOcrStaticReferenceSlidingWindowLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer: the sliding window tokens first, then the prefill
        tokens, by moving the write positions back (the next tokens overwrite the freed slots, see `StaticLayer.crop`).
        Removing more tokens than the layer holds empties it. The prefill length stays as it was: the next tokens fill
        the prefill again, up to it.
        """
        sliding_length = self.cumulative_length_int
        StaticSlidingWindowLayer.crop(self, tokens_to_remove)
        # Clear the freed sliding slots (host-side bounds, no device sync), so that the layer holds what a layer that only
        # saw the kept tokens holds: the whole window if it wrapped around (only a full rollback is allowed then)
        if self.is_initialized and self.cumulative_length_int < sliding_length:
            end = min(sliding_length, self.max_cache_len)
            self.keys[:, :, self.cumulative_length_int : end].zero_()
            self.values[:, :, self.cumulative_length_int : end].zero_()
        prefill_tokens_to_remove = -tokens_to_remove - sliding_length
        if prefill_tokens_to_remove > 0:
            self.prefill_cumulative_length = max(self.prefill_cumulative_length - prefill_tokens_to_remove, 0)
