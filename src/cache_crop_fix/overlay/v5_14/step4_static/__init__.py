"""Step 4: static layers crop by rewinding their write position in place."""
