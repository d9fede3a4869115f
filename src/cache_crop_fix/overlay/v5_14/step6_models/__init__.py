"""Step 6: model-specific caches (DeepSeek-V4 compressor buffers, MiniMax's clear refusal)."""
