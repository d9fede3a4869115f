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
    if type(value) is int:
        return value
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
        if not self.is_initialized or self.keys.numel() == 0:
            return
        if max_length > 0 and max_length >= self.keys.shape[-2]:
            return

        # Slicing does the clamping: `[..., :-k, :]` keeps no token when `k` is at least the length
        self.keys = self.keys[..., :max_length, :]
        self.values = self.values[..., :max_length, :]


class DynamicSlidingWindowLayer:
    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if `crop(max_length)` needs states that the sliding window already dropped. A full rollback
        is always possible, since nothing needs to be kept.
        """
        seq_length = self.get_seq_length()
        if seq_length < self.sliding_window:
            return
        new_length = _get_crop_length(max_length, seq_length)
        if 0 < new_length < seq_length:
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
        super().crop(max_length)
        # The indexer keys cover the same tokens as the key and value states, so they are cut at the same length
        new_length = self.get_seq_length()
        if self.is_indexer_initialized and self.indexer_keys.numel() > 0 and self.indexer_keys.shape[1] > new_length:
            self.indexer_keys = self.indexer_keys[:, :new_length, :]


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


class QuantizedLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop both the quantized and the residual (original precision) parts of the cache. Tokens removed from the
        residual part are simply dropped; when tokens of the quantized part must go, the kept ones are dequantized
        and quantized again (which may change them by the quantization error, as any re-quantization would), and the
        residual part is emptied. A full rollback leaves the layer as if it had never been updated.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        seq_length = self.get_seq_length()
        new_length = _get_crop_length(max_length, seq_length)
        if new_length >= seq_length:
            return

        self.cumulative_length = new_length
        if new_length == 0:
            # The next `update` quantizes its states from scratch, exactly as on a new layer
            self.keys, self.values, self.is_initialized = None, None, False
            del self._quantized_keys, self._quantized_values
            return

        residual_length = self.keys.shape[-2] if self.keys.dim() == 4 else 0
        quantized_length = seq_length - residual_length
        if new_length >= quantized_length:
            self.keys = self.keys[..., : new_length - quantized_length, :]
            self.values = self.values[..., : new_length - quantized_length, :]
            return

        kept_keys = self._dequantize(self._quantized_keys)[..., :new_length, :]
        kept_values = self._dequantize(self._quantized_values)[..., :new_length, :]
        self.keys = torch.tensor([], dtype=kept_keys.dtype, device=kept_keys.device)
        self.values = torch.tensor([], dtype=kept_keys.dtype, device=kept_keys.device)
        self._quantized_keys = self._quantize(kept_keys.contiguous(), axis=self.axis_key)
        self._quantized_values = self._quantize(kept_values.contiguous(), axis=self.axis_value)


class LinearAttentionCacheLayerMixin:
    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if the linear attention states of this layer cannot be rolled back exactly by
        `crop(max_length)`. Only conv states can be rolled back, by the tokens recorded since
        `activate_past_recording()`; recurrent states summarize every past token, so only a full rollback is possible
        once they exist. It is called on every layer of a [`Cache`] before any of them is cropped, so it must not
        change anything.

        Args:
            max_length (`int`):
                `0` for a full rollback, otherwise the negative number of tokens to remove (see [`Cache.crop`]).
        """
        if max_length == 0:
            return
        layer_name = self.__class__.__name__
        if max_length > 0:
            raise ValueError(
                f"`{layer_name}` has no sequence length, so it cannot be cropped to an absolute length: use `crop(-k)` "
                "to remove the last k tokens."
            )
        if any(self.is_recurrent_states_initialized.values()):
            raise RuntimeError(
                f"Cannot remove {-max_length} token(s) from a `{layer_name}`: its recurrent states summarize every past "
                "token and cannot be rolled back exactly. Only a full rollback (`crop(-cache.get_seq_length())`) is "
                "possible."
            )
        if any(self.is_conv_states_initialized.values()) and not self.record_past:
            raise RuntimeError(
                f"Cannot remove {-max_length} token(s) from a `{layer_name}`: it does not record its past conv states. "
                "Call `cache.activate_past_recording()` before the tokens to roll back are added."
            )
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if not is_initialized:
                continue
            recorded_tokens = self.conv_states[state_idx].shape[-1] - self.conv_kernel_size[state_idx]
            if recorded_tokens < -max_length:
                raise RuntimeError(
                    f"Cannot remove {-max_length} token(s) from a `{layer_name}`: only {max(recorded_tokens, 0)} past "
                    "token(s) of its conv states were recorded."
                )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Roll back the linear attention states. A full rollback resets them; removing tokens keeps the
        `conv_kernel_size` conv states that precede them.

        Args:
            tokens_to_remove (`int`):
                `0` for a full rollback, otherwise the negative number of tokens to remove.
        """
        LinearAttentionCacheLayerMixin._check_crop(self, tokens_to_remove)
        if tokens_to_remove == 0:
            for state_idx in range(self.number_of_states):
                # Recorded conv states may be the very tensor the model passed in: replace them, never zero them
                if self.is_conv_states_initialized[state_idx] and self.record_past:
                    kernel_size = self.conv_kernel_size[state_idx]
                    self.conv_states[state_idx] = self.conv_states[state_idx].new_zeros(
                        (*self.conv_states[state_idx].shape[:-1], kernel_size)
                    )
                elif self.is_conv_states_initialized[state_idx]:
                    self.conv_states[state_idx].zero_()
                if self.is_recurrent_states_initialized[state_idx]:
                    self.recurrent_states[state_idx].zero_()
                self.has_previous_state[state_idx] = False
            return
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if is_initialized:
                kernel_size = self.conv_kernel_size[state_idx]
                self.conv_states[state_idx] = self.conv_states[state_idx][
                    ..., tokens_to_remove - kernel_size : tokens_to_remove
                ]


class LinearAttentionAndFullAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        DynamicLayer._check_crop(self, max_length)

    def crop(self, max_length: int) -> None:
        # The attention part's `crop` first checks the whole layer (`self._check_crop`), so neither part changes if
        # one cannot be cropped
        DynamicLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)


class LinearAttentionAndSlidingWindowAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        DynamicSlidingWindowLayer._check_crop(self, max_length)

    def crop(self, max_length: int) -> None:
        # The attention part's `crop` first checks the whole layer (`self._check_crop`), so neither part changes if
        # one cannot be cropped
        DynamicSlidingWindowLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)


class LinearAttentionAndStaticFullAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        StaticLayer._check_crop(self, max_length)

    def crop(self, max_length: int) -> None:
        # The attention part's `crop` first checks the whole layer (`self._check_crop`), so neither part changes if
        # one cannot be cropped
        StaticLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)


class LinearAttentionAndStaticSlidingWindowAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        StaticSlidingWindowLayer._check_crop(self, max_length)

    def crop(self, max_length: int) -> None:
        # The attention part's `crop` first checks the whole layer (`self._check_crop`), so neither part changes if
        # one cannot be cropped
        StaticSlidingWindowLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)


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
        layer_max_length = self._check_crop(max_length)
        if layer_max_length is not None:
            for layer in self.layers:
                layer.crop(layer_max_length)

    def _check_crop(self, max_length: int) -> int | None:
        """
        Raises an error, without changing anything, if some layer cannot honour `crop(max_length)`. Otherwise, returns
        the argument every layer must be cropped with, or `None` if there is nothing to remove.

        The meaning of the argument is decided once, here, for the whole cache: every layer receives either `0` (a full
        rollback, also when at least the cached length is removed) or the negative number of tokens to remove. Layers
        whose cached states are not a list of tokens (linear attention) can then honour it like the others.
        """
        if len(self.layers) == 0:
            return None
        seq_length = self._get_crop_seq_length()
        if max_length > 0 and seq_length is None:
            raise ValueError(
                "This cache only holds linear attention layers, which have no sequence length: use `crop(-k)` to "
                "remove the last k tokens instead of cropping to an absolute length."
            )
        if seq_length is not None:
            new_length = _get_crop_length(max_length, seq_length)
            if new_length >= seq_length and seq_length > 0:
                return None
            max_length = new_length - seq_length if new_length > 0 else 0

        for layer in self.layers:
            layer._check_crop(max_length)
        return max_length

    def _get_crop_seq_length(self) -> int | None:
        """The sequence length `crop` works with: the one of the first attention layer, or `None` if there is none."""
        for layer in self.layers:
            if isinstance(layer, CacheLayerMixin):
                return int(layer.get_seq_length())
        return None


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

    def _check_crop(self, max_length: int) -> int | None:
        """See [`Cache._check_crop`]: only the self-attention cache is cropped."""
        return self.self_attention_cache._check_crop(max_length)
