"""Step 18 (fork only): linear-attention layers roll back exactly or refuse, and `Cache.crop` checks every layer first."""
