"""Step 1: clamp oversized removals on every attention layer (MiniMax-M3-VL's included), and cut the side tensors (indexer positions) with the keys."""
