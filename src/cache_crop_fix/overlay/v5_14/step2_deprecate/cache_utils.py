# Our version of the `crop` methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 2 changes:
# one argument check for every cache, a `FutureWarning` for absolute crops, and the `tokens_to_remove=` keyword.
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces
# (a later step may replace them again); module-level functions are helpers added to the upstream module. The patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file, so this
# file is written to read right inside `transformers/cache_utils.py`. The classes here are never instantiated.

import operator
import warnings

import torch


_CROP_0_WARNING = (
    "`crop(0)` empties the cache: 0 is read as an absolute length to keep. If it comes from `crop(-k)` with `k == 0` "
    "(nothing to remove), it removes everything instead of nothing: skip the call when `k == 0`, or write "
    "`crop(tokens_to_remove=-k)`, where 0 removes nothing. For a full rollback, write `crop(-cache.get_seq_length())`: "
    "transformers 5.15+ reads `crop(0)` as 'remove nothing'."
)
# Building the warning is a fair share of what `warnings.warn` costs, and `crop(0)` warns on every call: this one is
# built once and handed to the warning filters each time (never raised: `crop` raises a new one under an "error" filter)
_CROP_0_FUTURE_WARNING = FutureWarning(_CROP_0_WARNING)


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

    if max_length == 0:
        warnings.warn(_CROP_0_WARNING, FutureWarning, stacklevel=3)
    elif max_length > 0:
        warnings.warn(
            f"Cropping a cache to an absolute length (`crop({max_length})`) is deprecated: transformers 5.20+ raises "
            "an error for positive values. Use `crop(-k)` to remove the last k tokens, e.g. "
            f"`crop({max_length} - cache.get_seq_length())` when the cache holds more than {max_length} tokens.",
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


class Cache:
    def crop(self, max_length: int | None = None, *, tokens_to_remove: int | None = None):
        """
        Crop the cached states of every layer along the sequence dimension, e.g. to roll back rejected tokens in
        speculative decoding.

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
            self._crop(max_length)
            return
        max_length = _check_crop_argument(max_length, tokens_to_remove)
        if max_length is not None:
            self._crop(max_length)

    def _crop(self, max_length: int) -> None:
        """Crop every layer with an already validated `max_length`."""
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
        if maximum_length is None:
            return
        # The self-attention cache's own `crop` runs, so that a subclass overriding it is honoured. An absolute crop
        # was already reported at our caller: the inner call must not warn again from here
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            self.self_attention_cache.crop(maximum_length)
