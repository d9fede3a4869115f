# The one statement of `PromptLookupCandidateGenerator.get_candidates` (transformers/generation/candidate_generator.py,
# 5.25.x) that changes: the end of the candidates was clamped as a position (`input_length`, `max_length`), so prompt
# lookup proposed up to `num_output_tokens` candidates whatever the length: one or more past `max_length - 1`, the size
# of the default static cache (`IndexError`). A codemod rather than a copy of the method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "PromptLookupCandidateGenerator.get_candidates": (
        "end_idx = min(end_idx, input_length, self.max_length)",
        "# The main model adds one token after the candidates: at most `max_length - input_length - 1` of them fit\n"
        "end_idx = min(end_idx, input_length, start_idx + self.max_length - input_length - 1)",
    )
}
