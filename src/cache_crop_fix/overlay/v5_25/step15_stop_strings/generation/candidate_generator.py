# The one statement of `AssistedCandidateGenerator.__init__` (transformers/generation/candidate_generator.py, 5.25.x)
# that changes: the assistant's `generate` got the main model's generation config, `stop_strings` included, but not the
# tokenizer that stop strings need, so that assisted decoding with `stop_strings` raised a `ValueError` before the first
# draft. The assistant now drafts without them: the main model's stopping criteria, which have the tokenizer, end the
# generation on the verified tokens (as `max_length` and `eos_token_id` do). A codemod rather than a copy of the
# method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "AssistedCandidateGenerator.__init__": (
        "self.generation_config.is_assistant = True",
        "self.generation_config.is_assistant = True\n"
        "# Stop strings need the main model's tokenizer, which the assistant does not get: the main model checks them on\n"
        "# the verified tokens\n"
        "self.generation_config.stop_strings = None",
    )
}
