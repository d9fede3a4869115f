# Our version of the methods of `transformers/cache_utils.py` (transformers 5.14.x) that step 7 adds or changes: while
# a cache records its past with a `history_length`, each linear-attention layer with recurrent states keeps the states
# from before each of its last `history_length` updates, with the number of tokens each update added, so that
# `crop(-k)` restores them exactly when the last updates added exactly `k` tokens.
#
# Each class below is named like the upstream class it changes and holds only the methods this step adds or replaces;
# module-level functions are helpers added to the upstream module. The patcher installs them on the upstream classes
# at runtime and the exporter transplants them into upstream's file, so this file is written to read right inside
# `transformers/cache_utils.py`. The classes here are never instantiated.

import collections
from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.cache_utils import CacheLayerMixin, LinearAttentionCacheLayerMixin


def _tensor_version(tensor: torch.Tensor | None) -> int | None:
    """The version counter of `tensor` (it grows with every in-place write), or `None` if it is not tracked."""
    if tensor is None or torch.is_inference(tensor):
        return None
    return tensor._version


class LinearAttentionCacheLayerMixin:
    def activate_past_recording(self, history_length: int = 0) -> None:
        """
        Activates past state recording: a call to `update_conv_state` waits for a call to `crop` before restricting
        the size of the `conv_states` to `conv_kernel_size`, to be able to retrieve previous full states.

        With `history_length > 0`, recurrent states can be rolled back too: for each of its last `history_length`
        updates, the layer keeps the conv and recurrent states from before the update and the number of tokens the
        update added (counted by the first attention layer of the [`Cache`]). `crop(-k)` then restores them exactly
        when the last updates added exactly `k` tokens (e.g. the draft tokens of an assistant model, one per
        forward). This costs up to `history_length` times the size of the layer's states: the recurrent states are
        kept as handed over by the model (no copy), the conv states are copied, since kernels write them in place.

        Args:
            history_length (`int`, *optional*, defaults to 0):
                How many updates can be undone on layers with recurrent states. It can only grow.
        """
        self.record_past = True
        history = getattr(self, "history", None)
        if history_length > 0 and (history is None or history.maxlen < history_length):
            self.history = collections.deque(history or (), maxlen=history_length)
            if history is None:
                # The states the next update starts from (copied conv states, since kernels write them in place)
                has_past = self.is_recurrent_states_initialized[0] and self.has_previous_state[0]
                self._history_has_past = has_past
                self._history_conv_state = (
                    self.conv_states[0].clone() if has_past and self.conv_states[0] is not None else None
                )
                self._history_recurrent_version = _tensor_version(self.recurrent_states[0]) if has_past else None
                self._history_pending_tokens = None

    def _record_update_length(self, num_tokens: int) -> None:
        """
        Called by the [`Cache`] with the number of tokens of the current forward pass, once per pass: it completes the
        newest history entry if this layer was updated earlier in the pass, otherwise it is kept for the next entry.
        """
        if self.history and self.history[-1][0] is None:
            self.history[-1][0] = num_tokens
        else:
            self._history_pending_tokens = num_tokens

    def _get_history_depth(self, tokens_to_remove: int) -> int | None:
        """
        How many of the last updates added exactly `tokens_to_remove` tokens, or `None` if no number of them did (or
        the history cannot restore them).
        """
        total = 0
        for depth, (num_tokens, _, _, is_intact) in enumerate(reversed(getattr(self, "history", None) or ()), 1):
            if num_tokens is None or not is_intact:
                return None
            total += num_tokens
            if total >= tokens_to_remove:
                return depth if total == tokens_to_remove else None
        return None

    def _check_crop(self, max_length: int) -> None:
        """
        Raises an error if the linear attention states of this layer cannot be rolled back exactly by
        `crop(max_length)`. Conv states can be rolled back by the tokens recorded since `activate_past_recording()`.
        Recurrent states summarize every past token: they can be rolled back only to the start of one of the updates
        kept in the layer's history (see `activate_past_recording(history_length=...)`), and fully otherwise. It is
        called on every layer of a [`Cache`] before any of them is cropped, so it must not change anything.

        Args:
            max_length (`int`):
                `0` for a full rollback, otherwise the negative number of tokens to remove (see [`Cache.crop`]).
        """
        if max_length == 0:
            return
        layer_name = self.__class__.__name__
        if max_length > 0:
            raise ValueError(
                f"`{layer_name}` has no sequence length, so it cannot be cropped to an absolute length: use `crop(-k)` "
                "to remove the last k tokens."
            )
        if any(self.is_recurrent_states_initialized.values()):
            if self.number_of_states == 1 and self._get_history_depth(-max_length) is not None:
                return
            history = getattr(self, "history", None)
            if history is None:
                hint = (
                    "Call `cache.activate_past_recording(history_length=...)` to keep the states of the last updates."
                )
            else:
                lengths = [num_tokens for num_tokens, _, _, _ in history]
                hint = (
                    f"Its history can restore the states before each of its last {len(history)} update(s), which "
                    f"added {lengths} token(s) (`None`: not counted, e.g. without an attention layer in the cache)."
                )
            raise RuntimeError(
                f"Cannot remove {-max_length} token(s) from a `{layer_name}`: its recurrent states summarize every past "
                f"token and cannot be rolled back exactly by that many tokens. {hint} Only a full rollback "
                "(`crop(-cache.get_seq_length())`) is possible."
            )
        if any(self.is_conv_states_initialized.values()) and not self.record_past:
            raise RuntimeError(
                f"Cannot remove {-max_length} token(s) from a `{layer_name}`: it does not record its past conv states. "
                "Call `cache.activate_past_recording()` before the tokens to roll back are added."
            )
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if not is_initialized:
                continue
            recorded_tokens = self.conv_states[state_idx].shape[-1] - self.conv_kernel_size[state_idx]
            if recorded_tokens < -max_length:
                raise RuntimeError(
                    f"Cannot remove {-max_length} token(s) from a `{layer_name}`: only {max(recorded_tokens, 0)} past "
                    "token(s) of its conv states were recorded."
                )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Roll back the linear attention states. A full rollback resets them; removing tokens restores the states kept
        in the history (layers with recurrent states), or keeps the `conv_kernel_size` conv states that precede them.

        Args:
            tokens_to_remove (`int`):
                `0` for a full rollback, otherwise the negative number of tokens to remove.
        """
        LinearAttentionCacheLayerMixin._check_crop(self, tokens_to_remove)
        history = getattr(self, "history", None)
        if tokens_to_remove == 0:
            for state_idx in range(self.number_of_states):
                # Recorded conv states may be the very tensor the model passed in: replace them, never zero them
                if self.is_conv_states_initialized[state_idx] and self.record_past:
                    kernel_size = self.conv_kernel_size[state_idx]
                    self.conv_states[state_idx] = self.conv_states[state_idx].new_zeros(
                        (*self.conv_states[state_idx].shape[:-1], kernel_size)
                    )
                elif self.is_conv_states_initialized[state_idx]:
                    self.conv_states[state_idx].zero_()
                # With a history, they may be the tensor the model passed in as well
                if self.is_recurrent_states_initialized[state_idx] and history is not None:
                    self.recurrent_states[state_idx] = torch.zeros_like(self.recurrent_states[state_idx])
                elif self.is_recurrent_states_initialized[state_idx]:
                    self.recurrent_states[state_idx].zero_()
                self.has_previous_state[state_idx] = False
            if history is not None:
                history.clear()
                self._history_has_past = False
                self._history_pending_tokens = None
                self._history_conv_state = None
            return
        if any(self.is_recurrent_states_initialized.values()):
            depth = self._get_history_depth(-tokens_to_remove)
            for _ in range(depth - 1):
                history.pop()
            _, conv_state, recurrent_state, _ = history.pop()
            if recurrent_state is None:
                # The states from before the first update: nothing was cached yet
                self.has_previous_state[0] = False
                self._history_has_past = False
                self._history_conv_state = None
            else:
                self.recurrent_states[0] = recurrent_state
                self.has_previous_state[0] = True
                self._history_has_past = True
                if conv_state is not None:
                    # The restored conv states may be written in place by the next forward: keep our copy intact
                    self.conv_states[0] = conv_state
                    self._history_conv_state = conv_state.clone()
            self._history_recurrent_version = _tensor_version(self.recurrent_states[0])
            self._history_pending_tokens = None
            return
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if is_initialized:
                kernel_size = self.conv_kernel_size[state_idx]
                self.conv_states[state_idx] = self.conv_states[state_idx][
                    ..., tokens_to_remove - kernel_size : tokens_to_remove
                ]


class LinearAttentionLayer:
    def update_conv_state(
        self, conv_states: torch.Tensor, state_idx: int = 0, conv_kernel_size: int | None = None, **kwargs
    ) -> torch.Tensor:
        """
        Store the conv states of this update and return those the causal convolution needs: the cached left context
        followed by the new states. How much is kept depends on recording: without it, the last `conv_kernel_size`
        states (copied in place); with it, everything until the next `crop`; with a history (see
        `activate_past_recording`), the last `conv_kernel_size` states of layers that also hold recurrent states
        (their conv states come back from the history), and `conv_kernel_size` plus the history's length otherwise.

        Args:
            conv_states (`torch.Tensor`): The conv states of the new tokens.

        Returns:
            `torch.Tensor`: The conv states the convolution reads.
        """
        if not self.is_conv_states_initialized[state_idx]:
            self.lazy_initialization(conv_states=conv_states, state_idx=state_idx, conv_kernel_size=conv_kernel_size)
        kernel_size = self.conv_kernel_size[state_idx]

        if self.has_previous_state[state_idx]:
            # The convolution must see the cached left context before the new states
            states = torch.cat([self.conv_states[state_idx], conv_states], dim=-1)
        else:
            # First update: a prefill shorter than the kernel is left-padded, unless the past is recorded as is
            self.has_previous_state[state_idx] = True
            missing = kernel_size - conv_states.shape[-1]
            states = conv_states
            if missing > 0 and not self.record_past:
                states = torch.nn.functional.pad(conv_states, (missing, 0), value=0)

        if not self.record_past:
            # In place, so that the tensor keeps its (static) address
            self.conv_states[state_idx].copy_(states[..., -kernel_size:])
        elif getattr(self, "history", None) is None:
            self.conv_states[state_idx] = states
        else:
            kept = (
                kernel_size if self.is_recurrent_states_initialized[state_idx] else kernel_size + self.history.maxlen
            )
            self.conv_states[state_idx] = states[..., -kept:]
        return states

    def update_recurrent_state(self, recurrent_states: torch.Tensor, state_idx: int = 0, **kwargs) -> torch.Tensor:
        """
        Update the linear attention cache in-place, and return the necessary ssm states.

        With a history (see `activate_past_recording`), the states from before this update are kept instead: the new
        recurrent states are stored as handed over (no copy), the conv states are copied (kernels write them in place).

        Args:
            smm_states (`torch.Tensor`): The new ssm states to cache.

        Returns:
            `torch.Tensor`: The updated ssm states.
        """
        history = getattr(self, "history", None)
        if history is None or self.number_of_states != 1:
            if not self.is_recurrent_states_initialized[state_idx]:
                self.lazy_initialization(recurrent_states=recurrent_states, state_idx=state_idx)
            # Note that we copy instead of assigning, to preserve the static address for cudagraphs
            self.recurrent_states[state_idx].copy_(recurrent_states)
            return self.recurrent_states[state_idx]

        if not self.is_recurrent_states_initialized[state_idx]:
            self.lazy_initialization(recurrent_states=recurrent_states, state_idx=state_idx)
        # `None`: nothing was cached before this update (first update, or after a full rollback)
        previous_states = self.recurrent_states[state_idx] if self._history_has_past else None
        # The previous states must not have been written in place since they were stored (by a kernel updating its
        # initial states in place): then they cannot be restored
        is_intact = previous_states is None or _tensor_version(previous_states) == self._history_recurrent_version
        history.append([self._history_pending_tokens, self._history_conv_state, previous_states, is_intact])
        self._history_pending_tokens = None
        self._history_has_past = True
        self.recurrent_states[state_idx] = recurrent_states
        self._history_recurrent_version = _tensor_version(recurrent_states)
        # The conv states of this update were set before (or are written in place later by a kernel): copy them
        if self.is_conv_states_initialized[state_idx]:
            self._history_conv_state = self.conv_states[state_idx].clone()
        return self.recurrent_states[state_idx]


class Cache:
    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Updates the cache with the new `key_states` and `value_states` for the layer `layer_idx`.

        Parameters:
            key_states (`torch.Tensor`):
                The new key states to cache.
            value_states (`torch.Tensor`):
                The new value states to cache.
            layer_idx (`int`):
                The index of the layer to cache the states for.

        Return:
            A tuple containing the updated key and value states.
        """
        # In this case, the `layers` were not provided, and we must append as much as `layer_idx`
        if self.layer_class_to_replicate is not None:
            while len(self.layers) <= layer_idx:
                self.layers.append(self.layer_class_to_replicate())

        if self.offloading:
            # Wait for the stream to finish if needed, and start prefetching the next layer
            torch.cuda.default_stream(key_states.device).wait_stream(self.prefetch_stream)
            self.prefetch(layer_idx + 1, self.only_non_sliding)

        keys, values = self.layers[layer_idx].update(key_states, value_states, *args, **kwargs)

        if self.offloading:
            self.offload(layer_idx, self.only_non_sliding)

        # The first attention layer counts the tokens of each forward pass for the linear attention histories
        if layer_idx == getattr(self, "_history_counting_layer_idx", None):
            for layer in self._history_layers:
                layer._record_update_length(key_states.shape[-2])

        return keys, values

    def activate_past_recording(self, history_length: int = 0):
        """
        Calling this function will activate past state recording, meaning that cache with fixed size such as a linear cache will
        wait for a call to `crop` before restricting the size of its cached states, in order to be able to retrieve previous full states.

        Args:
            history_length (`int`, *optional*, defaults to 0):
                If positive, linear attention layers with recurrent states also keep the states from before each of
                their last `history_length` updates, so that `crop(-k)` can restore them when those updates added
                exactly `k` tokens (see [`LinearAttentionCacheLayerMixin.activate_past_recording`]). The tokens of each
                update are counted by the first attention layer: a cache without one cannot use the history.
        """
        for layer_idx in range(len(self.layers)):
            if isinstance(self.layers[layer_idx], LinearAttentionCacheLayerMixin):
                self.layers[layer_idx].activate_past_recording(history_length=history_length)
            elif hasattr(self.layers[layer_idx], "activate_past_recording"):
                self.layers[layer_idx].activate_past_recording()
        if history_length > 0:
            self._history_layers = [layer for layer in self.layers if getattr(layer, "history", None) is not None]
            self._history_counting_layer_idx = next(
                (idx for idx, layer in enumerate(self.layers) if isinstance(layer, CacheLayerMixin)), None
            )
