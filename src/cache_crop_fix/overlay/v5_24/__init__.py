"""The fix for transformers 5.24.x, as a stack of steps (one upstream pull request each), applied in order."""
