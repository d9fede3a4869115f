"""Step 6: assisted decoding rolls the assistant cache back fully when one of its layers refuses a partial crop."""
