# Step 3 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: the static hybrid layers crop their
# attention part too. They inherited `LinearAttentionLayer.crop`, which only rolls the recurrent states back, so the
# attention part kept the rejected tokens; the dynamic hybrid layers already crop both parts, in the same way. The
# sliding one also reports its window's `is_croppable` (the linear part's class attribute hid it): without it,
# `generate` would crop a window that may have overwritten the states to restore (5.25.0 then raised an `IndexError`).
#
# Each class below is named like the upstream class it changes and holds only the members this step adds; the patcher
# installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The classes
# here are never instantiated.
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import LinearAttentionLayer, StaticLayer, StaticSlidingWindowLayer


class LinearAttentionAndStaticFullAttentionLayer:
    def crop(self, tokens_to_remove: int) -> None:
        LinearAttentionLayer.crop(self, tokens_to_remove)
        StaticLayer.crop(self, tokens_to_remove)


class LinearAttentionAndStaticSlidingWindowAttentionLayer:
    @property
    def is_croppable(self) -> bool:
        """Whether `crop` can put this layer back as it was: both parts must be able to."""
        # The class attribute of the linear attention part would hide the property of the static sliding window part
        return StaticSlidingWindowLayer.is_croppable.fget(self)

    def crop(self, tokens_to_remove: int) -> None:
        LinearAttentionLayer.crop(self, tokens_to_remove)
        StaticSlidingWindowLayer.crop(self, tokens_to_remove)
