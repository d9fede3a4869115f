# Step 20 of the fix for transformers 5.25.x, fork only, in `transformers/models/deepseek_v4/modeling_deepseek_v4.py`:
# the compressed-attention caches say they cannot be cropped (`is_croppable = False`, so `generate` never rolls them back),
# but `crop` cut their sliding window and kept the compressor buffers and compressed entries of the removed tokens. A
# partial crop now raises before anything changes, and removing every token resets the layer.


class DeepseekV4HCACache:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """Raises for a partial removal: the compressor states of the removed tokens cannot be rolled back."""
        if 0 < -tokens_to_remove < self.cumulative_length:
            raise ValueError(
                f"Cannot remove {-tokens_to_remove} of the {self.cumulative_length} tokens of a `{self.__class__.__name__}`: "
                "its compressor states cannot be rolled back (`is_croppable` is `False`). Only all of them can be removed "
                "(`crop(-cache.get_seq_length())`)."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove every token (`tokens_to_remove` at least the number of tokens seen), which resets the layer, or none. A partial
        removal raises, see `_check_crop`.
        """
        self._check_crop(tokens_to_remove)
        if tokens_to_remove < 0 and self.cumulative_length > 0:
            self.reset()
            self.cumulative_length = 0
        else:
            super().crop(tokens_to_remove)
