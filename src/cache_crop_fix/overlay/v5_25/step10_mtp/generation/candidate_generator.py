# The one statement of `MTPCandidateGenerator.get_candidates` (transformers/generation/candidate_generator.py, 5.25.x)
# that changes: the MTP cache records its past (to be rolled back), so its conv states keep every column until a crop,
# and the generator only crops it in the rounds that re-feed tokens (several MTP layers, few drafts accepted). With one
# MTP layer (Inkling's) the conv states grew by a column per generated token. The other rounds now bring them back to
# their working size (`crop(0)` removes no token). A codemod rather than a copy of the method (see
# `cache_crop_fix.codemod`).

CODEMODS = {
    "MTPCandidateGenerator.get_candidates": (
        "mtp_input_ids = input_ids[:, -num_last_main_model_tokens:]",
        "# Nothing to roll back: bring the states kept for a rollback (e.g. conv states) back to their working size\n"
        "if not self.is_main_model_prefill:\n"
        "    self.mtp_cache.crop(0)\n"
        "mtp_input_ids = input_ids[:, -num_last_main_model_tokens:]",
    )
}
