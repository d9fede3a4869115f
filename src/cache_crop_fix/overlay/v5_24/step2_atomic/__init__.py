"""Step 2: `Cache.crop` checks every layer first; linear attention layers crop or refuse; assisted decoding copes."""
