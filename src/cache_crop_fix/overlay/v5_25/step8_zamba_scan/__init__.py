"""Step 8: Zamba's multi-token forward continues the cached state."""
