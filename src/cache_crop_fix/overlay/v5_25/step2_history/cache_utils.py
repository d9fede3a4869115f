# Step 2 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: the recurrent-state history of a linear
# attention layer is one list per state (`dict.fromkeys(..., [])` shared a single list between them, so that a layer of
# several states restored one state's history into another). `generation/` records the states a rollback needs.
#
# Each class below is named like the upstream class it changes and holds only the methods this step replaces; the
# patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The
# classes here are never instantiated.


class LinearAttentionCacheLayerMixin:
    def activate_past_recording(self, recurrent_states_to_keep: int | None = None):
        """
        Calling this function will activate past state recording, meaning that a call to `update_conv_states` will
        wait for a call to `crop` before restricting the size of the `conv_states` to `conv_kernel_size`, to be able
        to retrieve previous full states.
        If `recurrent_states_to_keep` is provided, the recurrent states for the last `recurrent_states_to_keep` steps will be recorded.
        """
        self.record_past = True
        self.recurrent_states_to_keep = recurrent_states_to_keep
        # One list per state (`dict.fromkeys(..., [])` would share a single list between them)
        self.recurrent_states_history = {i: [] for i in range(self.number_of_states)}
