# The one statement of `AssistedCandidateGenerator.get_candidates` (transformers/generation/candidate_generator.py,
# 5.25.x) that changes: an assistant whose cache cannot be cropped (DeepSeek-V4's compressed attention, which now
# refuses partial crops) had its rejected drafts removed with a partial `crop` every round. Its cache is emptied
# instead, and the assistant encodes the sequence again, as 5.24 did. A codemod rather than a copy of the method (see
# `cache_crop_fix.codemod`).

CODEMODS = {
    "AssistedCandidateGenerator.get_candidates": (
        "self._update_past_and_masks(input_ids)",
        "# A cache that cannot remove the rejected drafts (e.g. DeepSeek-V4's compressed attention) is emptied instead:\n"
        "# the assistant then encodes the whole sequence again\n"
        'cache = self.assistant_kwargs.get("cache")\n'
        "if cache is not None and not cache.is_croppable:\n"
        "    cache.crop(-cache.get_seq_length())\n"
        "self._update_past_and_masks(input_ids)",
    )
}
