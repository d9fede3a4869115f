# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 3 changes:
# `Cache.crop` checks every layer before any changes, and layers that cannot crop exactly refuse clearly.
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces
# (a later step may replace them again); module-level functions are helpers added to the upstream module. The patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file, so this
# file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.

import operator
import warnings
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import (
        _CROP_0_FUTURE_WARNING,
        _CROP_0_WARNING,
        LinearAttentionLayer,
        _check_crop_argument,
    )


def _get_crop_length(max_length: int, seq_length: int) -> int:
    """
    Returns how many of the `seq_length` cached tokens `crop(max_length)` keeps: a negative `max_length` removes that
    many trailing tokens (at most all of them), a non-negative one is an absolute target length.
    """
    new_length = max(seq_length + max_length, 0) if max_length < 0 else min(max_length, seq_length)
    # An int whatever the argument (a numpy integer, a 0-d tensor, a bool), so that the layers' counters stay ints
    return operator.index(new_length)


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
        self._check_crop(max_length)
        new_length = _get_crop_length(max_length, self.get_seq_length())
        # Partial crops only happen while every seen token is still stored, so the same slice applies
        super().crop(max_length)
        self.cumulative_length = new_length


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
        # Both parts are checked before either changes
        self._check_crop(max_length)
        DynamicLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)


class LinearAttentionAndSlidingWindowAttentionLayer:
    def _check_crop(self, max_length: int) -> None:
        """Checks both the linear attention and the attention parts, so that neither is cropped if one cannot be."""
        LinearAttentionLayer._check_crop(self, max_length)
        DynamicSlidingWindowLayer._check_crop(self, max_length)

    def crop(self, max_length: int) -> None:
        # Both parts are checked before either changes
        self._check_crop(max_length)
        DynamicSlidingWindowLayer.crop(self, max_length)
        LinearAttentionLayer.crop(self, max_length)


def _crop_dynamic_layers(layers: list, max_length: int) -> None:
    """
    Crops plain `DynamicLayer`s with an already validated `max_length`, keeping the tokens their own `crop` would
    (after [`Cache._check_crop`]: they can always be cropped, each by its own length), with the checks paid once per
    call. `crop(0)` puts them back as they were built.
    """
    if max_length < 0:
        # A stop before the first token gives an empty slice; a huge one is capped (slicing takes int64)
        stop = max(max_length, -(2**62))
        for layer in layers:
            # Nothing to do if the layer holds no tokens (never updated, e.g. with KV sharing)
            if layer.is_initialized and layer.keys.numel():
                layer.keys = layer.keys[..., :stop, :]
                layer.values = layer.values[..., :stop, :]
    elif max_length == 0:
        # A full rollback puts each layer back as it was built, before its first `update` (as in a new cache: the
        # old states are freed now, and the next `update` starts a sequence of any batch size)
        for layer in layers:
            if layer.is_initialized:
                layer.keys, layer.values = None, None
                layer.is_initialized = False
    else:
        for layer in layers:
            if layer.get_seq_length() > max_length:
                layer.keys = layer.keys[..., :max_length, :]
                layer.values = layer.values[..., :max_length, :]


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
        # A plain int needs no conversion, and `crop(-k)` (as assisted decoding passes) no warning
        if type(max_length) is int and max_length <= 0 and tokens_to_remove is None:
            if max_length == 0:
                try:
                    warnings.warn(_CROP_0_FUTURE_WARNING, stacklevel=2)
                except FutureWarning as error:
                    if error is not _CROP_0_FUTURE_WARNING:
                        raise
                    # A filter made it an error: the shared warning is not handed out with a traceback, a new one is
                    error.__traceback__ = error.__context__ = None
                    raise FutureWarning(_CROP_0_WARNING) from None
                layers = self.layers
                for layer in layers:
                    if type(layer) is not DynamicLayer:
                        break
                else:
                    # The common case (`DynamicCache()`), done here as `_crop_dynamic_layers` would: a full rollback
                    # puts each plain dynamic layer back as it was built (the warning above costs more than the rest)
                    for layer in layers:
                        if layer.is_initialized:
                            layer.keys, layer.values = None, None
                            layer.is_initialized = False
                    return
            self._crop(max_length)
            return
        max_length = _check_crop_argument(max_length, tokens_to_remove)
        if max_length is not None:
            self._crop(max_length)

    def _crop(self, max_length: int) -> None:
        """Crop every layer with an already validated `max_length`, after checking that all of them can be cropped."""
        layers = self.layers
        for layer in layers:
            if type(layer) is not DynamicLayer:
                break
        else:
            # The common case (`DynamicCache()`): plain dynamic layers never refuse a crop
            _crop_dynamic_layers(layers, max_length)
            return
        for layer, layer_max_length in zip(layers, self._check_crop(max_length)):
            if layer_max_length is not None:
                layer.crop(layer_max_length)

    def _check_crop(self, max_length: int) -> list[int | None]:
        """
        Raises an error, without changing anything, if some layer cannot honour `crop(max_length)`. Otherwise, returns
        the argument each layer must be cropped with, or `None` for a layer that has nothing to remove.

        The meaning of the argument is decided here, layer by layer, from that layer's own length (the layers of a
        cache may hold different numbers of tokens, e.g. in an `MtpCache`): every layer receives either `0` (a full
        rollback, also when at least its cached length is removed) or the negative number of tokens to remove.
        Layers whose cached states are not a list of tokens (linear attention) have no length of their own: they
        follow the longest attention layer.
        """
        seq_lengths = [
            int(layer.get_seq_length()) if isinstance(layer, CacheLayerMixin) else None for layer in self.layers
        ]
        longest = max((length for length in seq_lengths if length is not None), default=None)
        if max_length > 0 and longest is None and self.layers:
            raise ValueError(
                "This cache only holds linear attention layers, which have no sequence length: use `crop(-k)` to "
                "remove the last k tokens instead of cropping to an absolute length."
            )
        layer_max_lengths = []
        for layer, seq_length in zip(self.layers, seq_lengths):
            seq_length = longest if seq_length is None else seq_length
            layer_max_length = max_length
            if seq_length is not None:
                new_length = _get_crop_length(max_length, seq_length)
                if new_length >= seq_length and seq_length > 0:
                    layer_max_length = None
                else:
                    layer_max_length = new_length - seq_length if new_length > 0 else 0
            if layer_max_length is not None:
                layer._check_crop(layer_max_length)
            layer_max_lengths.append(layer_max_length)
        return layer_max_lengths


class EncoderDecoderCache:
    def _check_crop(self, max_length: int) -> list[int | None]:
        """See [`Cache._check_crop`]: only the self-attention cache is cropped."""
        return self.self_attention_cache._check_crop(max_length)
