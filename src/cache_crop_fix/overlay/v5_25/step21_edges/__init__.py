"""Step 21 (fork only): `DynamicLayer.crop` of a layer without tokens yet, and of removals beyond 64 bits."""
