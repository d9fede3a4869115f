"""Step 20 (fork only): `DynamicLayer.crop` of a layer without tokens yet, and of removals beyond 64 bits."""
