"""Step 9: assisted decoding with stop strings: the assistant drafts without them, and the accepted tokens end at one."""
