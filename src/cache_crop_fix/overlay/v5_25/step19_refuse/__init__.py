"""Step 19 (fork only): the attention layers that cannot undo a crop (dropped or evicted tokens, quantized states) refuse it."""
