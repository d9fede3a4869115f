"""The fix for transformers 5.25.x (upstream `main`), as a stack of steps (one upstream pull request each), applied in order."""
