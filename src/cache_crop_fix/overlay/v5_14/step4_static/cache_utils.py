# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 4 changes:
# static layers crop by rewinding their write position in place, within what they still hold.
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces
# (a later step may replace them again); module-level functions are helpers added to the upstream module. The patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file, so this
# file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.

from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import LinearAttentionLayer, _get_crop_length


class StaticLayer:
    def _check_crop(self, max_length: int) -> None:
        """Static layers keep every token they have seen in their preallocated tensors, so they can always be cropped."""

    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states by rewinding the write position. The freed slots are zeroed, so that the
        layer holds exactly what a fresh layer holding the kept tokens would. All changes are in-place, to keep the
        static tensor addresses.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        self._check_crop(max_length)
        seq_length = int(self.get_seq_length())
        new_length = _get_crop_length(max_length, seq_length)
        if new_length >= seq_length:
            return

        self.keys[:, :, new_length:seq_length].zero_()
        self.values[:, :, new_length:seq_length].zero_()
        self.cumulative_length.fill_(new_length)


class StaticSlidingWindowLayer:
    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if `crop(max_length)` needs states that the sliding window already overwrote. A full rollback
        is always possible, since nothing needs to be kept.
        """
        seq_length = self.get_seq_length()
        new_length = _get_crop_length(max_length, seq_length)
        if 0 < new_length < seq_length and seq_length > self.max_cache_len:
            raise ValueError(
                f"Cannot crop a `{self.__class__.__name__}` to {new_length} tokens: it has seen {seq_length} tokens, "
                f"more than its window of {self.max_cache_len}, so the states to keep were already overwritten. Only "
                "a full rollback (`crop(-cache.get_seq_length())`) is possible now. Use a `DynamicCache` to roll "
                "back tokens within the window."
            )

    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states by rewinding the write position, as long as no token was overwritten yet.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        # `get_seq_length` reads `cumulative_length_int`, which the parent's crop leaves as it is
        new_length = _get_crop_length(max_length, self.get_seq_length())
        super().crop(max_length)
        self.cumulative_length_int = new_length


class StaticIndexedLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states, and the indexer keys with them, by rewinding their write positions.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        super().crop(max_length)
        new_length = int(self.get_seq_length())
        indexer_length = int(self.indexer_cumulative_length)
        if self.is_indexer_initialized and indexer_length > new_length:
            self.indexer_keys[:, new_length:indexer_length].zero_()
            self.indexer_cumulative_length.fill_(new_length)


class LinearAttentionAndStaticFullAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        StaticLayer._check_crop(self, max_length)

    def crop(self, max_length: int) -> None:
        # Both parts are checked before either changes
        self._check_crop(max_length)
        StaticLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)


class LinearAttentionAndStaticSlidingWindowAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        StaticSlidingWindowLayer._check_crop(self, max_length)

    def crop(self, max_length: int) -> None:
        # Both parts are checked before either changes
        self._check_crop(max_length)
        StaticSlidingWindowLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)
