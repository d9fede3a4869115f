"""Step 4: UnlimitedOcr's static reference sliding-window layer removes its sliding tokens, then its prefill ones."""
