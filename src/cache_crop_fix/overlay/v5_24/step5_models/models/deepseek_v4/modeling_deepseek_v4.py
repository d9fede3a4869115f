# Step 5 of the fix for transformers 5.24.x, in `transformers/models/deepseek_v4/modeling_deepseek_v4.py`: the
# compressor states roll back with the sliding window, and a crop that would reopen a window the compressor already
# closed is refused.
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import DynamicSlidingWindowLayer


class DeepseekV4HCACache:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error if the crop needs states that the sliding window dropped (this layer never records its past),
        or source tokens that the compressor already folded into a compressed entry. Removing nothing or everything is
        always possible.
        """
        DynamicSlidingWindowLayer._check_crop(self, tokens_to_remove)
        number_of_tokens = -tokens_to_remove
        if number_of_tokens == 0 or number_of_tokens >= self.cumulative_length:
            return
        for name, buffered_kv in self.buffer_kv.items():
            if buffered_kv is not None and buffered_kv.shape[1] < number_of_tokens:
                raise ValueError(
                    f"Cannot remove {number_of_tokens} token(s) from a `{self.__class__.__name__}`: its `{name}` "
                    f"compressor only buffers the last {buffered_kv.shape[1]}, the others were already compressed. "
                    "Only a full rollback (`crop(-cache.get_seq_length())`) is possible now."
                )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the sliding window states and from the compressor buffers.
        Removing at least as many tokens as the layer has seen also clears the compressed entries.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        seq_length = self.cumulative_length
        # Validates the argument and checks the whole layer (see `_check_crop`) before anything changes
        super().crop(tokens_to_remove)
        removed_tokens = seq_length - self.cumulative_length
        # V4 uses shared-KV MQA: `keys` and `values` are the same tensor
        self.values = self.keys
        for name, buffered_kv in self.buffer_kv.items():
            if self.cumulative_length == 0:
                self.buffer_kv[name] = self.buffer_gate[name] = self.compressed_kv[name] = None
                self.entry_count[name] = 0
            elif buffered_kv is not None and removed_tokens > 0:
                kept_length = buffered_kv.shape[1] - removed_tokens
                self.buffer_kv[name] = buffered_kv[:, :kept_length]
                self.buffer_gate[name] = self.buffer_gate[name][:, :kept_length]

    @property
    def is_croppable(self) -> bool:
        """
        Whether `crop` can put this layer back as it was: only before the sliding window drops states (this layer
        never records its past) and before the compressor closes a window.
        """
        return self.cumulative_length < self.sliding_window and not any(self.entry_count.values())


class DeepseekV4CSACache:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Crop like [`DeepseekV4HCACache`]. The overlap states only depend on closed windows, which a partial crop never
        reopens, so only a full rollback clears them.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        super().crop(tokens_to_remove)
        if self.cumulative_length == 0:
            for name in self.overlap_kv:
                self.overlap_kv[name] = self.overlap_gate[name] = None
