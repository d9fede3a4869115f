"""Step 2: `Cache.crop` checks every layer before cropping any; linear attention and hybrid layers crop or refuse."""
