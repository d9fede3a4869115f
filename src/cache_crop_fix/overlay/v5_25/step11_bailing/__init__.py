"""Step 11: Bailing-hybrid's config names the types of its MTP layers, so that `generate(use_mtp=True)` can build them."""
