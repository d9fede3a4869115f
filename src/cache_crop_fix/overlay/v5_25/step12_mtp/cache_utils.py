# Step 12 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: once a round may re-feed tokens after a
# one-token prompt, a recording layer's first conv update is narrower than the kernel. It is now stored behind zeros up
# to `conv_kernel_size` columns, as a prefill that does not record keeps it: a crop then removes the last tokens of a
# conv state that still holds the left context the next forward needs. The one statement of
# `LinearAttentionLayer.update_conv_state` that changes: a codemod rather than a copy of the method (see
# `cache_crop_fix.codemod`).

CODEMODS = {
    "LinearAttentionLayer.update_conv_state": (
        "self.conv_states[state_idx] = full_conv_states",
        "# Behind zeros up to `conv_kernel_size` columns: a crop must leave the left context the next forward needs\n"
        "padding_length = self.conv_kernel_size[state_idx] - full_conv_states.shape[-1]\n"
        "self.conv_states[state_idx] = (\n"
        "    torch.nn.functional.pad(full_conv_states, (padding_length, 0), value=0)\n"
        "    if padding_length > 0\n"
        "    else full_conv_states\n"
        ")",
    )
}
