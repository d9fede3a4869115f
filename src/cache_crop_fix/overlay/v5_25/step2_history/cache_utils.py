# Step 2 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: the recurrent-state history of a linear
# attention layer is one list per state (`dict.fromkeys(..., [])` shared a single list between them), made once, so that
# recording again (the candidate generators do it every round) keeps what was recorded, and cleared by `reset`, so that a
# new sequence never restores a state of the previous one. `generation/` records the states a rollback needs.
#
# Each class below is named like the upstream class it changes and holds only the methods this step replaces; the
# patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The
# classes here are never instantiated.
import torch


class LinearAttentionCacheLayerMixin:
    def __init__(self, number_of_states: int = 1, **kwargs):
        self.number_of_states = number_of_states
        # We allow to have an arbitrary number of cached states inside a single layer
        self.conv_states: dict[int, torch.Tensor | None] = dict.fromkeys(range(number_of_states))
        self.recurrent_states: dict[int, torch.Tensor | None] = dict.fromkeys(range(number_of_states))
        self.is_conv_states_initialized = dict.fromkeys(range(number_of_states), False)
        self.is_recurrent_states_initialized = dict.fromkeys(range(number_of_states), False)
        self.has_previous_state = dict.fromkeys(range(number_of_states), False)
        self.conv_kernel_size = dict.fromkeys(range(number_of_states))
        # We name it differently than attention cache so that hybrid linear+full attention layers do not collide on it
        self.cumulative_length_linear = torch.tensor(0, dtype=int)
        self.device = None
        self.dtype = None
        self.record_past = False
        self.recurrent_states_to_keep = None
        # One list per state
        self.recurrent_states_history = {i: [] for i in range(number_of_states)}

    def reset(self) -> None:
        """Resets the cache values while preserving the objects"""
        self.cumulative_length_linear.zero_()
        for i in range(self.number_of_states):
            if self.is_conv_states_initialized[i]:
                self.conv_states[i].zero_()
            if self.is_recurrent_states_initialized[i]:
                self.recurrent_states[i].zero_()
            self.has_previous_state[i] = False
            self.recurrent_states_history[i].clear()

    def activate_past_recording(self, recurrent_states_to_keep: int | None = None):
        """
        Calling this function will activate past state recording, meaning that a call to `update_conv_states` will
        wait for a call to `crop` before restricting the size of the `conv_states` to `conv_kernel_size`, to be able
        to retrieve previous full states.
        If `recurrent_states_to_keep` is provided, the recurrent states for the last `recurrent_states_to_keep` steps will be recorded.
        Calling it again keeps the states recorded so far.
        """
        self.record_past = True
        self.recurrent_states_to_keep = recurrent_states_to_keep
