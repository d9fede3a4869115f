# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x).
#
# Each class below is named like the upstream class it changes and holds only the methods we add or replace; the
# module-level helpers are added to the upstream module. At runtime `cache_crop_fix.patcher` installs them on the
# upstream classes (with the upstream module's globals), and the exporter transplants them into upstream's file, so
# this file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.
import operator
import warnings
from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import LinearAttentionLayer


def _check_crop_argument(max_length, tokens_to_remove) -> int | None:
    """
    Validates the arguments of `crop` and returns them as a single `max_length` int, or `None` when there is nothing
    to do. A non-negative `max_length` is an absolute target length: this is deprecated, so it emits a
    `FutureWarning` attributed to the caller of `crop` (this helper must be called directly from a `crop` method).

    `tokens_to_remove` is the keyword used from transformers 5.15 on, with the meaning it has there: negative values
    remove that many tokens and `0` removes nothing.
    """
    if tokens_to_remove is not None:
        if max_length is not None:
            raise TypeError("`crop` got both `max_length` and `tokens_to_remove`: pass only one of them.")
        max_length = _as_crop_int(tokens_to_remove, "tokens_to_remove")
        # From transformers 5.15, `crop(tokens_to_remove=0)` removes nothing (while `crop(0)` empties the cache here)
        if max_length == 0:
            return None
    elif max_length is None:
        raise TypeError("`crop` got `max_length=None`: pass an integer, e.g. `crop(-k)` to remove the last k tokens.")
    else:
        max_length = _as_crop_int(max_length, "max_length")

    if max_length >= 0:
        warnings.warn(
            f"Cropping a cache to an absolute length (`crop({max_length})`) is deprecated. Transformers 5.15+ reads "
            "`crop(0)` as 'remove nothing' instead of emptying the cache, and 5.20+ raises an error for positive "
            "values. Use `crop(-k)` to remove the last k tokens, or `crop(-cache.get_seq_length())` for a full "
            "rollback.",
            FutureWarning,
            stacklevel=3,
        )
    return max_length


def _as_crop_int(value, name: str) -> int:
    """Converts an integer-like `crop` argument (int, numpy integer, 0-d integer tensor) to a Python int."""
    # `bool` is a subclass of `int`, and `operator.index` accepts one-element tensors of any shape
    is_bool = isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
    is_multi_dim_tensor = isinstance(value, torch.Tensor) and value.dim() > 0
    if not (is_bool or is_multi_dim_tensor):
        try:
            return operator.index(value)
        except TypeError:
            pass
    description = f"a tensor of shape {tuple(value.shape)}" if is_multi_dim_tensor else repr(value)
    raise TypeError(
        f"`crop` expects `{name}` to be an integer (an int, a numpy integer or a 0-d integer tensor), but got "
        f"{description} of type `{type(value).__name__}`."
    )


def _get_crop_length(max_length: int, seq_length: int) -> int:
    """
    Returns how many of the `seq_length` cached tokens `crop(max_length)` keeps: a negative `max_length` removes that
    many trailing tokens (at most all of them), a non-negative one is an absolute target length.
    """
    if max_length < 0:
        return max(seq_length + max_length, 0)
    return min(max_length, seq_length)


class CacheLayerMixin:
    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if `crop(max_length)` cannot be honoured exactly by this layer. It is called on every layer
        of a [`Cache`] before any of them is cropped, so it must not change anything.

        Args:
            max_length (`int`):
                The (already validated) argument of [`Cache.crop`].
        """
        if not hasattr(self, "crop"):
            raise NotImplementedError(
                f"`{self.__class__.__name__}` does not support `crop`, so its cached tokens cannot be rolled back. Use "
                "a `DynamicCache` instead, e.g. `DynamicCache(config=model.config)`."
            )


class DynamicLayer:
    def _check_crop(self, max_length: int) -> None:
        """Dynamic layers hold every token they have seen, so they can always be cropped."""

    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states along the sequence dimension.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        self._check_crop(max_length)
        seq_length = self.get_seq_length()
        new_length = _get_crop_length(max_length, seq_length)
        if new_length >= seq_length:
            return

        self.keys = self.keys[..., :new_length, :]
        self.values = self.values[..., :new_length, :]


class DynamicSlidingWindowLayer:
    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if `crop(max_length)` needs states that the sliding window already dropped. A full rollback
        is always possible, since nothing needs to be kept.
        """
        seq_length = self.get_seq_length()
        new_length = _get_crop_length(max_length, seq_length)
        if 0 < new_length < seq_length and seq_length >= self.sliding_window:
            raise ValueError(
                f"Cannot crop a `{self.__class__.__name__}` to {new_length} tokens: it has seen {seq_length} tokens, "
                f"at least its sliding window of {self.sliding_window}, so the states to keep were already dropped. "
                "Only a full rollback (`crop(-cache.get_seq_length())`) is possible now. Crop before the window is "
                "full, or use a cache without sliding-window layers (e.g. `DynamicCache()` without a config) to roll "
                "back further."
            )

    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states along the sequence dimension, and rewind `cumulative_length` with them.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        new_length = _get_crop_length(max_length, self.get_seq_length())
        # Partial crops only happen while every seen token is still stored, so the same slice applies
        super().crop(max_length)
        self.cumulative_length = new_length


class DynamicIndexedLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop the cached key and value states, and the indexer keys with them, along the sequence dimension.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        new_length = _get_crop_length(max_length, self.get_seq_length())
        super().crop(max_length)
        # The indexer keys cover the same tokens as the key and value states, so they are cut at the same length
        if self.is_indexer_initialized and self.indexer_keys.numel() > 0 and self.indexer_keys.shape[1] > new_length:
            self.indexer_keys = self.indexer_keys[:, :new_length, :]


class QuantizedLayer:
    def _check_crop(self, max_length: int) -> None:
        """Quantized layers do not support `crop` yet: their quantized states cannot be cut back token by token."""
        raise NotImplementedError(
            f"`{self.__class__.__name__}` does not support `crop` yet: its quantized states would not be rolled back. "
            "Use a `DynamicCache` to roll back cached tokens."
        )


class LinearAttentionCacheLayerMixin:
    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if `crop(max_length)` cannot be honoured by the linear attention states of this layer. It is
        called on every layer of a [`Cache`] before any of them is cropped, so it must not change anything.

        Args:
            max_length (`int`):
                The (already validated) argument of [`Cache.crop`].
        """
        if not self.record_past:
            raise RuntimeError(
                f"Cannot crop a `{self.__class__.__name__}`: it does not track past states. Call "
                "`cache.activate_past_recording()` before the tokens to roll back are added."
            )
        if max_length > 0:
            raise RuntimeError(
                f"`{self.__class__.__name__}` can only be cropped with a negative value, the number of tokens to "
                "remove (e.g. `crop(-k)`)."
            )


class LinearAttentionAndFullAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        DynamicLayer._check_crop(self, max_length)


class LinearAttentionAndSlidingWindowAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        DynamicSlidingWindowLayer._check_crop(self, max_length)


class Cache:
    def crop(self, max_length: int | None = None, *, tokens_to_remove: int | None = None):
        """
        Crop the cached states of every layer along the sequence dimension, e.g. to roll back rejected tokens in
        speculative decoding. Every layer is checked before any is changed, so a crop that cannot be honoured raises
        an error and leaves the cache as it was.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: `crop(-k)` removes the last `k` tokens, and
                removing at least the cached length empties the cache. A non-negative value is an absolute target
                length (`crop(0)` empties the cache): this is deprecated and emits a `FutureWarning`, as transformers
                5.15+ reads `0` as "remove nothing" and 5.20+ raises an error for positive values. Use
                `crop(-cache.get_seq_length())` for a full rollback.
            tokens_to_remove (`int`, *optional*):
                Keyword alias of `max_length` with its meaning from transformers 5.15 on, where it replaces
                `max_length`: a negative value removes that many tokens, and `0` removes nothing.
        """
        max_length = _check_crop_argument(max_length, tokens_to_remove)
        if max_length is not None:
            self._crop(max_length)

    def _crop(self, max_length: int) -> None:
        """Crop every layer with an already validated `max_length`, after checking that all of them can be cropped."""
        for layer in self.layers:
            layer._check_crop(max_length)
        for layer in self.layers:
            layer.crop(max_length)


class EncoderDecoderCache:
    def crop(self, maximum_length: int | None = None, *, tokens_to_remove: int | None = None):
        """
        Crop the self-attention cache along the sequence dimension (the cross-attention cache only depends on the
        encoder outputs). This is used in assisted decoding and contrastive search (on the Hub).

        Args:
            maximum_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the cached length empties the
                cache. A non-negative value is an absolute target length, which is deprecated (see [`Cache.crop`]).
            tokens_to_remove (`int`, *optional*):
                Keyword alias of `maximum_length` with its meaning from transformers 5.15 on: `0` removes nothing.
        """
        self.check_dynamic_cache(self.crop.__name__)
        maximum_length = _check_crop_argument(maximum_length, tokens_to_remove)
        if maximum_length is not None:
            self.self_attention_cache._crop(maximum_length)
