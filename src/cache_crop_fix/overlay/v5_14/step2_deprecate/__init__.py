"""Step 2: argument checks, a `FutureWarning` for absolute crops, `tokens_to_remove=`, and relative crops at call sites."""
