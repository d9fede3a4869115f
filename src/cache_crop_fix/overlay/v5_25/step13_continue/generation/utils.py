# The one statement of `GenerationMixin._assisted_decoding` (transformers/generation/utils.py, 5.25.x) that changes: the
# first verification `forward` fed the whole sequence whatever the cache held, so that continuing a cache (a second
# turn that passes the first one's cache back, a prefix cache) with a drafter appended the cached tokens to it again.
# It now feeds what the cache does not hold yet, as `_prefill` does for the other decoding methods. A codemod rather
# than a copy of the 300-line method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "GenerationMixin._assisted_decoding": (
        "next_sequence_length = candidate_length + 1 if not is_first_iteration else None",
        "next_sequence_length = candidate_length + 1 if not is_first_iteration else None\n"
        "# A cache that already holds the start of the sequence (a previous turn, a prefix cache) gets the rest only\n"
        "if is_first_iteration and (past_length := cache.get_seq_length()) > 0:\n"
        "    next_sequence_length = candidate_input_ids.shape[1] - past_length",
    )
}
