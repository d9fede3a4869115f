# Step 18 of the fix for transformers 5.25.x, fork only, in `transformers/generation/candidate_generator.py`: the
# assistant's cache is created by `generate` with the candidate generator's copy of the *main* model's generation config,
# so its first round recorded the main model's `num_assistant_tokens` while the assistant drafts its own count. Stock
# 5.25 happens to restore the right state there; with this stack's exact rollback (step 18 refuses what was not
# recorded) an assistant that drafts more tokens than that count would refuse to remove them. A codemod rather than a
# copy of the method (see `cache_crop_fix.codemod`).

CODEMODS = {
    # The assistant's cache recorded the states for `num_assistant_tokens` tokens once, when it was created, and the
    # heuristic schedule then drafts more tokens than it can roll back: each round records the states for its drafts
    "AssistedCandidateGenerator._update_past_and_masks": (
        "tokens_to_remove = self._last_ids_length - input_ids.shape[-1] + num_extra_tokens_to_remove",
        "tokens_to_remove = self._last_ids_length - input_ids.shape[-1] + num_extra_tokens_to_remove\n"
        "# The drafts of this round may all be rejected: record the states to remove them (the schedule may draft more)\n"
        'self.assistant_kwargs["cache"].activate_past_recording(recurrent_states_to_keep=int(self.num_assistant_tokens))',
    ),
    "AssistedCandidateGenerator.__init__": (
        "self.generation_config.is_assistant = True",
        "self.generation_config.is_assistant = True\n"
        "# `generate` makes the assistant's cache record this many states: the drafts of the assistant, not the main model\n"
        "self.generation_config.num_assistant_tokens = self.num_assistant_tokens",
    ),
}
