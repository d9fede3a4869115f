"""Step 2: roll back linear-attention layers exactly through the per-token recurrent-state history of 5.25."""
