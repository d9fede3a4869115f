# Step 2 of the fix for transformers 5.24.x, in `transformers/cache_utils.py`: `Cache.crop` checks every layer before
# any is cropped, a removal of at least the cached length is a full rollback on every layer (linear attention ones
# included), linear attention and hybrid layers roll back exactly or refuse, and `is_croppable` tells the truth.
from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import (
        CacheLayerMixin,
        DynamicLayer,
        DynamicSlidingWindowLayer,
        LinearAttentionCacheLayerMixin,
        StaticLayer,
        _get_number_of_tokens_to_remove,
    )


def _is_full_rollback_of_layer(layer, number_of_tokens: int, seq_length: int | None = None) -> bool:
    """
    Whether removing `number_of_tokens` tokens removes every token that the attention part of `layer` holds. Its length
    is read on the host unless given as `seq_length` (a static layer keeps it on the device, so reading it waits).
    """
    if number_of_tokens == 0:
        return False
    if seq_length is None:
        seq_length = int(layer.get_seq_length())
    return number_of_tokens >= seq_length


def _check_hybrid_crop(layer, attention_class: type, tokens_to_remove: int, seq_length: int | None = None) -> None:
    """
    Raises an error if either part of a layer holding both linear attention and attention states cannot honour
    `crop(tokens_to_remove)`. A full rollback resets the linear attention states, so then only the attention part is
    checked.

    Args:
        layer (`LinearAttentionCacheLayerMixin`):
            The hybrid layer.
        attention_class (`type`):
            The class of its attention part, e.g. `DynamicLayer`.
        tokens_to_remove (`int`):
            The (already validated) negative number of tokens to remove.
        seq_length (`int`, *optional*):
            The number of tokens of the attention part, if the caller already read it on the host.
    """
    attention_class._check_crop(layer, tokens_to_remove)
    try:
        LinearAttentionCacheLayerMixin._check_crop(layer, tokens_to_remove)
    except RuntimeError:
        # Only a refusal needs the attention length (a full rollback is always possible), so that a crop that can be
        # honoured does not wait for the device
        if not _is_full_rollback_of_layer(layer, -tokens_to_remove, seq_length):
            raise


def _crop_hybrid(layer, attention_class: type, tokens_to_remove: int, seq_length: int | None = None) -> None:
    """
    Crops both parts of a hybrid layer, after checking both, so that neither changes if one cannot be cropped.
    Removing all the tokens of the attention part resets the linear attention part.

    Args:
        layer (`LinearAttentionCacheLayerMixin`):
            The hybrid layer.
        attention_class (`type`):
            The class of its attention part, e.g. `DynamicLayer`.
        tokens_to_remove (`int`):
            The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        seq_length (`int`, *optional*):
            The number of tokens of the attention part, if the caller already read it on the host.
    """
    number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
    if number_of_tokens and seq_length is None:
        seq_length = int(layer.get_seq_length())
    layer._check_crop(-number_of_tokens, seq_length=seq_length)
    if not _is_full_rollback_of_layer(layer, number_of_tokens, seq_length):
        attention_class.crop(layer, -number_of_tokens)
        LinearAttentionCacheLayerMixin.crop(layer, -number_of_tokens)
        return
    if issubclass(attention_class, StaticLayer):
        # Its `crop` would check the whole layer again, reading its length on the device: emptied by `reset` instead,
        # which moves the write position back to 0 in place, as a full rollback does
        attention_class.reset(layer)
    else:
        attention_class.crop(layer, -number_of_tokens)
    LinearAttentionCacheLayerMixin.reset(layer)


def _read_seq_lengths(layers: list, layer_classes: set) -> dict[int, int]:
    """
    The sequence lengths of the `layers` of one of `layer_classes`, by `id` of the layer, as host ints. Those that
    static layers keep on the device are read together, with a single device-to-host copy.
    """
    seq_lengths = {}
    for layer in layers:
        if type(layer) in layer_classes:
            seq_lengths[id(layer)] = layer.get_seq_length()
    on_device = [seq_length for seq_length in seq_lengths.values() if isinstance(seq_length, torch.Tensor)]
    if not on_device:
        return seq_lengths
    device = on_device[0].device
    read = iter(torch.stack([seq_length.reshape(()).to(device) for seq_length in on_device]).tolist())
    return {
        key: next(read) if isinstance(seq_length, torch.Tensor) else seq_length
        for key, seq_length in seq_lengths.items()
    }


class LinearAttentionCacheLayerMixin:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error if the linear attention states cannot be rolled back exactly by `crop(tokens_to_remove)`.
        Conv states can be rolled back by the tokens recorded since `activate_past_recording` (or the last `crop`).
        Recurrent states summarize every past token, so they cannot be rolled back by a few tokens: only a full
        rollback of the cache resets them (see [`Cache.crop`]).
        """
        number_of_tokens = -tokens_to_remove
        if number_of_tokens == 0:
            return
        layer_name = self.__class__.__name__
        if any(self.is_recurrent_states_initialized.values()):
            raise RuntimeError(
                f"Cannot remove {number_of_tokens} token(s) from a `{layer_name}`: its recurrent states summarize "
                "every past token and cannot be rolled back. Only a full rollback of the cache "
                "(`cache.crop(-cache.get_seq_length())`) is possible."
            )
        if any(self.is_conv_states_initialized.values()) and not self.record_past:
            raise RuntimeError(
                f"Cannot remove {number_of_tokens} token(s) from a `{layer_name}`: it does not record its past conv "
                "states. Call `cache.activate_past_recording()` before the tokens to remove are added."
            )
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if not is_initialized:
                continue
            recorded_tokens = self.conv_states[state_idx].shape[-1] - self.conv_kernel_size[state_idx]
            if recorded_tokens < number_of_tokens:
                raise RuntimeError(
                    f"Cannot remove {number_of_tokens} token(s) from a `{layer_name}`: only {max(recorded_tokens, 0)} "
                    f"token(s) of its conv states {state_idx} were recorded since `activate_past_recording` or the "
                    "last `crop`. Only a full rollback of the cache (`cache.crop(-cache.get_seq_length())`) is "
                    "possible."
                )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the conv states, and restrict them back to their minimal
        working size, i.e. the `conv_kernel_size` states before the removed tokens (zero-padded on the left if fewer
        were seen). This means that `crop(0)` may still drop the states recorded since `activate_past_recording`.
        A layer never updated has nothing to crop.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        # Class-qualified: in hybrid layers, `self._check_crop` also checks the attention part
        LinearAttentionCacheLayerMixin._check_crop(self, -number_of_tokens)
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if not is_initialized:
                continue
            kernel_size = self.conv_kernel_size[state_idx]
            conv_states = self.conv_states[state_idx]
            # Already at its minimal size: kept as it is, as it may be a static address (when not recording)
            if number_of_tokens == 0 and conv_states.shape[-1] == kernel_size:
                continue
            kept_length = conv_states.shape[-1] - number_of_tokens
            conv_states = conv_states[..., max(kept_length - kernel_size, 0) : kept_length]
            if conv_states.shape[-1] < kernel_size:
                conv_states = torch.nn.functional.pad(conv_states, (kernel_size - conv_states.shape[-1], 0))
            self.conv_states[state_idx] = conv_states

    @property
    def is_croppable(self) -> bool:
        """
        Whether `crop` can put this layer back as it was. This needs conv states recorded since
        `activate_past_recording`, and no recurrent states (they cannot be rolled back).
        """
        if any(self.is_recurrent_states_initialized.values()):
            return False
        # If nothing is initialized, we don't yet know whether we will have any recurrent states, so let's be careful.
        # If conv states are initialized but no recurrent states are, there will never be any (same forward)
        return self.record_past and any(self.is_conv_states_initialized.values())


class LinearAttentionAndFullAttentionLayer:
    def _check_crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        _check_hybrid_crop(self, DynamicLayer, tokens_to_remove, seq_length)

    def crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from both the linear attention and the attention states. Removing
        at least as many tokens as the attention states hold resets the linear attention states.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
            seq_length (`int`, *optional*):
                The number of tokens of the attention part, if the caller already read it (see [`Cache.crop`]).
        """
        _crop_hybrid(self, DynamicLayer, tokens_to_remove, seq_length)


class LinearAttentionAndSlidingWindowAttentionLayer:
    def _check_crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        _check_hybrid_crop(self, DynamicSlidingWindowLayer, tokens_to_remove, seq_length)

    def crop(self, tokens_to_remove: int, seq_length: int | None = None) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from both the linear attention and the sliding window attention
        states. Removing at least as many tokens as the layer has seen resets the linear attention states.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
            seq_length (`int`, *optional*):
                The number of tokens of the attention part, if the caller already read it (see [`Cache.crop`]).
        """
        _crop_hybrid(self, DynamicSlidingWindowLayer, tokens_to_remove, seq_length)

    @property
    def is_croppable(self) -> bool:
        """Whether `crop` can put both the linear attention and the sliding window parts back as they were."""
        return LinearAttentionCacheLayerMixin.is_croppable.fget(self) and DynamicSlidingWindowLayer.is_croppable.fget(
            self
        )


class DummyLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """Dummy layers hold no data, so any crop can be honoured."""


class Cache:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from every layer of the Cache, e.g. to roll back rejected tokens in
        speculative decoding. Every layer is checked before any is cropped, so a crop that some layer cannot honour
        raises an error and leaves the whole Cache unchanged. Removing at least as many tokens as the Cache holds (see
        `get_seq_length`) is a full rollback: it empties every layer, and resets linear attention states.

        For layers that do not need to keep all the past states in memory, such as sliding window layers or linear
        attention layers, this will also restrict the size of the cached states back to their minimal working size.
        This means that `crop(0)` removes no token, but may still remove useless states (i.e. states that are not
        needed for the next `forward`) from the Cache.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        # A plain int, as `generate` passes for `crop(0)` after every forward, needs no conversion
        if type(tokens_to_remove) is int and tokens_to_remove <= 0:
            number_of_tokens = -tokens_to_remove
        else:
            number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        layers = self.layers
        if number_of_tokens == 0:
            # No token is removed, so no layer refuses: only the layers that restrict their states have work to do
            for layer in layers:
                if type(layer) is not DynamicLayer:
                    layer.crop(0)
            return
        for layer in layers:
            if type(layer) is not DynamicLayer:
                break
        else:
            # The common case: plain dynamic layers can always be cropped, so they are cut here directly, as their
            # `crop` would (a stop before the first token gives an empty slice; a huge one is capped, as it would warn)
            stop = -number_of_tokens if number_of_tokens < 2**62 else -(2**62)
            for layer in layers:
                # Nothing to do if the layer holds no tokens (not initialized with KV sharing)
                if layer.is_initialized:
                    try:
                        keys = layer.keys[..., :stop, :]
                    except IndexError:
                        # No token yet: `early_initialization` leaves empty 1-D states until the first `update`
                        # (caught rather than checked, so that the usual crop pays nothing for it)
                        continue
                    layer.keys = keys
                    layer.values = layer.values[..., :stop, :]
            return
        layers_to_crop, layers_to_reset = layers, []
        # The checks are paid once per layer class: a Cache has few layer classes and many layers
        layer_classes = {type(layer) for layer in layers}
        # Linear attention layers have no sequence length: the Cache tells them when everything is removed (the
        # only place where a static Cache reads its length on the host: `int` reads it once per call, where the two
        # comparisons would read it twice)
        linear_classes = {
            layer_class
            for layer_class in layer_classes
            if issubclass(layer_class, LinearAttentionCacheLayerMixin) and not issubclass(layer_class, CacheLayerMixin)
        }
        if (
            linear_classes
            and any(issubclass(layer_class, CacheLayerMixin) for layer_class in layer_classes)
            and 0 < int(self.get_seq_length()) <= number_of_tokens
        ):
            layers_to_crop, layers_to_reset = [], []
            for layer in layers:
                if type(layer) in linear_classes:
                    layers_to_reset.append(layer)
                else:
                    layers_to_crop.append(layer)
        # A hybrid layer resets its linear attention states when all the tokens of its attention part are removed. A
        # static one counts them on the device, so the counts are read here together, once per call, not per layer
        hybrid_classes = {
            layer_class
            for layer_class in layer_classes
            if issubclass(layer_class, LinearAttentionCacheLayerMixin) and issubclass(layer_class, CacheLayerMixin)
        }
        hybrid_lengths = _read_seq_lengths(layers_to_crop, hybrid_classes) if hybrid_classes else {}
        # Check every layer first, so that a layer refusing the crop leaves the whole Cache unchanged
        for layer in layers_to_crop:
            if id(layer) in hybrid_lengths:
                layer._check_crop(-number_of_tokens, seq_length=hybrid_lengths[id(layer)])
            elif type(layer) is not DynamicLayer:
                layer._check_crop(-number_of_tokens)
        for layer in layers_to_crop:
            if id(layer) in hybrid_lengths:
                layer.crop(-number_of_tokens, seq_length=hybrid_lengths[id(layer)])
            else:
                layer.crop(-number_of_tokens)
        for layer in layers_to_reset:
            layer.reset()
