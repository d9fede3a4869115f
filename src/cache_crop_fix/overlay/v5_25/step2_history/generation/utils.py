# The one statement of `GenerationMixin._assisted_decoding` (transformers/generation/utils.py, 5.25.x) that changes: the
# verification `forward` of each round sees `candidate_length + 1` tokens, and when every candidate is rejected all of
# them but the first are removed, so the main cache must be able to roll back that many tokens. It recorded the states
# for `num_drafting_tokens` tokens, set once before the loop: one too few (a rejection of every draft restored the state
# from before the forward), and fewer than the heuristic schedule drafts once it grows. A codemod rather than a copy of
# the 300-line method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "GenerationMixin._assisted_decoding": (
        "candidate_length = candidate_input_ids.shape[1] - input_ids.shape[1]",
        "candidate_length = candidate_input_ids.shape[1] - input_ids.shape[1]\n"
        "# The verification below may have to remove every candidate: record the states of its last `candidate_length + 1`\n"
        "# tokens (the number of candidates can change every round)\n"
        "cache.activate_past_recording(recurrent_states_to_keep=candidate_length + 1)",
    )
}
