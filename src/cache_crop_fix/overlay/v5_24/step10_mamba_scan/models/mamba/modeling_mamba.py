# Step 10 of the 5.24 backport, in `transformers/models/mamba/modeling_mamba.py`: one block of `MambaMixer.forward`
# changes. The main line's step 16 in 5.24's code, which has no `mamba_scan_forward` yet: a forward of several tokens
# over a cache that holds a state (a chunked prefill, a second turn) ran the scan, which starts from zeros. Those tokens
# now go through the recurrent form (the single-token update, which writes the cached state in place), one by one.
# FalconMamba's and Jamba's mixers, copies of Mamba's, change the same way (their own overlay modules).

CODEMODS = {
    "MambaMixer.forward": (
        "# Recurrent form\n"
        "if recurrent_state is not None and seq_len == 1:\n"
        "    scan_output = mamba_selective_state_update(\n"
        "        recurrent_state,\n"
        "        hidden_states_B_C.transpose(1, 2)[..., 0],\n"
        "        time_step[..., 0],\n"
        "        A,\n"
        "        B[:, 0],\n"
        "        C[:, 0],\n"
        "        self.D,\n"
        "        z=gate[..., 0],\n"
        "        dt_bias=time_proj_bias,\n"
        "        dt_softplus=True,\n"
        "    ).unsqueeze(-1)",
        "# Recurrent form, also for the tokens that continue a cached state: the scan below starts from zeros\n"
        "if recurrent_state is not None:\n"
        "    scan_output = torch.stack(\n"
        "        [\n"
        "            mamba_selective_state_update(\n"
        "                recurrent_state,\n"
        "                hidden_states_B_C.transpose(1, 2)[..., i],\n"
        "                time_step[..., i],\n"
        "                A,\n"
        "                B[:, i],\n"
        "                C[:, i],\n"
        "                self.D,\n"
        "                z=gate[..., i],\n"
        "                dt_bias=time_proj_bias,\n"
        "                dt_softplus=True,\n"
        "            )\n"
        "            for i in range(seq_len)\n"
        "        ],\n"
        "        dim=-1,\n"
        "    )",
    )
}
