"""Step 3: the static hybrid layers crop their attention part, as the dynamic ones do."""
