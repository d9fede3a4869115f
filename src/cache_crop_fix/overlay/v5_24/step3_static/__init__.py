"""Step 3: static layers clamp removals and refuse what their window overwrote; static hybrids crop both parts."""
