# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 1 changes:
# `crop(0)` empties a layer and an oversized `crop(-k)` empties it instead of keeping stale tokens (#47433).
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces
# (a later step may replace them again); module-level functions are helpers added to the upstream module. The patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file, so this
# file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.


class DynamicLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states along the sequence dimension.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        if not self.is_initialized or self.keys.numel() == 0:
            return
        if max_length > 0 and max_length >= self.keys.shape[-2]:
            return

        # Slicing does the clamping: `[..., :-k, :]` keeps no token when `k` is at least the length
        self.keys = self.keys[..., :max_length, :]
        self.values = self.values[..., :max_length, :]


class DynamicIndexedLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states, and the indexer keys with them, along the sequence dimension.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        super().crop(max_length)
        # The indexer keys cover the same tokens as the key and value states, so they are cut at the same length
        new_length = self.get_seq_length()
        if self.is_indexer_initialized and self.indexer_keys.numel() > 0 and self.indexer_keys.shape[1] > new_length:
            self.indexer_keys = self.indexer_keys[:, :new_length, :]
