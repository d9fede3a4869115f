"""Step 4: MiniMax-M3-VL's sparse cache layers cut and clamp their index keys with the key and value states."""
