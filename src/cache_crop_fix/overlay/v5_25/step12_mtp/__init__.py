"""Step 12: the MTP drafter keeps its cache at its working size, and after a short prompt re-feeds only the tokens its layers have seen."""
