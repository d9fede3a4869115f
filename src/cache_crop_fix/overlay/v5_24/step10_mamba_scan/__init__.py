"""Step 10: a forward of several tokens over a cached Mamba-1 state (Mamba, FalconMamba, Jamba) continues it."""
