"""Step 3: static layers clamp their removals, refuse what their window overwrote, and their hybrids crop both parts."""
