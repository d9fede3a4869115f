"""Step 9: single-token forwards over static attention layers keep their causal mask while linear layers record."""
