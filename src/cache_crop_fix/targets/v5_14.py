"""The 5.14 backport: the fix for transformers 5.14.x, where `crop(max_length)` reads every `max_length <= 0` as a
relative removal (#47433).

On this line `crop(-k)` removes the last `k` tokens (clamped), `crop(0)` empties the cache, and absolute crops still
work but emit a `FutureWarning`, since 5.15 reads `0` as "remove nothing" and 5.20 refuses positive values.
"""

from . import Step, Target, backport
from .v5_25 import TARGET as MAIN_LINE


RELATED = (
    "- This stack backports the fix (its steps follow the 5.24 stack, `fix-cache-crop-1-clamp` ... on transformers "
    "5.24; the `main` stack, on 5.25, lands first); it keeps the 5.14 meaning of `crop` (`0` and positive values are absolute targets) and deprecates "
    "it.\n"
    "- #47977 (open) clamps oversized negative crops in `DynamicLayer` only; the first PR of this stack covers it and "
    "also fixes `crop(0)` and the layers that compute the same index.\n"
    "- #47720 (5.15) renamed the argument to `tokens_to_remove`, where `0` removes nothing. This stack keeps the 5.14 "
    "contract (`0` is an absolute target) and accepts `tokens_to_remove=` with its 5.15 meaning, so code can migrate "
    "before upgrading."
)

STEPS = (
    Step(
        "step1_clamp",
        "1-clamp",
        "Fix `crop(0)` and oversized negative crops of the dynamic KV cache layers",
        tests=("DynamicLayersCropTest",),
        behaviour_changes=(
            "`crop(0)` empties a dynamic layer (5.14.0/5.14.1 kept everything; 5.11 to 5.13 emptied it too).",
            "`crop(-k)` with `k` at least the cached length empties the layer (it kept stale tokens).",
            "`crop(-k)` with `k == 0` is `crop(0)` under this contract: it empties the cache. Code that removes `k` "
            "rejected tokens must skip the call when `k == 0` (the library's call sites are updated in the next PR).",
        ),
    ),
    Step(
        "step2_deprecate",
        "2-deprecate",
        "Deprecate absolute `crop` lengths and check `crop` arguments",
        tests=("CropArgumentsTest", "AssistedCandidateGeneratorRollbackTest", "PI0SampleActionsCacheRollbackTest"),
        api_tests=("CropArgumentsTest", "PI0SampleActionsCacheRollbackTest"),
        behaviour_changes=(
            "Absolute crops (`crop(n)`, `n >= 0`) keep working and emit a `FutureWarning`. The one for `crop(0)` says "
            "that it empties the cache, that `crop(-k)` with `k == 0` lands there, and how to write it instead "
            "(`crop(tokens_to_remove=-k)`, or skip `k == 0`).",
            "Arguments that are not integers (bool, float, str, `None`, tensors of more than one element) raise a "
            "`TypeError`; ints, numpy integers and 0-d integer tensors (as `generate` passes) are accepted.",
            "`EncoderDecoderCache.crop` goes through the self-attention cache's own `crop`.",
        ),
    ),
    Step(
        "step3_atomic",
        "3-atomic",
        "Check every cache layer before `crop` changes any",
        tests=(
            "DynamicSlidingWindowLayerCropTest",
            "CropErrorsTest",
            "LinearAttentionLayerCropTest",
            "HybridLayersCropTest",
            "CropAtomicityTest",
            "LinearStateWithEmptyAttentionCropTest",
            "ConvStateOwnershipCropTest",
            "CropStateDetailsTest",
        ),
        behaviour_changes=(
            "Partial crops that cannot be exact raise (`ValueError`, `RuntimeError` or `NotImplementedError`, with "
            "what to do instead) and leave the whole cache unchanged; 5.14 silently kept wrong states.",
            '`crop(0)` on linear-attention layers: was "trim the recorded past, keep everything"; now a full reset '
            "of their conv and recurrent states, like every other layer.",
            "`crop(0)` of a `DynamicCache` puts its layers back as they were built (`keys` is `None` until the next "
            "`update`), which frees the old states at once and costs no tensor work.",
        ),
    ),
    Step(
        "step4_static",
        "4-static",
        "Support `crop` on static cache layers",
        tests=(
            "StaticLayersCropTest",
            "StaticSlidingWindowLayerCropTest",
            "StaticHybridLayersCropTest",
            "LayerLevelEdgeCasesTest",
        ),
        behaviour_changes=(
            "`StaticCache.crop` (and the static sliding, indexed and hybrid layers) works instead of raising.",
        ),
    ),
    Step(
        "step5_quantized",
        "5-quantized",
        "Crop both parts of quantized cache layers",
        tests=("QuantizedLayerCropTest", "QuantizedBackendsCropTest", "MixedLayersCropAtomicityTest"),
        behaviour_changes=("`QuantizedCache.crop` removes tokens from both parts and rewinds `cumulative_length`.",),
    ),
    Step(
        "step6_models",
        "6-models",
        "Crop the model-specific cache layers exactly, or refuse clearly",
        # The last two check every layer type at once (layer-level crops), so they pass once every step is in
        tests=(
            "MiniMaxM3VLCropTest",
            "MiniMaxCacheCropTest",
            "DeepseekV4CropTest",
            "LayerLevelOversizedCropTest",
            "CropRefusalsAndNoOpsTest",
            "AssistedCandidateGeneratorSlidingWindowTest",
        ),
        behaviour_changes=(
            "`DeepseekV4HCACache`/`DeepseekV4CSACache.crop` keep their buffers consistent, or raise before changing "
            "anything.",
            "`MiniMaxM3VLSparseCacheLayer.crop` keeps index keys that match the kept tokens; the static layer crops.",
        ),
    ),
    Step(
        "step7_history",
        "7-history",
        "Roll back linear-attention assistants exactly with a bounded state history",
        tests=("LinearAttentionHistoryTest",),
        api_tests=("LinearAttentionHistoryTest",),
        behaviour_changes=(
            "Linear-attention assistants roll back exactly instead of re-encoding; a cache that can only be rolled "
            "back fully says so once (`logger.warning_once`).",
            "With a history, the recurrent states are the tensors the model hands over (no fixed buffer), and conv "
            "states are copied after each update; memory: state bytes times `history_length`.",
        ),
    ),
)

# Bugs of the assisted decoding code that 5.14 shares with 5.25 (issue 39): the main line's steps 13 and 15, whose
# reproductions print the same on 5.14.1 once they pass the cache as 5.14 names it
_MAIN_LINE = {step.package: step for step in MAIN_LINE.steps}
_ON_5_14 = {
    "5.25.0": "5.14.1",
    "cache=first_turn.cache": "past_key_values=first_turn.past_key_values",
    "first_turn.cache.get_seq_length()": "first_turn.past_key_values.get_seq_length()",
}
STEPS += (
    backport(_MAIN_LINE["step13_continue"], "step8_continue", "8-continue", _ON_5_14),
    backport(_MAIN_LINE["step15_stop_strings"], "step9_stop_strings", "9-stop-strings", _ON_5_14),
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
    "transformers.generation.candidate_generator.AssistedCandidateGenerator.__init__": frozenset({"ab8675bcf8a7b8b7"}),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator._update_past_and_masks": frozenset(
        {"8fbfdda003628960"}
    ),
    "transformers.generation.utils.GenerationMixin._assisted_decoding": frozenset({"9475d1c4bcc049e0"}),
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
    related=RELATED,
    backport_of="v5_25",
    closes_issue=True,
)
