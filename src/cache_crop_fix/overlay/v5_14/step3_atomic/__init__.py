"""Step 3: `Cache.crop` checks every layer before changing any; linear attention and hybrid layers refuse clearly."""
