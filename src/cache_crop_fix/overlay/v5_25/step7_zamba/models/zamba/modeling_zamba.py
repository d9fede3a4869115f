# Step 7 of the fix for transformers 5.25.x, in `transformers/models/zamba/modeling_zamba.py`: Zamba's Mamba mixer
# (per-head selective scans) handed the cache only the state after the last token of a forward, so a recording cache
# (assisted decoding) had nothing to roll back to. The forwards of a recording cache now go through the recurrent form
# (the single-token update), token by token from the cached state, on a copy of it (the update writes its state in
# place, and the cache records the state it holds), and hand over the state after each of the last
# `recurrent_states_to_keep` tokens, as the Mamba2 models do. A codemod of the recurrent form of
# `ZambaMambaMixer.forward` rather than a copy of the method (see `cache_crop_fix.codemod`); the exporter applies it to
# `modular_zamba.py` as well.

CODEMODS = {
    "ZambaMambaMixer.forward": (
        "# Recurrent form\n"
        "if recurrent_state is not None and seq_len == 1:\n"
        "    scan_outputs = []\n"
        "\n"
        "    for head_idx in range(self.n_mamba_heads):\n"
        "        scan_output = mamba_selective_state_update(\n"
        "            recurrent_state[:, head_idx],\n"
        "            hidden_states_B_C[head_idx, ..., 0],\n"
        "            time_step[head_idx, ..., 0],\n"
        "            A[head_idx],\n"
        "            B[head_idx, :, 0],\n"
        "            C[head_idx, :, 0],\n"
        "            self.D[head_idx],\n"
        "            z=gate[head_idx, ..., 0],\n"
        "            dt_bias=time_proj_bias[head_idx] if time_proj_bias is not None else None,\n"
        "            dt_softplus=True,\n"
        "        ).unsqueeze(-1)\n"
        "        scan_outputs.append(scan_output)\n"
        "\n"
        "    scan_output = torch.cat(scan_outputs, dim=1)",
        "# Recurrent form: a single token, or the tokens of a cache that records its past (it needs the state after each\n"
        "# of the last `recurrent_states_to_keep` tokens to be cropped later)\n"
        "recording = cache is not None and cache.is_recording_past(self.layer_idx)\n"
        "if (recurrent_state is not None and seq_len == 1) or recording:\n"
        "    scan_outputs, states = [], []\n"
        "    if recording:  # on a copy: the updates write it in place, and the cache records the state it holds\n"
        "        num_states = min(cache.get_recurrent_states_to_keep(self.layer_idx), seq_len)\n"
        "        if recurrent_state is None:\n"
        "            recurrent_state = A.new_zeros(batch_size, *A.shape, dtype=torch.promote_types(dtype, A.dtype))\n"
        "        recurrent_state = recurrent_state.clone()\n"
        "\n"
        "    for index in range(seq_len * self.n_mamba_heads):  # token by token, each head in turn\n"
        "        token_idx, head_idx = divmod(index, self.n_mamba_heads)\n"
        "        scan_output = mamba_selective_state_update(\n"
        "            recurrent_state[:, head_idx],\n"
        "            hidden_states_B_C[head_idx, ..., token_idx],\n"
        "            time_step[head_idx, ..., token_idx],\n"
        "            A[head_idx],\n"
        "            B[head_idx, :, token_idx],\n"
        "            C[head_idx, :, token_idx],\n"
        "            self.D[head_idx],\n"
        "            z=gate[head_idx, ..., token_idx],\n"
        "            dt_bias=time_proj_bias[head_idx] if time_proj_bias is not None else None,\n"
        "            dt_softplus=True,\n"
        "        ).unsqueeze(-1)\n"
        "        scan_outputs.append(scan_output)\n"
        "        if recording and head_idx == self.n_mamba_heads - 1 and token_idx >= seq_len - num_states:\n"
        "            states.append(recurrent_state.clone())\n"
        "\n"
        "    scan_output = torch.cat(scan_outputs, dim=1).view(batch_size, seq_len, -1).transpose(1, 2)\n"
        "    if recording:\n"
        "        cache.update_recurrent_state(states if len(states) > 1 else recurrent_state, self.layer_idx)",
    )
}
