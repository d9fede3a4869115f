"""Step 5: prompt lookup proposes no more candidates than fit before the token the main model adds (static caches)."""
