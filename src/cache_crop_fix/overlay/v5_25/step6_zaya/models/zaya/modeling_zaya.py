# Step 6 of the fix for transformers 5.25.x, in `transformers/models/zaya/modeling_zaya.py`: the one statement of
# `ZayaCCAProjection.forward` that changes. Zaya's recurrent state after each token is `delayed_v_state[:, t]`, but it
# handed the cache only the last one: a recording cache (assisted decoding) had nothing to roll back to. It now hands
# over the states after the last `recurrent_states_to_keep` tokens, as the Mamba2 models do. A codemod rather than a
# copy of the method (see `cache_crop_fix.codemod`); the exporter applies it to `modular_zaya.py` as well.

CODEMODS = {
    "ZayaCCAProjection.forward": (
        "cache.update_recurrent_state(delayed_v_state[:, -1, :], self.layer_idx)",
        "# When the cache records its past, it needs the state after each of the last tokens to be cropped later\n"
        "num_states = min(cache.get_recurrent_states_to_keep(self.layer_idx), seq_len)\n"
        "if num_states > 1:\n"
        "    cache.update_recurrent_state(list(delayed_v_state[:, -num_states:].unbind(1)), self.layer_idx)\n"
        "else:\n"
        "    cache.update_recurrent_state(delayed_v_state[:, -1, :], self.layer_idx)",
    )
}
