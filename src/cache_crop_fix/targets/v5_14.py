"""The 5.14 backport: the fix for transformers 5.14.x, where `crop(max_length)` reads every `max_length <= 0` as a
relative removal (#47433).

On this line `crop(-k)` removes the last `k` tokens (clamped), `crop(0)` empties the cache, and absolute crops still
work but emit a `FutureWarning`, since 5.15 reads `0` as "remove nothing" and 5.20 refuses positive values.
"""

from . import Step, Target


STEPS = (
    Step("step1_clamp", "1-clamp", "Fix `crop(0)` and oversized negative crops of the dynamic KV cache layers"),
    Step("step2_deprecate", "2-deprecate", "Deprecate absolute `crop` lengths, check `crop` arguments"),
    Step("step3_atomic", "3-atomic", "Check every cache layer before `crop` changes any"),
    Step("step4_static", "4-static", "Support `crop` on static cache layers"),
    Step("step5_quantized", "5-quantized", "Crop both parts of quantized cache layers"),
    Step("step6_models", "6-models", "Crop the model-specific cache layers exactly, or refuse clearly"),
    Step(
        "step7_history",
        "7-history",
        "Roll back linear-attention assistants exactly with a bounded state history",
        tests=("LinearAttentionHistoryTest",),
    ),
)

# The upstream methods the overlay replaces: `patcher.source_fingerprint` of their source. If the installed source
# differs, the method changed upstream and the fix refuses to install. Regenerate with
# `python -m cache_crop_fix fingerprints`.
# Identical in transformers 5.14.0 and 5.14.1
FINGERPRINTS: dict[str, frozenset[str]] = {
    "transformers.cache_utils.Cache.activate_past_recording": frozenset({"92ab199542b21909"}),
    "transformers.cache_utils.Cache.crop": frozenset({"ed59d37995911aa6"}),
    "transformers.cache_utils.Cache.update": frozenset({"679ec869a03c9450"}),
    "transformers.cache_utils.DynamicIndexedLayer.crop": frozenset({"db056caf527df7d9"}),
    "transformers.cache_utils.DynamicLayer.crop": frozenset({"f733554ffaaab390"}),
    "transformers.cache_utils.DynamicSlidingWindowLayer.crop": frozenset({"a233961b69f230fd"}),
    "transformers.cache_utils.EncoderDecoderCache.crop": frozenset({"7a371cf940291c93"}),
    "transformers.cache_utils.LinearAttentionAndFullAttentionLayer.crop": frozenset({"108f6e160ad75d46"}),
    "transformers.cache_utils.LinearAttentionAndSlidingWindowAttentionLayer.crop": frozenset({"fc1ffb404f8217cd"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.activate_past_recording": frozenset({"e0ef344a1257c906"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.crop": frozenset({"250ff98eeedf0119"}),
    "transformers.cache_utils.LinearAttentionLayer.update_conv_state": frozenset({"a3cb5a9b54326b1f"}),
    "transformers.cache_utils.LinearAttentionLayer.update_recurrent_state": frozenset({"1269b2100e6fbf2e"}),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator._update_past_and_masks": frozenset(
        {"8fbfdda003628960"}
    ),
    "transformers.models.minimax.modeling_minimax.MiniMaxCache.crop": frozenset({"0da72794b2e1ed9b"}),
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLSparseCacheLayer.crop": frozenset(
        {"dc74aa3f977f0ca4"}
    ),
    "transformers.models.pi0.modeling_pi0.PI0ForConditionalGeneration.sample_actions": frozenset({"a44420943ba3f954"}),
}


TARGET = Target(
    name="v5_14",
    label="5.14 backport",
    versions=">=5.14.0,<5.15",
    sdist_version="5.14.1",
    steps=STEPS,
    fingerprints=FINGERPRINTS,
)
