# The statement of `MTPCandidateGenerator.__init__` (transformers/generation/candidate_generator.py, 5.25.x) that
# changes: a round that re-feeds tokens removes the last `num_mtp_layers` tokens of the MTP layers' last forward, which
# holds up to `num_mtp_layers + 1` of them (a round that accepted every draft), so that a linear attention MTP layer
# must keep the states after each of them to restore the right one. With `num_mtp_layers` states the crop was refused
# (stock: the state before the forward was restored, a wrong one). Attention layers keep no states: nothing changes for
# them. A codemod rather than a copy of the method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "MTPCandidateGenerator.__init__": (
        "self.mtp_cache.activate_past_recording(recurrent_states_to_keep=self.num_drafting_tokens)",
        "# A re-fed chain removes the last `num_mtp_layers` of up to `num_mtp_layers + 1` tokens: one state more\n"
        "self.mtp_cache.activate_past_recording(recurrent_states_to_keep=self.num_drafting_tokens + 1)",
    )
}
