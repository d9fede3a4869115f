"""Step 5: quantized layers crop their quantized and residual parts together."""
