"""Step 5: the model-specific cache layers (DeepSeek-V4, MiniMax-M3-VL, UnlimitedOcr) crop their own states too."""
