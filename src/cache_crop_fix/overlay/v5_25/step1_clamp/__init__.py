"""Step 1: clamp oversized removals on the dynamic and static layers, and cut the side tensors with the keys."""
