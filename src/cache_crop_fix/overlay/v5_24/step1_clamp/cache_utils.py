# Step 1 of the fix for transformers 5.24.x, in `transformers/cache_utils.py`: `crop` validates its argument and clamps
# oversized removals on the dynamic layers, and every crop first asks the layer whether it can be honoured exactly.
#
# Each class below is named like the upstream class it changes and holds only the members this step adds or replaces;
# the module-level helpers are added to the upstream module. The classes here are never instantiated.
import operator

import torch


def _get_number_of_tokens_to_remove(tokens_to_remove) -> int:
    """
    Validates the argument of `crop` and returns how many tokens it removes (`0` or more).

    Args:
        tokens_to_remove (`int`):
            The negative number of tokens to remove. An int, a numpy integer or a 0-d integer tensor (as passed by
            `generate`) are accepted.
    """
    # The common case (`generate`, and `Cache.crop` calling each layer): a plain int, checked without conversions
    if type(tokens_to_remove) is int and tokens_to_remove <= 0:
        return -tokens_to_remove
    value = tokens_to_remove
    # `bool` is a subclass of `int`, and `operator.index` accepts one-element integer tensors of any shape
    is_bool = isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
    is_tensor_with_dims = isinstance(value, torch.Tensor) and value.dim() > 0
    number = None
    if not (is_bool or is_tensor_with_dims):
        try:
            number = operator.index(value)
        except TypeError:
            pass
    if number is None:
        description = f"a tensor of shape {tuple(value.shape)}" if is_tensor_with_dims else repr(value)
        raise TypeError(
            "`crop` expects `tokens_to_remove` to be a negative integer (an int, a numpy integer or a 0-d integer "
            f"tensor), but got {description} of type `{type(value).__name__}`. Use e.g. `crop(-3)` to remove the last "
            "3 tokens."
        )
    if number > 0:
        raise ValueError(
            f"Calling `crop` with a positive value (`{number}`) is not supported. Please use a negative integer to "
            "remove that number of tokens from the cache instead."
        )
    return -number


class CacheLayerMixin:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error if `crop(tokens_to_remove)` cannot be honoured exactly by this layer. It must not change
        anything: it is called before the layer is cropped, so that a crop either happens completely or not at all.

        Args:
            tokens_to_remove (`int`):
                The (already validated) negative number of tokens to remove.
        """


class DynamicLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer. Removing at least as many tokens as
        the layer holds empties it.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        if type(tokens_to_remove) is int and tokens_to_remove <= 0:
            number_of_tokens = -tokens_to_remove
        else:
            number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        self._check_crop(-number_of_tokens)
        # Nothing to do in these cases: 0 tokens to crop or the layer holds none (not initialized with KV sharing)
        if number_of_tokens == 0 or not self.is_initialized or self.keys.numel() == 0:
            return
        # Removing more tokens than the layer holds empties it (clamped here: a huge slice bound would warn). `narrow`
        # takes the same view as `[..., :new_length, :]`, with less indexing overhead
        new_length = self.keys.shape[-2] - number_of_tokens
        if new_length < 0:
            new_length = 0
        self.keys = self.keys.narrow(-2, 0, new_length)
        self.values = self.values.narrow(-2, 0, new_length)


class DynamicSlidingWindowLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error if the tokens that the window must show after the crop were already dropped, i.e. if the past
        was not recorded (see `activate_past_recording`) or more tokens are removed than were recorded. Removing
        nothing or everything is always possible.
        """
        number_of_tokens = -tokens_to_remove
        seq_length = self.cumulative_length
        if number_of_tokens == 0 or number_of_tokens >= seq_length:
            return
        stored_length = self.keys.shape[-2]
        first_stored_token = seq_length - stored_length
        first_needed_token = max(seq_length - number_of_tokens - self.sliding_window + 1, 0)
        if first_needed_token < first_stored_token:
            if self.record_past:
                hint = f"Only the {stored_length - self.sliding_window + 1} token(s) recorded since the last `crop`"
            else:
                hint = "Call `activate_past_recording` before the tokens to remove are added: only the tokens added"
                hint += " since then"
            raise ValueError(
                f"Cannot remove {number_of_tokens} token(s) from a `{self.__class__.__name__}` holding the last "
                f"{stored_length} of its {seq_length} tokens: the sliding window of {self.sliding_window} needs "
                f"tokens it already dropped. {hint} can be removed, or all of them (`crop(-cache.get_seq_length())`)."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer (at most all of them), and restrict the
        cached states back to their minimal working size, i.e. the `sliding_window - 1` tokens before the removed ones
        (`sliding_window` while the past is recorded, so that one more token can be removed later). This means that
        `crop(0)` may still drop the states recorded since `activate_past_recording`.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        self._check_crop(-number_of_tokens)
        if not self.is_initialized or self.cumulative_length == 0:
            return
        # `cumulative_length` is the number of tokens seen, of which the states hold the last `keys.shape[-2]`
        seq_length = self.cumulative_length
        new_length = max(seq_length - number_of_tokens, 0)
        first_stored_token = seq_length - self.keys.shape[-2]
        # While recording, one more token than the window needs is kept: the one that a later `crop(-1)` brings back
        # into the window, so that `is_croppable` (true while recording) holds after a `crop(0)` too
        kept_before = self.sliding_window if self.record_past else self.sliding_window - 1
        start = max(new_length - kept_before, first_stored_token, 0) - first_stored_token
        end = new_length - first_stored_token
        if new_length == 0:
            start = end = 0
        self.keys = self.keys.narrow(-2, start, end - start)
        self.values = self.values.narrow(-2, start, end - start)
        self.cumulative_length = new_length

    @property
    def is_croppable(self) -> bool:
        """
        Whether `crop` can put this layer back as it was: once the window is full, only if the past is recorded (see
        `activate_past_recording`), as the dropped states cannot be brought back otherwise.
        """
        return self.record_past or self.cumulative_length < self.sliding_window


class DynamicIndexedLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer (at most all of them), together with
        their indexer keys and indexer positions.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        super().crop(tokens_to_remove)
        # The indexer keys and positions cover the same tokens as the key and value states
        new_length = self.get_seq_length()
        if self.indexer_position_ids is not None:
            self.indexer_position_ids = self.indexer_position_ids[..., :new_length]
        if self.is_indexer_initialized:
            self.indexer_keys = self.indexer_keys[:, :new_length, :]
