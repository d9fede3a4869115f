# The statement of `GenerationMixin._assisted_decoding` (transformers/generation/utils.py, 5.25.x) before which the
# accepted tokens are cut at a stop string: the stopping criteria run once per round, on the whole sequence, and a stop
# string checks only the end of it, so that a stop string inside the accepted tokens of a round was passed over and the
# generation went on (the tokens after an end-of-sequence token are cut just before this statement). A codemod rather
# than a copy of the 300-line method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "GenerationMixin._assisted_decoding": (
        "n_matches = valid_tokens.shape[1] - 1",
        "# This is for stop strings, which the stopping criteria only look for at the end of the sequence\n"
        "stop_strings = [criteria for criteria in stopping_criteria if isinstance(criteria, StopStringCriteria)]\n"
        "for num_valid_tokens in range(1, valid_tokens.shape[1] if stop_strings else 0):\n"
        "    candidate_ids = torch.cat((input_ids, valid_tokens[:, :num_valid_tokens]), dim=-1)\n"
        "    if any(criteria(candidate_ids, None).any() for criteria in stop_strings):\n"
        "        valid_tokens = valid_tokens[:, :num_valid_tokens]\n"
        "        break\n"
        "n_matches = valid_tokens.shape[1] - 1",
    )
}
