"""Step 6: a bounded history of linear-attention states, so assistants roll back drafted tokens exactly and fast."""
