# Step 16 of the fix for transformers 5.25.x, in `transformers/models/mamba/modeling_mamba.py`: statements of
# `mamba_scan_forward` change. A forward of several tokens over a cache that holds a state (a chunked prefill, a second
# turn) ran them through the scan, which starts from zeros (neither the torch scan nor `selective_scan_fn` takes a
# starting state): its outputs and the state it cached were those of a sequence without the cached tokens. Those tokens
# now go through the recurrent form, from the cached state, which keeps the states after the last
# `recurrent_states_to_keep` tokens only. A codemod rather than a copy of the function (see `cache_crop_fix.codemod`);
# FalconMamba and Jamba, whose modular files import the function from Mamba, have generated copies of it (the same
# change, in their own overlay modules).

CODEMODS = {
    "mamba_scan_forward": [
        (
            "# TODO Cyril: since `mamba_selective_scan` does not take the past state, it is WRONG if the cache is not empty. This is a very\n"
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
