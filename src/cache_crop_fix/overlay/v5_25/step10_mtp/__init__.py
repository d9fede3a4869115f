"""Step 10: the MTP drafter's cache keeps the working size of its conv states when there is nothing to roll back."""
