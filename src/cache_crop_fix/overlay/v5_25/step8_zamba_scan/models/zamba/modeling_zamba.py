# Step 8 of the fix for transformers 5.25.x, in `transformers/models/zamba/modeling_zamba.py`: the multi-token forward
# of Zamba's Mamba mixer over a cache that holds a state (a chunked prefill, a second turn) restarted its scan from
# zeros (neither the torch scan nor `mamba_ssm`'s takes a starting state): its outputs, and the state it cached, were
# those of a sequence without the cached tokens. The cached state's contribution is linear, so it is added to the
# scan's: after token t it is the cached state decayed by `exp(A * cumsum(dt)_t)`, and the output gains its product
# with C, gated. No loop over the tokens. A codemod, applied after step 7's (see `cache_crop_fix.codemod`); the exporter
# applies it to `modular_zamba.py` as well.

CODEMODS = {
    "ZambaMambaMixer.forward": (
        "head_output, final_state = scan_result",
        "head_output, final_state = scan_result\n"
        "if recurrent_state is not None:\n"
        "    # The scan starts from zeros: add the cached state, decayed by exp(A * dt) at each token, to\n"
        "    # the states, and its product with C, gated, to the outputs. The decay is clamped at exp(-80),\n"
        "    # where it vanishes anyway (exp is slow on underflows)\n"
        "    dt = time_step[head_idx]\n"
        "    dt = dt + time_proj_bias[head_idx, :, None] if time_proj_bias is not None else dt\n"
        "    decay = A[head_idx].T * nn.functional.softplus(dt).cumsum(-1).transpose(1, 2)[:, :, None]\n"
        "    carried = decay.clamp_(min=-80).exp_()\n"
        "    state = recurrent_state[:, head_idx, None].transpose(2, 3)\n"
        "    # In place unless autograd records: it needs the output of `exp_`, and the state (which the\n"
        "    # cache update below overwrites)\n"
        "    carried = carried * state.clone() if torch.is_grad_enabled() else carried.mul_(state)\n"
        "    carried_output = (C[head_idx, :, :, None].to(carried.dtype) @ carried).squeeze(2)\n"
        "    head_output = head_output + carried_output.transpose(1, 2) * nn.functional.silu(gate[head_idx])\n"
        "    final_state = final_state + carried[:, -1].transpose(1, 2)",
    )
}
