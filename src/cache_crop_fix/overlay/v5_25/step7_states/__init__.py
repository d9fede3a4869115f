"""Step 7: Zamba and Zaya hand a recording cache the state after each of its last tokens, and Zamba continues a cache."""
