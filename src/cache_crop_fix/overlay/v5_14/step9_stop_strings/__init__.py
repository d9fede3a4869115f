"""Step 9: the assistant of assisted decoding drafts without the main model's stop strings."""
