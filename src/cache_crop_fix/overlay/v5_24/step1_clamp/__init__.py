"""Step 1: validate the argument of `crop` and clamp oversized removals on the dynamic layers."""
