"""Step 20 (fork only): DeepSeek-V4's compressed-attention caches (`is_croppable = False`) refuse partial crops."""
