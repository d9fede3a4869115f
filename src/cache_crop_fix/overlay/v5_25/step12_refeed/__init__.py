"""Step 12: after a short prompt, the MTP drafter re-feeds only the tokens its layers have seen."""
