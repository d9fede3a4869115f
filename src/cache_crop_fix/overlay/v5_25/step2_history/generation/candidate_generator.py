# The one statement of `AssistedCandidateGenerator._update_past_and_masks` (transformers/generation/candidate_generator.py,
# 5.25.x) that changes: the assistant's cache recorded the states for `num_assistant_tokens` tokens once, when it was
# created, and the heuristic schedule then drafts more tokens than it can roll back. Each round now records the states
# for the tokens it drafts. A codemod rather than a copy of the method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "AssistedCandidateGenerator._update_past_and_masks": (
        "tokens_to_remove = self._last_ids_length - input_ids.shape[-1] + num_extra_tokens_to_remove",
        "tokens_to_remove = self._last_ids_length - input_ids.shape[-1] + num_extra_tokens_to_remove\n"
        "# The drafts of this round may all be rejected: record the states to remove them (the schedule may draft more)\n"
        'self.assistant_kwargs["cache"].activate_past_recording(recurrent_states_to_keep=int(self.num_assistant_tokens))',
    )
}
