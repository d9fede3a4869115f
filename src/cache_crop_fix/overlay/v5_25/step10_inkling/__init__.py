"""Step 10: Inkling's attention keeps the query offset of a static layer from before `cache.update` advances it."""
