# Step 18 of the fix for transformers 5.25.x, fork only, in `transformers/cache_utils.py`: linear attention layers roll
# back through the per-token recurrent-state history of 5.25 (`activate_past_recording(recurrent_states_to_keep=N)`)
# exactly, or refuse before anything changes, whatever the caller (step 2 makes `generate` exact).
#
# The history of a state is a list whose element `-k` is the recurrent state after removing the last `k` tokens. A
# forward of `L` tokens hands over the states after its last `M = min(N, L)` tokens; the state from before the forward is
# a rollback point only when `M == L` (otherwise the tokens in between have no state), so a recording layer counts the
# tokens of each forward on the host (no device sync) to know. The history keeps at most `N` states per recurrent state.
# The host count moves only while recording: a compiled forward guards on it, and a count that changed every decode step
# would recompile it every step (recording makes the layer non-compileable anyway).
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces;
# the patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file.
# The classes here are never instantiated. `__init__` and `reset` gain statements: codemods (see `cache_crop_fix.codemod`)
# rather than copies of the methods. The history is made once, in `__init__` (recording again, as the candidate
# generators do every round, keeps what was recorded), and cleared by `reset` (a new sequence never restores a state of
# the previous one).
import numbers
import operator
from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import (
        DynamicLayer,
        DynamicSlidingWindowLayer,
        LinearAttentionLayer,
        StaticSlidingWindowLayer,
    )


CODEMODS = {
    "LinearAttentionCacheLayerMixin.__init__": [
        (
            "self.record_past = False",
            "self.record_past = False\n"
            "self.recurrent_states_to_keep = None\n"
            "# One list per state (`dict.fromkeys(..., [])` would share a single list between them)\n"
            "self.recurrent_states_history = {i: [] for i in range(number_of_states)}",
        ),
        (
            "self.device = None",
            "# The same count on the host while recording, to know it without a device sync, and the count each recurrent\n"
            "# state is at\n"
            "self.num_tokens_linear = 0\n"
            "self.recurrent_states_num_tokens = dict.fromkeys(range(number_of_states), 0)\n"
            "# While recording, a copy of each cached recurrent state as a forward starts (see `update_conv_state`)\n"
            "self.recurrent_states_before_forward = dict.fromkeys(range(number_of_states))\n"
            "self.device = None",
        ),
    ],
    "LinearAttentionCacheLayerMixin.reset": [
        ("self.cumulative_length_linear.zero_()", "self.cumulative_length_linear.zero_()\nself.num_tokens_linear = 0"),
        (
            "self.has_previous_state[i] = False",
            "self.has_previous_state[i] = False\n"
            "# A state of the previous sequence must never be restored\n"
            "self.recurrent_states_history[i].clear()\n"
            "self.recurrent_states_num_tokens[i] = 0",
        ),
    ],
}


class CacheLayerMixin:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises, before anything changes, if `crop(tokens_to_remove)` cannot leave this layer as if it had only seen the kept
        tokens. `Cache.crop` asks every layer before cropping any.
        """


class DummyLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        """A dummy layer holds nothing: any crop is possible."""


class LinearAttentionCacheLayerMixin:
    def reorder_cache(self, beam_idx: torch.LongTensor):
        """Reorders the cache for beam search, given the selected beam indices."""
        for i in range(self.number_of_states):
            if self.is_conv_states_initialized[i]:
                self.conv_states[i] = self.conv_states[i].index_select(0, beam_idx.to(self.device))
            # recurrent_states can stay empty sometimes, see e.g. lfm2 which only uses the conv_states
            if self.is_recurrent_states_initialized[i]:
                self.recurrent_states[i] = self.recurrent_states[i].index_select(0, beam_idx.to(self.device))
            history = self.recurrent_states_history[i]
            history[:] = [state.index_select(0, beam_idx.to(self.device)) for state in history]

    def activate_past_recording(self, recurrent_states_to_keep: int | None = None):
        """
        Calling this function will activate past state recording, meaning that a call to `update_conv_states` will
        wait for a call to `crop` before restricting the size of the `conv_states` to `conv_kernel_size`, to be able
        to retrieve previous full states.
        If `recurrent_states_to_keep` is provided, the recurrent states for the last `recurrent_states_to_keep` steps will be recorded,
        so that up to `recurrent_states_to_keep` tokens can be removed (e.g. `N + 1` to reject all `N` draft tokens of a verification
        `forward`). This keeps up to `recurrent_states_to_keep` copies of each recurrent state. Calling it again changes that number and
        keeps the states recorded so far; without it, the number set before is kept (1 if none was). The history
        is trimmed to the new number at the next update.
        """
        if recurrent_states_to_keep is None:
            recurrent_states_to_keep = self.recurrent_states_to_keep or 1
        if not self.record_past:
            # The host count stood still while not recording
            self.num_tokens_linear = self._num_tokens()
            self.recurrent_states_num_tokens = dict.fromkeys(range(self.number_of_states), self.num_tokens_linear)
        self.record_past = True
        self.recurrent_states_to_keep = recurrent_states_to_keep

    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises, before anything changes, if `crop(tokens_to_remove)` cannot put the states back exactly as they were before
        the removed tokens. Removing nothing or every token (or more) is always possible.
        """
        if tokens_to_remove > 0:
            raise RuntimeError(
                "Linear attention layers can only be cropped by passing a negative int, to specify how many tokens to remove"
            )
        if tokens_to_remove == 0:
            return
        num_tokens = self._num_tokens()
        tokens_to_remove = -tokens_to_remove
        if tokens_to_remove >= num_tokens:
            return
        for i in range(self.number_of_states):
            # The conv states hold the last `conv_states.shape[-1]` tokens (zeros before the first one): the `conv_kernel_size`
            # tokens before the kept ones must be among them
            if self.is_conv_states_initialized[i]:
                stored = self.conv_states[i].shape[-1]
                if tokens_to_remove > stored - self.conv_kernel_size[i] and num_tokens > stored:
                    available, what = stored - self.conv_kernel_size[i], "conv states"
                    raise ValueError(self._crop_refusal(i, what, tokens_to_remove, num_tokens, available))
            if self.is_recurrent_states_initialized[i] and len(self.recurrent_states_history[i]) < tokens_to_remove:
                available, what = len(self.recurrent_states_history[i]), "recurrent states"
                raise ValueError(self._crop_refusal(i, what, tokens_to_remove, num_tokens, available))

    def _num_tokens(self) -> int:
        """
        The number of tokens this layer holds: counted on the host while recording, else read from the device (only if
        tokens were added since the last reset).
        """
        if self.record_past:
            return self.num_tokens_linear
        return int(self.cumulative_length_linear) if any(self.has_previous_state.values()) else 0

    def _crop_refusal(self, state_idx: int, what: str, tokens_to_remove: int, num_tokens: int, available: int) -> str:
        return (
            f"Cannot remove {tokens_to_remove} of the {num_tokens} tokens of a `{self.__class__.__name__}`: its "
            f"{what} (state {state_idx}) can only be rolled back by {max(available, 0)} token(s), the ones recorded since the "
            "last `crop` (call `activate_past_recording(recurrent_states_to_keep=n)` before the tokens to remove are added, "
            "with `n` at least the number of tokens to remove). All of them can be removed (`crop(-cache.get_seq_length())`)."
        )

    def crop(self, tokens_to_remove: int):
        """
        Remove the last `-tokens_to_remove` tokens from this layer (at most all of them): the conv states recorded since
        `activate_past_recording` are cut, and the recurrent states are restored from the history. It raises, before anything
        changes, if the states cannot be put back exactly. After a crop, the states are back to their minimal working size:
        the conv states to `conv_kernel_size`, and the history is emptied, so another partial crop needs another update first.
        """
        if type(tokens_to_remove) is not int:
            # A numpy integer or a 0-d tensor, from a direct call: the counters stay ints
            tokens_to_remove = operator.index(tokens_to_remove)
        self._check_crop(tokens_to_remove)
        num_tokens = self._num_tokens() if tokens_to_remove else self.num_tokens_linear
        tokens_to_remove = min(-tokens_to_remove, num_tokens)
        # Removing every token starts a new sequence
        if tokens_to_remove > 0 and tokens_to_remove == num_tokens:
            LinearAttentionCacheLayerMixin.reset(self)
            return
        # Update the length (`crop(0)`, which `generate` calls after every step, changes no tensor)
        if tokens_to_remove > 0:
            self.num_tokens_linear = num_tokens - tokens_to_remove
            # In place (a static address), from the host count: `sub_` would allocate its scalar operand as a tensor
            self.cumulative_length_linear.fill_(self.num_tokens_linear)
        for i in range(self.number_of_states):
            if self.is_conv_states_initialized[i] and (
                tokens_to_remove > 0 or self.conv_states[i].shape[-1] != self.conv_kernel_size[i]
            ):
                # This both crops the last `tokens_to_remove`, and restricts the size to `conv_kernel_size` as we never
                # need more for the next forward (a prefill shorter than the kernel is padded as `update_conv_state` would)
                conv_states = self.conv_states[i][..., : self.conv_states[i].shape[-1] - tokens_to_remove]
                conv_states = conv_states[..., -self.conv_kernel_size[i] :]
                padding_length = self.conv_kernel_size[i] - conv_states.shape[-1]
                if padding_length > 0:
                    conv_states = torch.nn.functional.pad(conv_states, (padding_length, 0), value=0)
                self.conv_states[i] = conv_states
            # Restore the recurrent states (if they exist, as recurrent state is optional), in place to keep their address
            if self.is_recurrent_states_initialized[i] and tokens_to_remove > 0:
                self.recurrent_states[i].copy_(self.recurrent_states_history[i][-tokens_to_remove])
            self.recurrent_states_num_tokens[i] = self.num_tokens_linear
            # Drop all the history
            self.recurrent_states_history[i].clear()

    def increase_count(self, state_idx: int):
        """
        Since the conv states are sometimes updated in-place without any call to the cache, we need this helper to keep the token
        count correct.
        """
        if state_idx == 0:
            self.cumulative_length_linear.add_(1)
            if self.record_past:
                self.num_tokens_linear += 1


class LinearAttentionLayer:
    def update_conv_state(
        self, conv_states: torch.Tensor, state_idx: int = 0, conv_kernel_size: int | None = None, **kwargs
    ) -> torch.Tensor:
        """
        Add the conv inputs of a forward to the cache, and return them behind the cached left context, as the causal conv
        of the forward needs them.

        Args:
            conv_states (`torch.Tensor`): The conv inputs of the new tokens, of shape `(batch_size, channels, seq_len)`.
            state_idx (`int`, *optional*, defaults to 0): Which of the layer's conv states to update.
            conv_kernel_size (`int`, *optional*): The kernel size, needed on the first update while recording the past.

        Returns:
            `torch.Tensor`: The cached left context followed by `conv_states`.
        """
        if not self.is_conv_states_initialized[state_idx]:
            self.lazy_initialization(conv_states=conv_states, state_idx=state_idx, conv_kernel_size=conv_kernel_size)
        num_new_tokens = conv_states.shape[-1]
        if state_idx == 0:
            # The length on the device (read by compiled code) and, while recording, on the host (read by `crop` without a
            # device sync; a host count that changes every step would make a compiled forward recompile every step)
            self.cumulative_length_linear.add_(num_new_tokens)
            if self.record_past:
                self.num_tokens_linear += num_new_tokens
        if self.record_past:
            # The conv update opens the forward of every model. The state from before the forward is a rollback point
            # if the forward hands over the states after each of its tokens (at most `recurrent_states_to_keep`, see
            # `_extend_history`): it is copied now, as the model may write the cached one in place (the per-token path
            # of Mamba-1 mixers). The only copy of the state a recording forward makes; none without recording
            before_forward = None
            if self.is_recurrent_states_initialized[state_idx] and num_new_tokens <= self.recurrent_states_to_keep:
                before_forward = self.recurrent_states[state_idx].clone()
            self.recurrent_states_before_forward[state_idx] = before_forward

        kernel_size = self.conv_kernel_size[state_idx]
        if self.has_previous_state[state_idx]:
            full_conv_states = torch.cat([self.conv_states[state_idx], conv_states], dim=-1)
        else:
            # The first forward has no left context: the conv sees zeros before the first token
            self.has_previous_state[state_idx] = True
            full_conv_states = conv_states
            if not self.record_past and num_new_tokens < kernel_size:
                full_conv_states = torch.nn.functional.pad(conv_states, (kernel_size - num_new_tokens, 0))

        if self.record_past:
            # Every token is kept until the next `crop`, behind at least `kernel_size` columns (zeros before the first
            # token), so that the tokens `crop` can remove are the ones after the first `kernel_size`
            stored = full_conv_states
            if stored.shape[-1] < kernel_size:
                stored = torch.nn.functional.pad(stored, (kernel_size - stored.shape[-1], 0))
            self.conv_states[state_idx] = stored
        else:
            # The next forward only needs the last `kernel_size` columns, written in place to keep the static address
            self.conv_states[state_idx].copy_(full_conv_states[..., -kernel_size:])
        return full_conv_states

    def update_recurrent_state(
        self, recurrent_states: torch.Tensor | list[torch.Tensor], state_idx: int = 0, **kwargs
    ) -> torch.Tensor:
        """
        Store the recurrent state after the last token of a forward (in place, keeping the static address), and return it.
        While the layer records its past, the states it can be rolled back to are kept too (see `_extend_history`).

        Args:
            recurrent_states (`torch.Tensor` or `list[torch.Tensor]`): The state after the last token, or the states after
                each of the last tokens of the forward, the last one last (see `Cache.get_recurrent_states_to_keep`).
            state_idx (`int`, *optional*, defaults to 0): Which of the layer's recurrent states to update.

        Returns:
            `torch.Tensor`: The cached recurrent state.
        """
        if not self.is_recurrent_states_initialized[state_idx]:
            self.lazy_initialization(recurrent_states=recurrent_states, state_idx=state_idx)
        per_token = not isinstance(recurrent_states, torch.Tensor)
        if self.record_past:
            # The tokens of this forward, counted by the conv update that precedes this one in every model
            num_new_tokens = self.num_tokens_linear - self.recurrent_states_num_tokens[state_idx]
            self.recurrent_states_num_tokens[state_idx] = self.num_tokens_linear
            self._extend_history(state_idx, list(recurrent_states[:-1]) if per_token else [], num_new_tokens)
        self.recurrent_states[state_idx].copy_(recurrent_states[-1] if per_token else recurrent_states)
        return self.recurrent_states[state_idx]

    def _extend_history(self, state_idx: int, intermediate_states: list[torch.Tensor], num_new_tokens: int) -> None:
        """
        Adds the rollback points of a forward of `num_new_tokens` tokens to the history of state `state_idx`: the states
        after each of its tokens but the last, and the state from before the forward when it is adjacent to them (every
        token of the forward has its state; unknown for a layer without conv states, which is then assumed). The history
        keeps the last `recurrent_states_to_keep` of them.
        """
        history = self.recurrent_states_history[state_idx]
        # The state from before the forward, as its conv update copied it (the model may have written the cached one in
        # place since)
        before_forward = self.recurrent_states_before_forward[state_idx]
        self.recurrent_states_before_forward[state_idx] = None
        if self.is_conv_states_initialized[0] and num_new_tokens != len(intermediate_states) + 1:
            # The tokens before the first state handed over have no state: nothing older can be reached
            history.clear()
        elif before_forward is not None:
            history.append(before_forward)
        elif num_new_tokens <= self.recurrent_states_to_keep:
            # Not copied by a conv update: the layer has no conv states, or had no recurrent state before this forward
            # (it was just initialized to zeros). A copy, as `update_recurrent_state` overwrites the cached one in place
            history.append(self.recurrent_states[state_idx].clone())
        # Else the forward handed over more states than the history keeps: the one from before it would be trimmed
        history.extend(intermediate_states)
        del history[: max(len(history) - self.recurrent_states_to_keep, 0)]


class LinearAttentionAndFullAttentionLayer:
    def crop(self, tokens_to_remove: int) -> None:
        # The linear attention part checks it can be cropped before anything changes; the attention part always can
        LinearAttentionLayer.crop(self, tokens_to_remove)
        DynamicLayer.crop(self, tokens_to_remove)


class LinearAttentionAndSlidingWindowAttentionLayer:
    def crop(self, tokens_to_remove: int) -> None:
        # Check both parts before cropping either: the sliding window part can only be cropped once the window is full if it
        # recorded its past
        if tokens_to_remove < 0 and self.get_seq_length() >= self.sliding_window and not self.record_past:
            raise RuntimeError(
                "`crop` was called, but the current layer does not track past states, and the sliding window size was already "
                "reached. Call `activate_past_recording` before `crop` to be able to rollback the cache."
            )
        LinearAttentionLayer.crop(self, tokens_to_remove)
        DynamicSlidingWindowLayer.crop(self, tokens_to_remove)


class LinearAttentionAndStaticSlidingWindowAttentionLayer:
    def _check_crop(self, tokens_to_remove: int) -> None:
        LinearAttentionLayer._check_crop(self, tokens_to_remove)
        StaticSlidingWindowLayer._check_crop(self, tokens_to_remove)

    def crop(self, tokens_to_remove: int) -> None:
        # Check both parts before cropping either
        if tokens_to_remove:
            self._check_crop(tokens_to_remove)
        LinearAttentionLayer.crop(self, tokens_to_remove)
        StaticSlidingWindowLayer.crop(self, tokens_to_remove)


class Cache:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current Cache. For layers that do not need to keep all the past states in memory,
        such as sliding window layers or linear attention layers, this will also restrict the size of the cached states back to their
        minimal working size. This means that `crop(0)` will not necessarily always be a no-op, as it may still remove useless states
        (i.e. states that are not needed for the next `forward`) from the Cache.
        If a layer cannot undo the removal exactly, this raises before any layer changes.
        """
        # `generate` may pass a 0-d tensor: read it on the host once, rather than once or more per layer (`operator.index`
        # takes integer tensors only, as slicing does); a numpy integer becomes an int too, so that the layers' counters
        # stay ints
        if type(tokens_to_remove) is not int and isinstance(tokens_to_remove, (torch.Tensor, numbers.Integral)):
            tokens_to_remove = operator.index(tokens_to_remove)
        layers = self.layers
        if tokens_to_remove < 0:
            for layer in layers:
                if type(layer) is not DynamicLayer:
                    break
            else:
                # The common case: plain dynamic layers can always be cropped, so they are cut here directly, as their
                # `crop` would (checking every layer first must not cost this case a second call per layer)
                stop = tokens_to_remove if tokens_to_remove > -(2**62) else -(2**62)
                for layer in layers:
                    if layer.is_initialized:
                        try:
                            keys = layer.keys[..., :stop, :]
                        except IndexError:
                            # No token yet: `early_initialization` leaves empty 1-D states until the first `update`
                            continue
                        layer.keys = keys
                        layer.values = layer.values[..., :stop, :]
                return
        if tokens_to_remove:
            for layer in layers:
                layer._check_crop(tokens_to_remove)
        for layer in layers:
            layer.crop(tokens_to_remove)
