"""Step 8: assisted decoding stops recording the past of the cache it leaves to the caller."""
