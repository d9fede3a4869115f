# Step 4 of the fix for transformers 5.25.x, in `transformers/models/unlimited_ocr/modeling_unlimited_ocr.py`: the static
# reference sliding-window layer inherited `StaticSlidingWindowLayer.crop`, which only rolls the sliding window part back:
# its prefill (reference) tokens were never removed. The exporter applies it to `modular_unlimited_ocr.py` as well.


class UnlimitedOcrStaticReferenceSlidingWindowLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer: the sliding window tokens first, then the prefill
        tokens. Removing more tokens than the layer holds empties it; the next tokens fill the prefill again.
        """
        sliding_length = self.cumulative_length_int
        super().crop(tokens_to_remove)
        prefill_tokens_to_remove = -tokens_to_remove - sliding_length
        if prefill_tokens_to_remove > 0:
            self.prefill_cumulative_length = max(self.prefill_cumulative_length - prefill_tokens_to_remove, 0)
