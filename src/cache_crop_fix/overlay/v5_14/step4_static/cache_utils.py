# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 4 changes:
# static layers crop by rewinding their write position in place, within what they still hold.
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces
# (a later step may replace them again); module-level functions are helpers added to the upstream module. The patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file, so this
# file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.

from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import (
        CacheLayerMixin,
        LinearAttentionCacheLayerMixin,
        LinearAttentionLayer,
        _get_crop_length,
    )


class StaticLayer:
    def _check_crop(self, max_length: int) -> None:
        """Static layers keep every token they have seen in their preallocated tensors, so they can always be cropped."""

    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states by rewinding the write position. The write position moves in place, to
        keep its static address (used by cudagraphs), and without reading it on the host: no device synchronization.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        self._check_crop(max_length)
        if not self.is_initialized:
            return
        # The freed slots keep their stale states: the causal mask hides every slot at or beyond the position being
        # written, and the next `update` overwrites them from the new write position on. The counter cannot go below
        # 0, nor move by more than `max_cache_len` (an int64 counter cannot take an arbitrary Python int)
        if max_length < 0:
            self.cumulative_length.sub_(min(-max_length, self.max_cache_len)).clamp_(min=0)
        elif max_length == 0:
            self.cumulative_length.zero_()
        else:
            self.cumulative_length.clamp_(max=min(max_length, self.max_cache_len))


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
        The layer counts its tokens on the host too (`cumulative_length_int`), so the device is not synchronized; the
        freed slots are zeroed, so that the layer holds exactly what a fresh layer holding the kept tokens would.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        self._check_crop(max_length)
        seq_length = self.cumulative_length_int
        new_length = _get_crop_length(max_length, seq_length)
        if new_length >= seq_length or not self.is_initialized:
            return
        # Beyond the window only a full rollback gets here (`_check_crop`), which empties every slot
        self.keys[:, :, new_length:seq_length].zero_()
        self.values[:, :, new_length:seq_length].zero_()
        self.cumulative_length.fill_(new_length)
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
        # The indexer keys cover the same tokens as the key and value states. Their write position moves in place,
        # without reading either position on the host; the freed indexer slots are hidden by the indexer's causal
        # mask until the next `update_indexer` overwrites them
        if self.is_indexer_initialized:
            self.indexer_cumulative_length.clamp_(max=self.cumulative_length)


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


class Cache:
    def _check_crop(self, max_length: int) -> list[int | None]:
        """
        Raises an error, without changing anything, if some layer cannot honour `crop(max_length)`. Otherwise, returns
        the argument each layer must be cropped with, or `None` for a layer that has nothing to remove.

        The meaning of the argument is decided here, layer by layer, from that layer's own length (the layers of a
        cache may hold different numbers of tokens, e.g. in an `MtpCache`): every layer receives either `0` (a full
        rollback, also when at least its cached length is removed) or the negative number of tokens to remove.
        Layers whose cached states are not a list of tokens (linear attention) have no length of their own: they
        follow the longest attention layer.

        Static attention layers count their tokens in a device tensor, and reading it on the host waits for the device.
        They crop in place from the argument itself (see `StaticLayer.crop`), so they receive it as it is, and their
        length is read only where another part needs it: the linear attention part of a static hybrid layer, or
        linear attention layers following the longest attention layer. Those lengths are read together, once per call.
        """
        layers = self.layers
        seq_lengths = [layer.get_seq_length() if isinstance(layer, CacheLayerMixin) else None for layer in layers]
        has_attention = any(seq_length is not None for seq_length in seq_lengths)
        follows_longest = has_attention and None in seq_lengths
        # `crop(0)` is a full rollback of every layer, whatever its length
        to_read = [
            idx
            for idx, seq_length in enumerate(seq_lengths)
            if isinstance(seq_length, torch.Tensor)
            and max_length != 0
            and (follows_longest or isinstance(layers[idx], LinearAttentionCacheLayerMixin))
        ]
        if to_read:
            device = seq_lengths[to_read[0]].device
            # One device-to-host read for all of them
            read = torch.stack([seq_lengths[idx].reshape(()).to(device) for idx in to_read]).tolist()
            for idx, seq_length in zip(to_read, read):
                seq_lengths[idx] = seq_length
        if max_length > 0 and not has_attention and layers:
            raise ValueError(
                "This cache only holds linear attention layers, which have no sequence length: use `crop(-k)` to "
                "remove the last k tokens instead of cropping to an absolute length."
            )
        # Lengths left on the device are not needed: `crop(0)` gives `0` to every layer
        host_lengths = [
            length for length in seq_lengths if length is not None and not isinstance(length, torch.Tensor)
        ]
        longest = max(host_lengths) if follows_longest and host_lengths else None
        layer_max_lengths = []
        for layer, seq_length in zip(layers, seq_lengths):
            layer_max_length = max_length
            # A length left on the device: a static attention layer, cropped in place from the argument itself
            if not isinstance(seq_length, torch.Tensor) and (seq_length is not None or longest is not None):
                seq_length = longest if seq_length is None else seq_length
                new_length = _get_crop_length(max_length, seq_length)
                if new_length >= seq_length and seq_length > 0:
                    layer_max_length = None
                else:
                    layer_max_length = new_length - seq_length if new_length > 0 else 0
            if layer_max_length is not None:
                layer._check_crop(layer_max_length)
            layer_max_lengths.append(layer_max_length)
        return layer_max_lengths
