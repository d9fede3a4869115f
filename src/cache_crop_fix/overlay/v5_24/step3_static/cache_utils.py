# Step 3 of the fix for transformers 5.24.x, in `transformers/cache_utils.py`: the static layers clamp oversized
# removals (their write positions never go negative, and move in-place without a device synchronization), move their
# side tensors with them, refuse what a sliding window already overwrote, and the static hybrid layers crop their
# attention part too.
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import (
        LinearAttentionCacheLayerMixin,
        StaticLayer,
        StaticSlidingWindowLayer,
        _check_hybrid_crop,
        _crop_hybrid,
        _get_number_of_tokens_to_remove,
    )


class StaticLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer (at most all of them), by moving the
        write position back. The write position is moved in-place, to keep its static address, and without reading it
        on the host (no device synchronization).

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        self._check_crop(-number_of_tokens)
        if number_of_tokens == 0 or not self.is_initialized:
            return
        # The freed slots keep their stale states: the next `update` overwrites them from the new write position on,
        # and until then the causal mask hides every slot past the position being written. Removing more than
        # `max_cache_len` tokens is removing `max_cache_len` (an int64 counter cannot take more), and the count stops
        # at 0
        self.cumulative_length.sub_(min(number_of_tokens, self.max_cache_len)).clamp_(min=0)


class StaticSlidingWindowLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error if the layer went beyond its window: the states to keep were overwritten then. Removing nothing
        or everything is always possible.
        """
        number_of_tokens = -tokens_to_remove
        seq_length = self.cumulative_length_int
        if 0 < number_of_tokens < seq_length and seq_length > self.max_cache_len:
            raise ValueError(
                f"Cannot remove {number_of_tokens} token(s) from a `{self.__class__.__name__}` that has seen "
                f"{seq_length} tokens: beyond its window of {self.max_cache_len} tokens, the states to keep were "
                "already overwritten. Only a full rollback (`crop(-cache.get_seq_length())`) is possible now. Use a "
                "`DynamicCache` with `activate_past_recording()` to roll back sliding window layers."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer (at most all of them), by moving the
        write position back, as long as the layer never went beyond its window. Its host-side count tells how many
        tokens it holds, so the device is not synchronized.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        self._check_crop(-number_of_tokens)
        seq_length = self.cumulative_length_int
        new_length = max(seq_length - number_of_tokens, 0)
        if new_length == seq_length:
            return
        # Beyond the window only a full rollback gets here. The freed slots keep their stale states: the causal and
        # sliding window masks hide every slot past the position being written, and the next `update` overwrites them
        self.cumulative_length.fill_(new_length)
        self.cumulative_length_int = new_length

    @property
    def is_croppable(self) -> bool:
        """
        Whether `crop` can put this layer back as it was. This is only the case as long as it never goes beyond its
        window: `_is_croppable` tells whether it can within the `max_cache_len` it was created with.
        """
        return self._is_croppable and self.cumulative_length_int <= self.max_cache_len


class StaticIndexedLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer (at most all of them), together with
        their indexer keys and indexer positions, by moving the write positions back.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        super().crop(tokens_to_remove)
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        if number_of_tokens == 0:
            return
        # The indexer keys and positions cover the same tokens as the key and value states. The indexer write position
        # moves in-place, without reading either position on the host, and the freed indexer slots are hidden by the
        # indexer's mask until the next `update_indexer` overwrites them
        if self.indexer_position_ids is not None:
            kept_positions = max(self.indexer_position_ids.shape[-1] - number_of_tokens, 0)
            self.indexer_position_ids = self.indexer_position_ids[..., :kept_positions]
        if self.is_indexer_initialized:
            self.indexer_cumulative_length.clamp_(max=self.cumulative_length)


class LinearAttentionAndStaticFullAttentionLayer:
    def _check_crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        _check_hybrid_crop(self, StaticLayer, tokens_to_remove, seq_length)

    def crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from both the linear attention and the static attention states.
        Removing at least as many tokens as the attention states hold resets the linear attention states.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
            seq_length (`int`, *optional*):
                The number of tokens of the attention part, if the caller already read it (see [`Cache.crop`]).
        """
        _crop_hybrid(self, StaticLayer, tokens_to_remove, seq_length)


class LinearAttentionAndStaticSlidingWindowAttentionLayer:
    def _check_crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        _check_hybrid_crop(self, StaticSlidingWindowLayer, tokens_to_remove, seq_length)

    def crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from both the linear attention and the static sliding window
        attention states. Removing at least as many tokens as the layer has seen resets the linear attention states.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
            seq_length (`int`, *optional*):
                The number of tokens of the attention part, if the caller already read it (see [`Cache.crop`]).
        """
        _crop_hybrid(self, StaticSlidingWindowLayer, tokens_to_remove, seq_length)

    @property
    def is_croppable(self) -> bool:
        """Whether `crop` can put both the linear attention and the sliding window parts back as they were."""
        return LinearAttentionCacheLayerMixin.is_croppable.fget(self) and StaticSlidingWindowLayer.is_croppable.fget(
            self
        )
