# Our version of `crop` for the DeepSeek-V4 compressed attention cache layers
# (transformers/models/deepseek_v4/modeling_deepseek_v4.py, 5.14.x): the compressor buffers roll back with the sliding
# window, and a crop that would reopen a window the compressor already closed is refused.


class DeepseekV4HCACache:
    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if `crop(max_length)` would remove source tokens that the compressor already folded into a
        compressed entry: they are gone. Removing buffered tokens only, or everything, is always possible (as far as
        the sliding window allows).
        """
        super()._check_crop(max_length)
        seq_length = self.get_seq_length()
        new_length = max(seq_length + max_length, 0) if max_length < 0 else min(max_length, seq_length)
        tokens_to_remove = seq_length - new_length
        if new_length == 0 or tokens_to_remove == 0:
            return
        for name, buffered_kv in self.buffer_kv.items():
            buffered_length = 0 if buffered_kv is None else buffered_kv.shape[1]
            if buffered_kv is not None and buffered_length < tokens_to_remove:
                raise ValueError(
                    f"Cannot remove {tokens_to_remove} token(s) from a `{self.__class__.__name__}`: its `{name}` "
                    f"compressor only buffers the last {buffered_length}, the others were already compressed. Only a "
                    "full rollback (`crop(-cache.get_seq_length())`) is possible now."
                )

    def crop(self, max_length: int) -> None:
        """
        Crop the sliding-window states and the compressor buffers along the sequence dimension. A full rollback also
        clears the compressed entries.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        seq_length = self.get_seq_length()
        super().crop(max_length)
        new_length = self.get_seq_length()
        # V4 uses shared-KV MQA: `keys` and `values` are the same tensor
        self.values = self.keys
        if new_length == 0:
            for name in self.buffer_kv:
                self.buffer_kv[name] = self.buffer_gate[name] = self.compressed_kv[name] = None
                self.entry_count[name] = 0
        elif new_length < seq_length:
            for name, buffered_kv in self.buffer_kv.items():
                if buffered_kv is not None:
                    kept = buffered_kv.shape[1] - (seq_length - new_length)
                    self.buffer_kv[name] = buffered_kv[:, :kept]
                    self.buffer_gate[name] = self.buffer_gate[name][:, :kept]


class DeepseekV4CSACache:
    def crop(self, max_length: int) -> None:
        """
        Crop like [`DeepseekV4HCACache`]. The overlap states only depend on compressed windows, which a partial crop
        never reopens, so only a full rollback clears them.

        Args:
            max_length (`int`):
                If negative, the number of trailing tokens to remove: removing at least the current length empties
                the layer. Otherwise, the absolute number of tokens to keep (`0` empties the layer).
        """
        super().crop(max_length)
        if self.get_seq_length() == 0:
            for name in self.overlap_kv:
                self.overlap_kv[name] = self.overlap_gate[name] = None
