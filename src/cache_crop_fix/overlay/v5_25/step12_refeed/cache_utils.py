# Step 12 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: once a round may re-feed tokens after a
# one-token prompt, a recording layer's first conv update is narrower than the kernel. It is now stored behind zeros up
# to `conv_kernel_size` columns, as a prefill that does not record keeps it: a crop then removes the last tokens of a
# conv state that still holds the left context the next forward needs.
#
# Each class below is named like the upstream class it changes and holds only the methods this step replaces; the
# patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The
# classes here are never instantiated.

import torch


class LinearAttentionLayer:
    def update_conv_state(
        self, conv_states: torch.Tensor, state_idx: int = 0, conv_kernel_size: int | None = None, **kwargs
    ) -> torch.Tensor:
        """
        Update the linear attention cache in-place, and return the necessary conv states.

        Args:
            conv_states (`torch.Tensor`): The new conv states to cache.

        Returns:
            `torch.Tensor`: The updated conv states.
        """
        # Lazy initialization
        if not self.is_conv_states_initialized[state_idx]:
            self.lazy_initialization(conv_states=conv_states, state_idx=state_idx, conv_kernel_size=conv_kernel_size)

        # Add the current sequence length
        if state_idx == 0:
            self.cumulative_length_linear.add_(conv_states.shape[-1])

        # This is prefill, simply pad the conv_states if necessary
        if not self.has_previous_state[state_idx]:
            full_conv_states = conv_states
            self.has_previous_state[state_idx] = True
            # In this case, need to pad it to fit the conv_kernel_size
            if not self.record_past and full_conv_states.shape[-1] < self.conv_kernel_size[state_idx]:
                padding_length = self.conv_kernel_size[state_idx] - full_conv_states.shape[-1]
                full_conv_states = torch.nn.functional.pad(full_conv_states, (padding_length, 0), value=0)
        # We need to return the concatenation of the current state and the full new one so that the causal conv can see the
        # correct left context - however we usually cache only the last part
        else:
            full_conv_states = torch.cat([self.conv_states[state_idx], conv_states], dim=-1)

        # Usually, keep only the last `conv_kernel_size` tokens
        if not self.record_past:
            # Copy instead of assigning to keep the static address
            self.conv_states[state_idx].copy_(full_conv_states[..., -self.conv_kernel_size[state_idx] :])
        # If we need to record the past, keep the full states for now to be able to rollback later, behind zeros up to
        # `conv_kernel_size` columns: a crop must leave the left context the next forward needs
        elif full_conv_states.shape[-1] < self.conv_kernel_size[state_idx]:
            padding_length = self.conv_kernel_size[state_idx] - full_conv_states.shape[-1]
            self.conv_states[state_idx] = torch.nn.functional.pad(full_conv_states, (padding_length, 0), value=0)
        else:
            self.conv_states[state_idx] = full_conv_states

        # Return full states no matter what
        return full_conv_states
