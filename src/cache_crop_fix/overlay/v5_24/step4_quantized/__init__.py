"""Step 4: quantized layers crop their quantized states and `cumulative_length`, or refuse what they cannot undo."""
