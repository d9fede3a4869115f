# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 5 changes:
# quantized layers crop their quantized and residual parts together.
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces
# (a later step may replace them again); module-level functions are helpers added to the upstream module. The patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file, so this
# file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.

from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import _get_crop_length


class QuantizedLayer:
    def crop(self, max_length: int) -> None:
        """
        Crop both the quantized and the residual (original precision) parts of the cache. Tokens removed from the
        residual part are simply dropped; when tokens of the quantized part must go, the kept ones are dequantized
        and quantized again, and the residual part is emptied. This is the operation `update` performs on every
        flush of the residual part, so a crop costs at most one more re-quantization: with quanto, quantizing
        dequantized values gives them back, so repeated rollbacks do not drift; HQQ fits its scales again each time,
        so its error may grow with each re-quantization, as it does with each flush. A full rollback leaves the layer
        as if it had never been updated.

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
