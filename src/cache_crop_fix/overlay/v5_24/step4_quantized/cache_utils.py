# Step 4 of the fix for transformers 5.24.x, in `transformers/cache_utils.py`: quantized layers no longer inherit the
# `crop` of `DynamicLayer` (which cut only the residual states and left `cumulative_length` as it was). A full rollback
# empties them, FP8 states are cut exactly, and a `QuantizedLayer` removes its residual tokens or refuses.
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import BaseQuantizedLayer, _get_number_of_tokens_to_remove


class BaseQuantizedLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error unless nothing or everything is removed: the layout of the quantized states is left to the
        backend, so they cannot be cut in general.
        """
        number_of_tokens = -tokens_to_remove
        if 0 < number_of_tokens < self.cumulative_length:
            raise ValueError(
                f"Cannot remove {number_of_tokens} of the {self.cumulative_length} tokens of a "
                f"`{self.__class__.__name__}`: its quantized states cannot be cut. Only a full rollback "
                "(`crop(-cache.get_seq_length())`) is possible."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer. Removing at least as many tokens as
        the layer holds empties it, as if it had never been updated: the next `update` quantizes from scratch.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        self._check_crop(-number_of_tokens)
        if number_of_tokens > 0 and number_of_tokens >= self.cumulative_length:
            self.reset()


class QuantizedLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error if quantized tokens would be removed but not all of them: they were quantized in groups with
        the tokens to keep. The residual tokens, kept in original precision, can always be removed.
        """
        residual_length = self.keys.shape[-2] if self.is_initialized and self.keys.dim() == 4 else 0
        number_of_tokens = -tokens_to_remove
        if residual_length < number_of_tokens < self.cumulative_length:
            raise ValueError(
                f"Cannot remove {number_of_tokens} of the {self.cumulative_length} tokens of a "
                f"`{self.__class__.__name__}`: only the last {residual_length} are kept in original precision, the "
                "others were quantized together with the tokens to keep. Remove at most that many tokens, or all of "
                "them (`crop(-cache.get_seq_length())`)."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the current cache layer: from its residual states, or all of
        them (which empties the layer, see [`BaseQuantizedLayer.crop`]).

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        self._check_crop(-number_of_tokens)
        if number_of_tokens == 0 or number_of_tokens >= self.cumulative_length:
            BaseQuantizedLayer.crop(self, -number_of_tokens)
            return
        self.keys = self.keys[..., :-number_of_tokens, :]
        self.values = self.values[..., :-number_of_tokens, :]
        self.cumulative_length -= number_of_tokens


class Fp8QuantizedLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """FP8 states are quantized token by token with a frozen scale, so any number of them can be removed."""

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the FP8 states. The kept states and their frozen scale are
        unchanged, so they read back exactly as before. Removing at least as many tokens as the layer holds empties it
        (see [`BaseQuantizedLayer.crop`]).

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        if number_of_tokens == 0 or number_of_tokens >= self.cumulative_length:
            BaseQuantizedLayer.crop(self, -number_of_tokens)
            return
        quantized_keys, key_scale = self._quantized_keys
        quantized_values, value_scale = self._quantized_values
        self._quantized_keys = (quantized_keys[..., :-number_of_tokens, :], key_scale)
        self._quantized_values = (quantized_values[..., :-number_of_tokens, :], value_scale)
        self.cumulative_length -= number_of_tokens

    @property
    def is_croppable(self) -> bool:
        """Any number of FP8 tokens can be removed exactly (see `crop`)."""
        return True
