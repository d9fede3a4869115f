"""Step 5: `StaticIndexedLayer.crop` cuts the indexer positions some models keep (Qwen4-Exp's) to the kept tokens."""
