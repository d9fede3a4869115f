"""Step 15: the assistant of assisted decoding drafts without the main model's stop strings."""
