"""The 5.24 backport: the fix for transformers 5.24.x (upstream `main` until 5.25.0), where `crop(tokens_to_remove)` removes that many tokens (#47720).

On this line the semantics of 5.24 are kept for correct calls (`crop(-k)` removes the last `k` tokens, `crop(0)`
removes none, positive values raise), and the rest of the contract holds everywhere: removals are clamped, every layer
is checked before any changes, and every layer type crops exactly or refuses clearly.
"""

from . import Step, Target, backport
from .v5_25 import TARGET as MAIN_LINE


RELATED = (
    "- #47720 (5.15) made the argument `tokens_to_remove`; this stack keeps its meaning and makes every layer type "
    "honour it exactly or refuse before anything changes (the audit asked for in #47433).\n"
    "- #47977 (open) clamps oversized removals in `DynamicLayer` only.\n"
    "- #49036: recurrent states cannot be rolled back by a few tokens; they are refused here, not kept stale.\n"
    "- #49036: 5.25 rolls recurrent states back through a per-token history; this 5.24 stack keeps them with an "
    "update-level history instead (5.24 has no per-token states).\n"
    "- The 5.14 backport of this stack (`crop(0)` empties the cache there) is a separate stack on `v5.14-release`."
)

STEPS = (
    Step(
        "step1_clamp",
        "1-clamp",
        "Clamp oversized `crop` removals on dynamic cache layers and check `crop` arguments",
        tests=("DynamicLayersCropTest", "CropArgumentsTest"),
        api_tests=("CropArgumentsTest",),
        behaviour_changes=(
            "Removing more tokens than a dynamic layer holds empties it (a sliding-window layer's `cumulative_length` "
            "went negative).",
            "Arguments that are not integers (bool, float, str, `None`, tensors of more than one element) raise a "
            "`TypeError`; `crop(False)` removed nothing. Ints, numpy integers and 0-d integer tensors (as `generate` "
            "passes) are accepted as before.",
        ),
    ),
    Step(
        "step2_atomic",
        "2-atomic",
        "Check every cache layer before `crop` changes any; crop linear attention layers exactly or refuse",
        tests=("CacheCropTest", "LinearAttentionCropTest", "AssistedDecodingCropTest"),
        behaviour_changes=(
            "A crop that some layer cannot honour exactly raises before any layer changes (it used to crop the layers "
            "before the refusing one).",
            "Partial crops of linear attention layers with recurrent states raise instead of keeping stale states; "
            "removing every cached token resets them.",
        ),
    ),
    Step(
        "step3_static",
        "3-static",
        "Clamp `crop` on static cache layers and crop static hybrid layers",
        tests=("StaticLayersCropTest",),
        behaviour_changes=(
            "Oversized removals empty static layers (their write position went negative).",
            "A static sliding-window layer whose window wrapped around refuses partial crops (it cropped tokens it "
            "had already evicted); a full rollback still works.",
            "Static hybrid layers crop their attention part too.",
        ),
    ),
    Step(
        "step4_quantized",
        "4-quantized",
        "Crop the quantized states of quantized cache layers",
        tests=("QuantizedLayersCropTest",),
        behaviour_changes=(
            "`QuantizedCache.crop` keeps `cumulative_length` and both parts consistent, or raises before changing "
            "anything.",
        ),
    ),
    Step(
        "step5_models",
        "5-models",
        "Crop the model-specific cache layers exactly, or refuse clearly",
        tests=("ModelCacheLayersCropTest",),
        behaviour_changes=(
            "`DeepseekV4HCACache`/`DeepseekV4CSACache.crop` keep their compressor buffers consistent, or raise before "
            "changing anything.",
            "MiniMax-M3-VL and UnlimitedOcr cache layers crop exactly or refuse.",
        ),
    ),
    Step(
        "step6_history",
        "6-history",
        "Roll back linear-attention assistants exactly with a bounded state history",
        tests=("LinearAttentionHistoryTest",),
        api_tests=("LinearAttentionHistoryTest",),
        behaviour_changes=(
            "Linear-attention assistants roll back exactly instead of re-encoding; a cache that can only be rolled "
            "back fully says so once (`logger.warning_once`).",
            "With a history, the recurrent states are the tensors the model hands over (no fixed buffer, no copy), "
            "and are copied only when a kernel writes them in place; memory: state bytes times `history_length`.",
            "`is_croppable` is true for linear attention layers with recurrent states when they keep a history.",
        ),
    ),
)


# Bugs of the assisted decoding and Mamba code that 5.24 shares with 5.25 (issue 39)
# (the main line's steps 13-16; their reproductions print the same on 5.24.0)
_MAIN_LINE = {step.package: step for step in MAIN_LINE.steps}
_ON_5_24 = {"5.25.0": "5.24.0"}
STEPS += (
    backport(_MAIN_LINE["step13_continue"], "step7_continue", "7-continue", _ON_5_24),
    backport(_MAIN_LINE["step14_recording"], "step8_recording", "8-recording", _ON_5_24),
    backport(_MAIN_LINE["step15_stop_strings"], "step9_stop_strings", "9-stop-strings", _ON_5_24),
    # 5.24 has no `mamba_scan_forward`: the same change in the mixers' `forward` (its own overlay)
    backport(_MAIN_LINE["step16_mamba_scan"], "step10_mamba_scan", "10-mamba-scan", _ON_5_24),
)

# The upstream methods the overlay replaces: `patcher.source_fingerprint` of their source. If the installed source
# differs, the method changed upstream and the fix refuses to install. Regenerate with
# `python -m cache_crop_fix fingerprints`.
# Read from transformers 5.24.0
FINGERPRINTS: dict[str, frozenset[str]] = {
    "transformers.cache_utils.Cache.activate_past_recording": frozenset({"92ab199542b21909"}),
    "transformers.cache_utils.Cache.crop": frozenset({"f5ec7ef507b1051e"}),
    "transformers.cache_utils.DynamicIndexedLayer.crop": frozenset({"2809f6f48a5dafed"}),
    "transformers.cache_utils.DynamicLayer.crop": frozenset({"2a23d79eb17fe0e1"}),
    "transformers.cache_utils.DynamicSlidingWindowLayer.crop": frozenset({"4828691c691ceb3e"}),
    "transformers.cache_utils.LinearAttentionAndFullAttentionLayer.crop": frozenset({"5fd2756561f5b757"}),
    "transformers.cache_utils.LinearAttentionAndSlidingWindowAttentionLayer.crop": frozenset({"c4b507eab8599be1"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.activate_past_recording": frozenset({"e0ef344a1257c906"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.crop": frozenset({"21cc50e2f0cf91d0"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.is_croppable": frozenset({"12ed969a7d235b6b"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.reorder_cache": frozenset({"15ab090498b9cb05"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.reset": frozenset({"bd1bc36cfc151d2d"}),
    "transformers.cache_utils.LinearAttentionLayer.update_conv_state": frozenset({"a3cb5a9b54326b1f"}),
    "transformers.cache_utils.LinearAttentionLayer.update_recurrent_state": frozenset({"1269b2100e6fbf2e"}),
    "transformers.cache_utils.StaticIndexedLayer.crop": frozenset({"b2bd645bcb89e37f"}),
    "transformers.cache_utils.StaticLayer.crop": frozenset({"3765188a4ed38cf6"}),
    "transformers.cache_utils.StaticSlidingWindowLayer.crop": frozenset({"08845cd2cd669ff7"}),
    "transformers.cache_utils.StaticSlidingWindowLayer.is_croppable": frozenset({"ef661ab01adde08a"}),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator._update_past_and_masks": frozenset(
        {"3cc1f2b2f2f07439"}
    ),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator.__init__": frozenset({"cd70cc2676e06efd"}),
    "transformers.generation.utils.GenerationMixin._assisted_decoding": frozenset({"8d8b8e148a13f1cf"}),
    "transformers.models.falcon_mamba.modeling_falcon_mamba.FalconMambaMixer.forward": frozenset({"38060b4405b0b06f"}),
    "transformers.models.jamba.modeling_jamba.JambaMambaMixer.forward": frozenset({"6c5a4eaddd9c4382"}),
    "transformers.models.mamba.modeling_mamba.MambaMixer.forward": frozenset({"687cd435ccedf9e3"}),
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLSparseCacheLayer.crop": frozenset(
        {"5bb2a812c4ee9e6d"}
    ),
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLSparseStaticCacheLayer.crop": frozenset(
        {"933a47b2579a45d4"}
    ),
    "transformers.models.unlimited_ocr.modeling_unlimited_ocr.UnlimitedOcrDynamicReferenceSlidingWindowLayer.crop": frozenset(
        {"b93376edf84e8b95"}
    ),
    "transformers.models.unlimited_ocr.modeling_unlimited_ocr.UnlimitedOcrStaticReferenceSlidingWindowLayer.is_croppable": frozenset(
        {"63530477e993ef9d"}
    ),
}


TARGET = Target(
    name="v5_24",
    label="5.24 backport",
    versions=">=5.24.0,<5.25",
    sdist_version="5.24.0",
    steps=STEPS,
    seed_lengths=(3, 0),  # 5.24: `crop(0)` removes nothing
    fingerprints=FINGERPRINTS,
    related=RELATED,
    backport_of="v5_25",
)
