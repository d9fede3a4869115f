"""Step 17: static sliding-window layers make room for the tokens a rollback removes, and crop exactly."""
