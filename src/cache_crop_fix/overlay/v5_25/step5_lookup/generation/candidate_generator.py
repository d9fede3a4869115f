# Statements of `PromptLookupCandidateGenerator.get_candidates`, `DFlashTokenCandidateGenerator.get_candidates` and
# `MTPCandidateGenerator` (transformers/generation/candidate_generator.py, 5.25.x) change: prompt lookup clamped the end
# of its candidates as a position (`input_length`, `max_length`), DFlash computed `max_new_tokens` but returned
# `block_size - 1` drafts whatever the length, and MTP returned one draft per MTP layer whatever the length, so all
# three proposed candidates past `max_length - 1`, the size of the default static cache (`IndexError`). Codemods rather
# than copies of the methods (see `cache_crop_fix.codemod`).

CODEMODS = {
    "PromptLookupCandidateGenerator.get_candidates": (
        "end_idx = min(end_idx, input_length, self.max_length)",
        "# The main model adds one token after the candidates: at most `max_length - input_length - 1` of them fit\n"
        "end_idx = min(end_idx, input_length, start_idx + self.max_length - input_length - 1)",
    ),
    "DFlashTokenCandidateGenerator.get_candidates": (
        "outputs.last_hidden_state[:, 1:].to(self.main_model_output_embeddings.weight.device)",
        "outputs.last_hidden_state[:, 1 : max_new_tokens + 1].to(self.main_model_output_embeddings.weight.device)",
    ),
    "MTPCandidateGenerator.__init__": (
        "self.do_sample = generation_config.do_sample",
        "self.do_sample = generation_config.do_sample\nself.max_length = generation_config.max_length",
    ),
    "MTPCandidateGenerator.get_candidates": (
        "candidate_ids = torch.cat([input_ids, candidate_ids], dim=-1)",
        "# The main model adds one token after the candidates: at most `max_length - 1` tokens in all\n"
        "candidate_ids = torch.cat([input_ids, candidate_ids], dim=-1)[:, : self.max_length - 1]\n"
        "candidate_logits = candidate_logits[:, : candidate_ids.shape[1] - input_ids.shape[1]]",
    ),
}
