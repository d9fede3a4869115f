# The one statement of `AssistedCandidateGenerator.get_candidates` (transformers/generation/candidate_generator.py,
# 5.25.x) that changes: an assistant whose cache cannot be cropped (DeepSeek-V4's compressed attention, which now
# refuses partial crops) had its rejected drafts removed with a partial `crop` every round (5.25.0: a `RuntimeError` in
# the second round). Assisted decoding now refuses such an assistant once its cache exists, after its first drafts and
# before the main model verifies them, as `_assisted_decoding` refuses a main model whose cache cannot be cropped. A
# codemod rather than a copy of the method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "AssistedCandidateGenerator.get_candidates": (
        "candidate_ids, candidate_logits = self._generate_candidates(generation_args)",
        "candidate_ids, candidate_logits = self._generate_candidates(generation_args)\n"
        "# The assistant's cache exists once it has drafted: it must be able to remove the drafts the main model rejects\n"
        'cache = self.assistant_kwargs.get("cache")\n'
        "if cache is not None and not cache.is_croppable:\n"
        "    raise ValueError(\n"
        '        f"Assisted decoding requires an assistant cache that can be cropped to remove the rejected drafts, but "\n'
        '        f"the cache of `{self.assistant_model.__class__.__name__}` (`{cache.__class__.__name__}`) cannot: use "\n'
        '        "another assistant, or prompt lookup (`prompt_lookup_num_tokens`)."\n'
        "    )",
    )
}
