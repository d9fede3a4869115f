# Step 7 of the fix for transformers 5.25.x, in `transformers/models/zamba/modeling_zamba.py`: Zamba's Mamba mixer
# (per-head selective scans) handed the cache only the state after the last token of a multi-token forward, so a
# recording cache (assisted decoding) had nothing to roll back to, and its scan always started from a zero state: a
# multi-token forward continuing a cache (chunked prefill, the verification forward of assisted decoding) ignored the
# cached state. Neither the torch scan nor the `mamba_ssm` one takes a starting state, so the tokens that continue a
# cached state, and the last `recurrent_states_to_keep` ones of a recording cache, are now run through the single-token
# update, which gives the state after each of them. The exporter applies it to `modular_zamba.py` as well.
from __future__ import annotations

from typing import TYPE_CHECKING

# The decorators of the upstream method, kept: they run when this module is imported
from transformers.integrations.accelerate import force_accelerate_hooks
from transformers.utils.deprecation import deprecate_kwarg


if TYPE_CHECKING:
    # Names that the upstream module binds and our method uses (at runtime it runs with its globals)
    import torch

    from transformers.cache_utils import Cache
    from transformers.models.zamba.modeling_zamba import (
        apply_mask_to_padding_states,
        causal_conv1d_forward,
        mamba_selective_scan,
        mamba_selective_state_update,
    )


class ZambaMambaMixer:
    @force_accelerate_hooks("conv1d")
    @deprecate_kwarg("cache_params", "5.40.0", new_name="cache")
    def forward(
        self,
        hidden_states: torch.Tensor,
        cache: Cache | None = None,
        attention_mask: torch.LongTensor | None = None,
        **kwargs,
    ):
        batch_size, seq_len, _ = hidden_states.shape
        dtype = hidden_states.dtype
        # Retrieve the recurrent state if there is a cache. It may be None if the layer is not initialized.
        if cache is not None:
            recurrent_state = cache.get_recurrent_state(self.layer_idx, state_idx=0)
        else:
            recurrent_state = None

        # 1. Gated MLP's linear projection
        hidden_states = apply_mask_to_padding_states(hidden_states, attention_mask)
        projected_states = self.in_proj(hidden_states).transpose(1, 2)

        # Key difference: Split the projection into independent Mamba heads
        hidden_states_B_C, gate = projected_states.view(batch_size, -1, 2, seq_len).chunk(2, dim=2)
        hidden_states_B_C = hidden_states_B_C.squeeze(2).contiguous()
        gate = gate.reshape(batch_size, self.n_mamba_heads, self.mamba_head_dim, seq_len).transpose(0, 1)

        # 2. Convolution sequence transformation
        hidden_states_B_C = causal_conv1d_forward(
            self.conv1d,
            hidden_states_B_C,
            cache,
            self.layer_idx,
            activation=self.activation,
            **kwargs,
        )

        # 3. SSM transformation
        hidden_states_B_C = apply_mask_to_padding_states(
            hidden_states_B_C.transpose(1, 2),
            attention_mask,
        )
        hidden_states_B_C = hidden_states_B_C.transpose(1, 2)
        hidden_states_B_C = hidden_states_B_C.reshape(
            batch_size,
            self.n_mamba_heads,
            self.mamba_head_dim,
            seq_len,
        ).transpose(0, 1)

        # Key difference: x_proj and dt_proj have separate weights for each Mamba head
        ssm_parameters = (self.x_proj_weight[:, None] @ hidden_states_B_C).transpose(-1, -2)
        time_step, B, C = torch.split(
            ssm_parameters,
            [self.time_step_rank, self.ssm_state_size, self.ssm_state_size],
            dim=-1,
        )

        time_step = self.dt_proj_weight[:, None] @ time_step.transpose(-1, -2)
        time_proj_bias = self.dt_proj_bias.float() if self.dt_proj_bias is not None else None
        A = -torch.exp(self.A_log.float())

        # Key difference: per head scans
        # Recurrent form
        if recurrent_state is not None and seq_len == 1 and not cache.is_recording_past(self.layer_idx):
            scan_outputs = []

            for head_idx in range(self.n_mamba_heads):
                scan_output = mamba_selective_state_update(
                    recurrent_state[:, head_idx],
                    hidden_states_B_C[head_idx, ..., 0],
                    time_step[head_idx, ..., 0],
                    A[head_idx],
                    B[head_idx, :, 0],
                    C[head_idx, :, 0],
                    self.D[head_idx],
                    z=gate[head_idx, ..., 0],
                    dt_bias=time_proj_bias[head_idx] if time_proj_bias is not None else None,
                    dt_softplus=True,
                ).unsqueeze(-1)
                scan_outputs.append(scan_output)

            scan_output = torch.cat(scan_outputs, dim=1)

        # Full sequence form
        else:
            output_final_state = cache is not None
            # The scan starts from a zero state: a cached state is continued token by token instead, as are the last
            # `recurrent_states_to_keep` tokens when the cache records its past (it needs their states to be cropped)
            num_states = min(cache.get_recurrent_states_to_keep(self.layer_idx), seq_len) if output_final_state else 0
            scan_len = 0 if recurrent_state is not None else seq_len - num_states
            scan_outputs = []
            final_states = []

            for head_idx in range(self.n_mamba_heads):
                head_outputs, head_states = [], []
                # A copy, as the updates below write it in place
                final_state = recurrent_state[:, head_idx].clone() if recurrent_state is not None else None
                if scan_len > 0:
                    scan_result = mamba_selective_scan(
                        hidden_states_B_C[head_idx, ..., :scan_len],
                        time_step[head_idx, ..., :scan_len],
                        A[head_idx],
                        B[head_idx, :, :scan_len].transpose(1, 2),
                        C[head_idx, :, :scan_len].transpose(1, 2),
                        D=self.D[head_idx].float(),
                        z=gate[head_idx, ..., :scan_len],
                        delta_bias=time_proj_bias[head_idx] if time_proj_bias is not None else None,
                        delta_softplus=True,
                        return_last_state=output_final_state,
                        # Old model: only when user request it explicitly
                        use_mambapy=False,
                        use_associative_scan=self.use_associative_scan,
                    )
                    if output_final_state:
                        scan_result, final_state = scan_result
                    head_outputs.append(scan_result)
                elif final_state is None:
                    final_state = hidden_states_B_C.new_zeros(batch_size, self.mamba_head_dim, self.ssm_state_size)

                for i in range(scan_len, seq_len):
                    head_output = mamba_selective_state_update(
                        final_state,
                        hidden_states_B_C[head_idx, ..., i],
                        time_step[head_idx, ..., i],
                        A[head_idx],
                        B[head_idx, :, i],
                        C[head_idx, :, i],
                        self.D[head_idx],
                        z=gate[head_idx, ..., i],
                        dt_bias=time_proj_bias[head_idx] if time_proj_bias is not None else None,
                        dt_softplus=True,
                    )
                    head_outputs.append(head_output.unsqueeze(-1))
                    if i >= seq_len - num_states:
                        head_states.append(final_state.clone())

                scan_outputs.append(torch.cat(head_outputs, dim=-1))
                final_states.append(head_states or [final_state])

            scan_output = torch.cat(scan_outputs, dim=1)

            if output_final_state:
                # The states of all heads after each of the last `num_states` tokens, or after the last token
                final_state = [torch.stack(states, dim=1) for states in zip(*final_states)]
                cache.update_recurrent_state(final_state if len(final_state) > 1 else final_state[0], self.layer_idx)

        # 4. Final linear projection
        contextualized_states = self.out_proj(scan_output.transpose(1, 2).to(dtype))
        return contextualized_states
