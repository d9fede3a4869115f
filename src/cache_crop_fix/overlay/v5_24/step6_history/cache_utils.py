# Step 6 of the fix for transformers 5.24.x, in `transformers/cache_utils.py`: while a cache records its past with a
# `history_length`, each linear attention layer with recurrent states keeps the states from before each of its last
# `history_length` updates, with the number of tokens each update added, so that `crop(-k)` restores them exactly when
# the last updates added exactly `k` tokens. Layers with conv states only need no history: their recorded conv states
# already roll back.
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
    from transformers.cache_utils import LinearAttentionCacheLayerMixin, _get_number_of_tokens_to_remove


def _tensor_version(tensor: torch.Tensor | None) -> int | None:
    """The version counter of `tensor` (it grows with every in-place write), or `None` if it is not tracked."""
    if tensor is None or torch.is_inference(tensor):
        return None
    return tensor._version


class LinearAttentionCacheLayerMixin:
    def activate_past_recording(self, history_length: int = 0) -> None:
        """
        Calling this function will activate past state recording, meaning that a call to `update_conv_states` will
        wait for a call to `crop` before restricting the size of the `conv_states` to `conv_kernel_size`, to be able
        to retrieve previous full states.

        With `history_length > 0`, recurrent states can be rolled back too: for each of its last `history_length`
        updates, a layer with recurrent states keeps the conv and recurrent states from before the update and the
        number of tokens the update added. `crop(-k)` then restores them exactly when the last updates added exactly
        `k` tokens (e.g. the draft tokens of an assistant model, one per forward). The states kept are the tensors the
        model handed over (no copy); a layer whose recurrent states are written in place by a kernel copies them from
        the update after it notices. Either way this keeps up to `history_length` times the layer's states alive.

        Args:
            history_length (`int`, *optional*, defaults to 0):
                How many updates can be undone on layers with recurrent states. It can only grow.
        """
        if not self.record_past:
            # A layer that records from its first token knows how many each of its states holds: removing them all
            # resets it
            has_past = any(self.has_previous_state.values())
            self._num_recorded_tokens = None if has_past else dict.fromkeys(range(self.number_of_states), 0)
        self.record_past = True
        history = getattr(self, "history", None)
        if history_length > 0 and (history is None or history.maxlen < history_length):
            # Updates made before the history existed cannot be undone: it starts empty
            self.history = collections.deque(history or (), maxlen=history_length)
            if history is None:
                self._history_copies_states = False
                self._history_conv_version = _tensor_version(self.conv_states[0])

    def _push_history(self, num_tokens: int) -> None:
        """
        Called by `update_conv_state` before an update of `num_tokens` tokens: keeps the states the update starts from.
        Layers without recurrent states keep nothing, since their recorded conv states roll back on their own.
        """
        history = self.history
        has_past = self.has_previous_state[0]
        if has_past and not self.is_recurrent_states_initialized[0]:
            history.clear()
            return
        if history and history[-1][3] is not None and not self._history_copies_states:
            # The states before the previous update were written in place (by a kernel updating its initial states):
            # from now on they are copied
            self._history_copies_states = _tensor_version(history[-1][3]) != history[-1][4]
        conv_state = self.conv_states[0] if has_past else None
        recurrent_state = self.recurrent_states[0] if has_past else None
        if recurrent_state is not None and self._history_copies_states:
            recurrent_state = recurrent_state.clone()
        history.append(
            [num_tokens, conv_state, _tensor_version(conv_state), recurrent_state, _tensor_version(recurrent_state)]
        )

    def _get_history_depth(self, number_of_tokens: int) -> int | None:
        """
        How many of the last updates added exactly `number_of_tokens` tokens, or `None` if no number of them did or
        the history cannot restore them (states written in place since they were kept, or updates the layer was not
        told of).
        """
        history = getattr(self, "history", None)
        if not history or _tensor_version(self.conv_states[0]) != self._history_conv_version:
            return None
        total = 0
        for depth, (num_tokens, conv_state, conv_version, recurrent_state, recurrent_version) in enumerate(
            reversed(history), 1
        ):
            if _tensor_version(conv_state) != conv_version or _tensor_version(recurrent_state) != recurrent_version:
                return None
            # In-place writes to inference tensors (`torch.inference_mode()`) leave no trace: they cannot be trusted
            if any(
                t is not None and torch.is_inference(t) for t in (conv_state, recurrent_state, self.conv_states[0])
            ):
                return None
            total += num_tokens
            if total >= number_of_tokens:
                return depth if total == number_of_tokens else None
        return None

    def _check_crop(self, tokens_to_remove: int) -> None:
        """
        Raises an error if the linear attention states cannot be rolled back exactly by `crop(tokens_to_remove)`.
        Conv states can be rolled back by the tokens recorded since `activate_past_recording` (or the last `crop`).
        Recurrent states summarize every past token: they can be rolled back only to the start of one of the updates
        kept in the layer's history (see `activate_past_recording(history_length=...)`), and otherwise only by a full
        rollback of the cache (see [`Cache.crop`]).
        """
        number_of_tokens = -tokens_to_remove
        if number_of_tokens == 0 or self._removes_every_token(number_of_tokens):
            return
        layer_name = self.__class__.__name__
        if any(self.is_recurrent_states_initialized.values()):
            if self.number_of_states == 1 and self._get_history_depth(number_of_tokens) is not None:
                return
            history = getattr(self, "history", None)
            if history is None:
                hint = (
                    "Call `cache.activate_past_recording(history_length=...)` to keep the states of the last updates."
                )
            else:
                lengths = [entry[0] for entry in history]
                hint = (
                    f"Its history can restore the states before each of its last {len(history)} update(s), which "
                    f"added {lengths} token(s), unless they were written in place since, or created under "
                    "`torch.inference_mode()` (where in-place writes cannot be detected)."
                )
            raise RuntimeError(
                f"Cannot remove {number_of_tokens} token(s) from a `{layer_name}`: its recurrent states summarize "
                f"every past token and cannot be rolled back exactly by that many tokens. {hint} Only a full rollback "
                "of the cache (`cache.crop(-cache.get_seq_length())`) is possible."
            )
        if any(self.is_conv_states_initialized.values()) and not self.record_past:
            raise RuntimeError(
                f"Cannot remove {number_of_tokens} token(s) from a `{layer_name}`: it does not record its past conv "
                "states. Call `cache.activate_past_recording()` before the tokens to remove are added."
            )
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if not is_initialized:
                continue
            recorded_tokens = self.conv_states[state_idx].shape[-1] - self.conv_kernel_size[state_idx]
            if recorded_tokens < number_of_tokens:
                raise RuntimeError(
                    f"Cannot remove {number_of_tokens} token(s) from a `{layer_name}`: only {max(recorded_tokens, 0)} "
                    f"token(s) of its conv states {state_idx} were recorded since `activate_past_recording` or the "
                    "last `crop`. Only a full rollback of the cache (`cache.crop(-cache.get_seq_length())`) is "
                    "possible."
                )

    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove the last `-tokens_to_remove` tokens from the linear attention states. Layers with recurrent states
        restore the states kept in their history from before the updates that added those tokens. Conv states alone
        keep the `conv_kernel_size` states before the removed tokens (zero-padded on the left if fewer were seen), so
        `crop(0)` may still drop the states recorded since `activate_past_recording`. A layer never updated has
        nothing to crop.

        Args:
            tokens_to_remove (`int`):
                The negative number of tokens to remove, e.g. `-3` to remove the last 3 tokens. `0` removes nothing.
        """
        number_of_tokens = _get_number_of_tokens_to_remove(tokens_to_remove)
        # Class-qualified: in hybrid layers, `self._check_crop` also checks the attention part
        LinearAttentionCacheLayerMixin._check_crop(self, -number_of_tokens)
        if number_of_tokens and self._removes_every_token(number_of_tokens):
            LinearAttentionCacheLayerMixin.reset(self)
            return
        num_recorded_tokens = getattr(self, "_num_recorded_tokens", None)
        if num_recorded_tokens is not None:
            for state_idx, num_tokens in num_recorded_tokens.items():
                num_recorded_tokens[state_idx] = max(num_tokens - number_of_tokens, 0)
        history = getattr(self, "history", None)
        if number_of_tokens == 0 or history is None or not any(self.is_recurrent_states_initialized.values()):
            self._crop_conv_states(number_of_tokens)
            if history is not None:
                self._history_conv_version = _tensor_version(self.conv_states[0])
            return
        for _ in range(self._get_history_depth(number_of_tokens) - 1):
            history.pop()
        _, conv_state, _, recurrent_state, _ = history.pop()
        if recurrent_state is None:
            # The states from before the first update: nothing was cached yet
            self.has_previous_state[0] = False
        else:
            self.conv_states[0] = conv_state
            self.recurrent_states[0] = recurrent_state
            self.has_previous_state[0] = True
        self._history_conv_version = _tensor_version(self.conv_states[0])

    def _removes_every_token(self, number_of_tokens: int) -> bool:
        """Whether removing `number_of_tokens` tokens removes every token this layer holds (known when it has recorded
        its past from its first token on, see `activate_past_recording`)."""
        num_recorded_tokens = getattr(self, "_num_recorded_tokens", None) if self.record_past else None
        return num_recorded_tokens is not None and number_of_tokens >= max(num_recorded_tokens.values())

    def _crop_conv_states(self, number_of_tokens: int) -> None:
        """Removes the last `number_of_tokens` recorded conv states, keeping the `conv_kernel_size` before them."""
        for state_idx, is_initialized in self.is_conv_states_initialized.items():
            if not is_initialized:
                continue
            kernel_size = self.conv_kernel_size[state_idx]
            conv_states = self.conv_states[state_idx]
            # Already at its minimal size: kept as it is, as it may be a static address (when not recording)
            if number_of_tokens == 0 and conv_states.shape[-1] == kernel_size:
                continue
            kept_length = conv_states.shape[-1] - number_of_tokens
            conv_states = conv_states[..., max(kept_length - kernel_size, 0) : kept_length]
            if conv_states.shape[-1] < kernel_size:
                conv_states = torch.nn.functional.pad(conv_states, (kernel_size - conv_states.shape[-1], 0))
            self.conv_states[state_idx] = conv_states

    def reset(self) -> None:
        """Resets the cache values while preserving the objects, and forgets the history of past states"""
        history = getattr(self, "history", None)
        for i in range(self.number_of_states):
            # With a history, the states may be tensors the model handed over or that the history kept: replace them
            if self.is_conv_states_initialized[i] and history is not None:
                self.conv_states[i] = torch.zeros_like(self.conv_states[i][..., -self.conv_kernel_size[i] :])
            elif self.is_conv_states_initialized[i]:
                self.conv_states[i].zero_()
            if self.is_recurrent_states_initialized[i] and history is not None:
                self.recurrent_states[i] = torch.zeros_like(self.recurrent_states[i])
            elif self.is_recurrent_states_initialized[i]:
                self.recurrent_states[i].zero_()
            self.has_previous_state[i] = False
        if history is not None:
            history.clear()
            self._history_conv_version = _tensor_version(self.conv_states[0])
        if self.record_past:
            self._num_recorded_tokens = dict.fromkeys(range(self.number_of_states), 0)

    def reorder_cache(self, beam_idx: torch.LongTensor):
        """Reorders the cache for beam search, given the selected beam indices. The history, kept in the previous
        order, is forgotten."""
        for i in range(self.number_of_states):
            if self.is_conv_states_initialized[i]:
                self.conv_states[i] = self.conv_states[i].index_select(0, beam_idx.to(self.device))
            # recurrent_states can stay empty sometimes, see e.g. lfm2 which only uses the conv_states
            if self.is_recurrent_states_initialized[i]:
                self.recurrent_states[i] = self.recurrent_states[i].index_select(0, beam_idx.to(self.device))
        if getattr(self, "history", None) is not None:
            self.history.clear()
            self._history_conv_version = _tensor_version(self.conv_states[0])

    @property
    def is_croppable(self) -> bool:
        """
        Whether `crop` can put this layer back as it was. This needs conv states recorded since
        `activate_past_recording`, and no recurrent states unless the layer keeps a history of them (then only the
        last updates can be undone, see `activate_past_recording`).
        """
        if any(self.is_recurrent_states_initialized.values()):
            return self.number_of_states == 1 and getattr(self, "history", None) is not None
        # If nothing is initialized, we don't yet know whether we will have any recurrent states, so let's be careful.
        # If conv states are initialized but no recurrent states are, there will never be any (same forward)
        return self.record_past and any(self.is_conv_states_initialized.values())


class LinearAttentionLayer:
    def update_conv_state(
        self, conv_states: torch.Tensor, state_idx: int = 0, conv_kernel_size: int | None = None, **kwargs
    ) -> torch.Tensor:
        """
        Store the conv states of this update and return those the causal convolution needs: the cached left context
        followed by the new states. Without past recording, the last `conv_kernel_size` states are kept (copied in
        place, so that the tensor keeps its static address); with it, every state until the next `crop`. With a
        history (see `activate_past_recording`), the states from before this update are kept first.

        Args:
            conv_states (`torch.Tensor`): The conv states of the new tokens.

        Returns:
            `torch.Tensor`: The conv states the convolution reads.
        """
        if not self.is_conv_states_initialized[state_idx]:
            self.lazy_initialization(conv_states=conv_states, state_idx=state_idx, conv_kernel_size=conv_kernel_size)
        history = getattr(self, "history", None)
        if history is not None and self.number_of_states == 1:
            self._push_history(conv_states.shape[-1])
        # Only while recording (never compiled): a host count that moved every step would recompile a compiled forward
        if self.record_past and getattr(self, "_num_recorded_tokens", None) is not None:
            self._num_recorded_tokens[state_idx] += conv_states.shape[-1]
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

        if self.record_past:
            self.conv_states[state_idx] = states
        else:
            self.conv_states[state_idx].copy_(states[..., -kernel_size:])
        if history is not None:
            self._history_conv_version = _tensor_version(self.conv_states[0])
        return states

    def update_recurrent_state(self, recurrent_states: torch.Tensor, state_idx: int = 0, **kwargs) -> torch.Tensor:
        """
        Update the linear attention cache in-place, and return the necessary ssm states. With a history (see
        `activate_past_recording`), the new states are stored as handed over instead (no copy), since the history
        keeps the previous ones.

        Args:
            smm_states (`torch.Tensor`): The new ssm states to cache.

        Returns:
            `torch.Tensor`: The updated ssm states.
        """
        if not self.is_recurrent_states_initialized[state_idx]:
            self.lazy_initialization(recurrent_states=recurrent_states, state_idx=state_idx)
        if getattr(self, "history", None) is not None and self.number_of_states == 1:
            self.recurrent_states[state_idx] = recurrent_states
            # The history rolls this layer back: its conv states need no more than the convolution's window (copied
            # out of a long prefill, so that the history does not keep the prefill's conv states alive)
            conv_states, kernel_size = self.conv_states[state_idx], self.conv_kernel_size[state_idx]
            if self.is_conv_states_initialized[state_idx] and conv_states.shape[-1] > kernel_size:
                window = conv_states[..., -kernel_size:]
                self.conv_states[state_idx] = window.clone() if conv_states.shape[-1] > 2 * kernel_size else window
                self._history_conv_version = _tensor_version(self.conv_states[state_idx])
            return recurrent_states
        # Note that we copy instead of assigning, to preserve the static address for cudagraphs
        self.recurrent_states[state_idx].copy_(recurrent_states)
        return self.recurrent_states[state_idx]


class Cache:
    def activate_past_recording(self, history_length: int = 0):
        """
        Calling this function will activate past state recording, meaning that cache with fixed size such as a linear cache will
        wait for a call to `crop` before restricting the size of its cached states, in order to be able to retrieve previous full states.

        Args:
            history_length (`int`, *optional*, defaults to 0):
                If positive, linear attention layers with recurrent states also keep the states from before each of
                their last `history_length` updates, so that `crop(-k)` can restore them when those updates added
                exactly `k` tokens (see [`LinearAttentionCacheLayerMixin.activate_past_recording`]).
        """
        for layer_idx in range(len(self.layers)):
            if isinstance(self.layers[layer_idx], LinearAttentionCacheLayerMixin):
                self.layers[layer_idx].activate_past_recording(history_length=history_length)
            elif hasattr(self.layers[layer_idx], "activate_past_recording"):
                self.layers[layer_idx].activate_past_recording()
