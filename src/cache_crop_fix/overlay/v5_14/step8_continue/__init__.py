"""Step 8: assisted decoding continues a cache that already holds tokens instead of feeding them again."""
