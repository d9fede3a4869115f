# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 1 changes:
# `crop(0)` empties a layer and an oversized `crop(-k)` empties it instead of keeping stale tokens (#47433). This step
# is the minimal fix: upstream's methods with only the index computation changed.
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces
# (a later step may replace them again); module-level functions are helpers added to the upstream module. The patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file, so this
# file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.


class DynamicLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop the past key values up to a new `max_length` in terms of tokens. `max_length` can also be negative
        to remove `max_length` tokens: removing at least the current length empties the cache.
        """
        if max_length < 0:
            max_length = max(self.get_seq_length() - abs(max_length), 0)

        if self.get_seq_length() <= max_length:
            return

        self.keys = self.keys[..., :max_length, :]
        self.values = self.values[..., :max_length, :]


class DynamicIndexedLayer:
    def crop(self, max_length: int) -> None:
        super().crop(max_length)
        if not self.is_indexer_initialized or self.indexer_keys.numel() == 0:
            return
        effective = max_length if max_length >= 0 else max(self.indexer_keys.shape[1] - abs(max_length), 0)
        if self.indexer_keys.shape[1] > effective:
            self.indexer_keys = self.indexer_keys[:, :effective, :]
