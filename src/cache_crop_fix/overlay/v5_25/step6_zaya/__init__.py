"""Step 6: Zaya hands a recording cache the state after each of its last tokens."""
