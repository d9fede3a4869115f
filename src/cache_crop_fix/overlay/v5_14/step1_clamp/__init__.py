"""Step 1: `crop(0)` empties a layer and an oversized `crop(-k)` empties it instead of keeping stale tokens."""
