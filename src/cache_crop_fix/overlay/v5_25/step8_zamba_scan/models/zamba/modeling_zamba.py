# Step 8 of the fix for transformers 5.25.x, in `transformers/models/zamba/modeling_zamba.py`: the multi-token forward
# of Zamba's Mamba mixer over a cache that holds a state (a chunked prefill, a second turn) restarted its scan from
# zeros (neither the torch scan nor `mamba_ssm`'s takes a starting state): its outputs, and the state it cached, were
# those of a sequence without the cached tokens. The cached state's contribution is linear, so it is added to the
# scan's: after token t it is the cached state decayed by `exp(A * cumsum(dt)_t)`, and the output gains its product
# with C, gated. No loop over the tokens. The method holds step 7's change too (a recording cache goes through the
# recurrent form); the exporter applies it to `modular_zamba.py` as well.
from __future__ import annotations

from typing import TYPE_CHECKING

# The decorators of the upstream method, kept: they run when this module is imported
from transformers.integrations.accelerate import force_accelerate_hooks
from transformers.utils.deprecation import deprecate_kwarg


if TYPE_CHECKING:
    # Names that the upstream module binds and our method uses (at runtime it runs with its globals)
    import torch
    from torch import nn

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
        # Recurrent form: a single token, or the tokens of a cache that records its past (it needs the state after each
        # of the last `recurrent_states_to_keep` tokens to be cropped later)
        recording = cache is not None and cache.is_recording_past(self.layer_idx)
        if (recurrent_state is not None and seq_len == 1) or recording:
            scan_outputs, states = [], []
            if recording:  # on a copy: the updates write it in place, and the cache records the state it holds
                num_states = min(cache.get_recurrent_states_to_keep(self.layer_idx), seq_len)
                if recurrent_state is None:
                    recurrent_state = A.new_zeros(batch_size, *A.shape, dtype=torch.promote_types(dtype, A.dtype))
                recurrent_state = recurrent_state.clone()

            for index in range(seq_len * self.n_mamba_heads):  # token by token, each head in turn
                token_idx, head_idx = divmod(index, self.n_mamba_heads)
                scan_output = mamba_selective_state_update(
                    recurrent_state[:, head_idx],
                    hidden_states_B_C[head_idx, ..., token_idx],
                    time_step[head_idx, ..., token_idx],
                    A[head_idx],
                    B[head_idx, :, token_idx],
                    C[head_idx, :, token_idx],
                    self.D[head_idx],
                    z=gate[head_idx, ..., token_idx],
                    dt_bias=time_proj_bias[head_idx] if time_proj_bias is not None else None,
                    dt_softplus=True,
                ).unsqueeze(-1)
                scan_outputs.append(scan_output)
                if recording and head_idx == self.n_mamba_heads - 1 and token_idx >= seq_len - num_states:
                    states.append(recurrent_state.clone())

            scan_output = torch.cat(scan_outputs, dim=1).view(batch_size, seq_len, -1).transpose(1, 2)
            if recording:
                cache.update_recurrent_state(states if len(states) > 1 else recurrent_state, self.layer_idx)

        # Full sequence form
        else:
            output_final_state = cache is not None
            scan_outputs = []
            final_states = []

            for head_idx in range(self.n_mamba_heads):
                scan_result = mamba_selective_scan(
                    hidden_states_B_C[head_idx],
                    time_step[head_idx],
                    A[head_idx],
                    B[head_idx].transpose(1, 2),
                    C[head_idx].transpose(1, 2),
                    D=self.D[head_idx].float(),
                    z=gate[head_idx],
                    delta_bias=time_proj_bias[head_idx] if time_proj_bias is not None else None,
                    delta_softplus=True,
                    return_last_state=output_final_state,
                    # Old model: only when user request it explicitly
                    use_mambapy=False,
                    use_associative_scan=self.use_associative_scan,
                )

                if output_final_state:
                    head_output, final_state = scan_result
                    if recurrent_state is not None:
                        # The scan starts from zeros: add the cached state, decayed by exp(A * dt) at each token, to
                        # the states, and its product with C, gated, to the outputs. The decay is clamped at exp(-80),
                        # where it vanishes anyway (exp is slow on underflows)
                        dt = time_step[head_idx]
                        dt = dt + time_proj_bias[head_idx, :, None] if time_proj_bias is not None else dt
                        decay = A[head_idx].T * nn.functional.softplus(dt).cumsum(-1).transpose(1, 2)[:, :, None]
                        carried = decay.clamp_(min=-80).exp_()
                        state = recurrent_state[:, head_idx, None].transpose(2, 3)
                        # In place unless autograd records: it needs the output of `exp_`, and the state (which the
                        # cache update below overwrites)
                        carried = carried * state.clone() if torch.is_grad_enabled() else carried.mul_(state)
                        carried_output = (C[head_idx, :, :, None].to(carried.dtype) @ carried).squeeze(2)
                        head_output = head_output + carried_output.transpose(1, 2) * nn.functional.silu(gate[head_idx])
                        final_state = final_state + carried[:, -1].transpose(1, 2)
                    scan_outputs.append(head_output)
                    final_states.append(final_state)
                else:
                    scan_outputs.append(scan_result)

            scan_output = torch.cat(scan_outputs, dim=1)

            if output_final_state:
                final_state = torch.stack(final_states, dim=1)
                cache.update_recurrent_state(final_state, self.layer_idx)

        # 4. Final linear projection
        contextualized_states = self.out_proj(scan_output.transpose(1, 2).to(dtype))
        return contextualized_states
