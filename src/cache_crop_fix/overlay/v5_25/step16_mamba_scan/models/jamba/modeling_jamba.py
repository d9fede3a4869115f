# Step 16 of the fix for transformers 5.25.x, in `transformers/models/jamba/modeling_jamba.py`: the change of Mamba's
# `mamba_scan_forward` (see `..mamba.modeling_mamba`) in the copy the modular converter generates.

CODEMODS = {
    "mamba_scan_forward": [
        (
            "# TODO Cyril: since `jamba_selective_scan` does not take the past state, it is WRONG if the cache is not empty. This is a very\n"
            "# long standing issue, maybe only do sequential",
            "",
        ),
        (
            "effective_sequence_length = seq_len - num_intermediate_recurrent_states",
            "# The scan starts from zeros (neither the torch scan nor `selective_scan_fn` takes a starting state): the tokens\n"
            "# that continue a cached state all go through the recurrent form below, which starts from it\n"
            "effective_sequence_length = seq_len - num_intermediate_recurrent_states if recurrent_state is None else 0",
        ),
        ("for i in range(num_intermediate_recurrent_states):", "for i in range(seq_len - effective_sequence_length):"),
        (
            "intermediate_recurrent_states.append(last_recurrent_state.clone())",
            "if i >= seq_len - effective_sequence_length - num_intermediate_recurrent_states:\n"
            "    intermediate_recurrent_states.append(last_recurrent_state.clone())",
        ),
    ]
}
