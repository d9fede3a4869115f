# Step 12 of the fix for transformers 5.25.x, in `transformers/generation/candidate_generator.py`: statements of
# `MTPCandidateGenerator.get_candidates`, the MTP drafter's round. Codemods rather than a copy of the method (see
# `cache_crop_fix.codemod`; step 5 changes other statements of it).
# - The MTP cache records its past (to be rolled back), so its conv states keep every column until a crop, and the
#   generator only cropped it in the rounds that re-feed tokens (several MTP layers, few drafts accepted). With one MTP
#   layer (Inkling's) the conv states grew by a column per generated token. The other rounds now bring them back to
#   their working size (`crop(0)` removes no token).
# - With several MTP layers, a round that accepted fewer than `num_mtp_layers - 1` drafts crops the last
#   `num_mtp_layers` tokens from the MTP cache and feeds them again, with their hidden states. After a prompt shorter
#   than that, the MTP layers have seen fewer tokens (one after a one-token prompt): the crop is clamped, but the slices
#   took `num_mtp_layers` more input ids than hidden states (`RuntimeError` in `torch.cat`). Now the number re-fed is
#   what the layers saw, at most `num_mtp_layers`.

CODEMODS = {
    "MTPCandidateGenerator.get_candidates": [
        (
            "mtp_input_ids = input_ids[:, -num_last_main_model_tokens:]",
            "# Nothing to roll back: bring the states kept for a rollback (e.g. conv states) back to their working size\n"
            "if not self.is_main_model_prefill:\n"
            "    self.mtp_cache.crop(0)\n"
            "mtp_input_ids = input_ids[:, -num_last_main_model_tokens:]",
        ),
        (
            "self.mtp_cache.crop(-self.num_mtp_layers)",
            "# After a short prompt, the MTP layers have seen fewer tokens than `num_mtp_layers`\n"
            "seen_tokens = self.full_seq_last_hidden_states.shape[1] - num_last_main_model_tokens\n"
            "num_refed_tokens = min(self.num_mtp_layers, seen_tokens)\n"
            "self.mtp_cache.crop(-num_refed_tokens)",
        ),
        (
            "mtp_input_ids = input_ids[:, -num_last_main_model_tokens - self.num_mtp_layers :]",
            "mtp_input_ids = input_ids[:, -num_last_main_model_tokens - num_refed_tokens :]",
        ),
        (
            'mtp_position_ids = model_kwargs["position_ids"][:, -num_last_main_model_tokens - self.num_mtp_layers :]',
            'mtp_position_ids = model_kwargs["position_ids"][:, -num_last_main_model_tokens - num_refed_tokens :]',
        ),
        (
            ":, -num_last_main_model_tokens - self.num_mtp_layers :",
            ":, -num_last_main_model_tokens - num_refed_tokens :",
        ),
        (
            ":, -num_last_main_model_tokens - self.num_mtp_layers :, :",
            ":, -num_last_main_model_tokens - num_refed_tokens :, :",
        ),
    ]
}
