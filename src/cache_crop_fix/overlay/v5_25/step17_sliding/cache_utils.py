# Step 17 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: a `StaticSlidingWindowLayer` whose
# window is shorter than `max_cache_len` rolls back exactly, so that speculative decoding works with static caches on
# sliding-window models (#32946). Its states hold the last `sliding_window` tokens, shifted left by every token once full:
# a verification `forward` of `N + 1` tokens overwrites `N` of the states that a rejection of its drafts must restore, so
# `generate` refused such caches up front, and `crop` left the removed tokens where the next ones are expected.
#
# `activate_past_recording(recurrent_states_to_keep=N)` (which assisted decoding calls before its first `forward`) now
# makes room for them: the states hold `sliding_window + N - 1` tokens (at most `max_cache_len`), as serving engines size
# their windows, the mask still bounded by the window. `crop` then shifts the kept tokens back to the slots `update`
# expects, the removed ones before them where the window masks them out, and raises before anything changes if the
# next token's window would need states that were overwritten.
#
# Each class below is named like the upstream class it changes and holds only the members this step adds or replaces;
# the patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file.
# The classes here are never instantiated. `__init__` and `reset` gain statements: codemods (see `cache_crop_fix.codemod`)
# rather than copies of the methods.
import operator
from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import LinearAttentionLayer, StaticSlidingWindowLayer, is_torchdynamo_compiling


CODEMODS = {
    "StaticSlidingWindowLayer.__init__": (
        "self._is_croppable = max_cache_len <= sliding_window",
        "self._is_croppable = max_cache_len <= sliding_window\n"
        "# `activate_past_recording` makes room for the tokens to roll back, up to the cache's `max_cache_len`\n"
        "self.sliding_window, self.max_cache_len_with_room = sliding_window, max_cache_len\n"
        "self.record_past = False\n"
        "# The slots before this token's hold overwritten or removed states (see `crop`)\n"
        "self.first_stored_token = 0",
    ),
    "StaticSlidingWindowLayer.reset": (
        "self.cumulative_length_int = 0",
        "self.cumulative_length_int = 0\nself.first_stored_token = 0",
    ),
}


class StaticSlidingWindowLayer:
    def activate_past_recording(self, recurrent_states_to_keep: int | None = None, **kwargs):
        """
        Make room in the window for the tokens a `crop` may remove, so that it can put back the states they overwrote:
        after each `forward`, up to `recurrent_states_to_keep` tokens (e.g. `N + 1` to reject all `N` draft tokens of a
        verification `forward`, 1 if not given) can be removed. The states then hold the last
        `sliding_window + recurrent_states_to_keep - 1` tokens (at most `max_cache_len`); initialized states are moved to
        larger ones, once per increase.
        """
        self.record_past = True
        max_cache_len = min(
            self.sliding_window + max(recurrent_states_to_keep or 1, 1) - 1, self.max_cache_len_with_room
        )
        if max_cache_len <= self.max_cache_len:
            return
        if self.is_initialized:
            # Every stored token keeps its position: the slot `update` expects for it with the larger states
            seq_length, stored = self.cumulative_length_int, min(self.cumulative_length_int, self.max_cache_len)
            start = min(seq_length, max_cache_len) - stored
            self.first_stored_token = self._oldest_stored_token()
            keys = self.keys.new_zeros((*self.keys.shape[:2], max_cache_len, self.keys.shape[-1]))
            values = self.values.new_zeros((*self.values.shape[:2], max_cache_len, self.values.shape[-1]))
            keys[:, :, start : start + stored] = self.keys[:, :, :stored]
            values[:, :, start : start + stored] = self.values[:, :, :stored]
            self.keys, self.values = keys, values
            self.cumulative_length.fill_(min(seq_length, max_cache_len))
            if not is_torchdynamo_compiling():
                torch._dynamo.mark_static_address(self.keys)
                torch._dynamo.mark_static_address(self.values)
        self.max_cache_len = max_cache_len

    def _oldest_stored_token(self) -> int:
        """The first token whose states are still stored: the slots before it hold overwritten or removed ones."""
        return max(self.first_stored_token, self.cumulative_length_int - self.max_cache_len)

    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises, before anything changes, if the window of the token after the kept ones would need states that were
        overwritten: once the states are full, `activate_past_recording` must have made room for the tokens to remove.
        Removing every token is always possible.
        """
        seq_length = self.cumulative_length_int
        kept = seq_length + tokens_to_remove
        if 0 < kept and max(kept - self.sliding_window + 1, 0) < self._oldest_stored_token():
            raise ValueError(
                f"Cannot remove {-tokens_to_remove} of the {seq_length} tokens of a `{self.__class__.__name__}`: its window "
                f"of {self.sliding_window} tokens would need the states of token {max(kept - self.sliding_window + 1, 0)}, "
                f"overwritten since (it stores {self.max_cache_len}). Call `activate_past_recording(recurrent_states_to_keep=n)` "
                "before the tokens to remove are added, with `n` at least their number, or remove all of them "
                "(`crop(-cache.get_seq_length())`)."
            )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer (at most all of them). Once the states are full, the
        kept tokens move back to the slots `update` expects, the removed ones before them, out of the window. It raises,
        before anything changes, if the window would need states that were overwritten (see `activate_past_recording`).
        """
        tokens_to_remove = operator.index(tokens_to_remove)
        if tokens_to_remove > 0:
            raise RuntimeError(
                "Static layers can only be cropped by passing a negative int, to specify how many tokens to remove"
            )
        seq_length = self.cumulative_length_int
        tokens_to_remove = max(tokens_to_remove, -seq_length)
        if tokens_to_remove == 0:  # `generate` calls `crop(0)` after every forward
            return
        StaticSlidingWindowLayer._check_crop(self, tokens_to_remove)
        kept = seq_length + tokens_to_remove
        if seq_length > self.max_cache_len:
            # The removed tokens go round to the slots before the kept ones, which the window masks out
            shift = min(-tokens_to_remove, seq_length - self.max_cache_len)
            self.keys.copy_(self.keys.roll(shift, dims=-2))
            self.values.copy_(self.values.roll(shift, dims=-2))
        self.first_stored_token = self._oldest_stored_token() if kept else 0
        self.cumulative_length_int = kept
        # In place, to keep its static address (`update` stops advancing it once the states are full)
        self.cumulative_length.fill_(min(kept, self.max_cache_len))

    @property
    def is_croppable(self) -> bool:
        """Whether `crop` can put this layer back as it was: always if the window never wraps around, else once
        `activate_past_recording` made room for the tokens to remove."""
        # Note: since LinearAttention layers have this as a `property`, we also need to access it as a `property` here for mixed classes
        # such as `LinearAttentionAndStaticSlidingWindowAttentionLayer`, otherwise they complain if we try to set `self.is_croppable` directly
        # in the `__init__`
        return self._is_croppable or self.record_past


class LinearAttentionAndStaticSlidingWindowAttentionLayer:
    def activate_past_recording(self, recurrent_states_to_keep: int | None = None):
        """Records the recurrent states of the linear attention part, and makes room in the window of the other (see
        `StaticSlidingWindowLayer.activate_past_recording`)."""
        LinearAttentionLayer.activate_past_recording(self, recurrent_states_to_keep=recurrent_states_to_keep)
        StaticSlidingWindowLayer.activate_past_recording(self, recurrent_states_to_keep=self.recurrent_states_to_keep)
