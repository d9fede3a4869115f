"""Step 7: Zamba runs the forwards of a recording cache token by token from the cached state, and hands over the state after each token."""
