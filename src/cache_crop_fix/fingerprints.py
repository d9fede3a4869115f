"""Fingerprints of the upstream methods that the overlay replaces, for the transformers releases it supports.

A fingerprint is `patcher.source_fingerprint` of the upstream function: if the installed source differs, the method
changed upstream and the fix refuses to install. Regenerate with `python -m cache_crop_fix fingerprints`.
"""

# Identical in transformers 5.14.0 and 5.14.1
UPSTREAM_FINGERPRINTS: dict[str, frozenset[str]] = {
    "transformers.cache_utils.Cache.crop": frozenset({"ed59d37995911aa6"}),
    "transformers.cache_utils.DynamicIndexedLayer.crop": frozenset({"db056caf527df7d9"}),
    "transformers.cache_utils.DynamicLayer.crop": frozenset({"f733554ffaaab390"}),
    "transformers.cache_utils.DynamicSlidingWindowLayer.crop": frozenset({"a233961b69f230fd"}),
    "transformers.cache_utils.EncoderDecoderCache.crop": frozenset({"7a371cf940291c93"}),
    "transformers.cache_utils.LinearAttentionAndFullAttentionLayer.crop": frozenset({"108f6e160ad75d46"}),
    "transformers.cache_utils.LinearAttentionAndSlidingWindowAttentionLayer.crop": frozenset({"fc1ffb404f8217cd"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.crop": frozenset({"250ff98eeedf0119"}),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator._update_past_and_masks": frozenset(
        {"8fbfdda003628960"}
    ),
    "transformers.models.minimax.modeling_minimax.MiniMaxCache.crop": frozenset({"0da72794b2e1ed9b"}),
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLSparseCacheLayer.crop": frozenset(
        {"dc74aa3f977f0ca4"}
    ),
    "transformers.models.pi0.modeling_pi0.PI0ForConditionalGeneration.sample_actions": frozenset({"a44420943ba3f954"}),
}
