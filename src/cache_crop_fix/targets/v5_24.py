"""The `main` target: the fix for transformers 5.24.x, where `crop(tokens_to_remove)` removes that many tokens (#47720).

On this line the semantics of 5.24 are kept for correct calls (`crop(-k)` removes the last `k` tokens, `crop(0)`
removes none, positive values raise), and the rest of the contract holds everywhere: removals are clamped, every layer
is checked before any changes, and every layer type crops exactly or refuses clearly.
"""

from . import Step, Target


STEPS = (
    Step(
        "step1_clamp",
        "1-clamp",
        "Clamp oversized `crop` removals on dynamic cache layers and check `crop` arguments",
        ("DynamicLayersCropTest", "CropArgumentsTest"),
    ),
    Step(
        "step2_atomic",
        "2-atomic",
        "Check every cache layer before `crop` changes any; crop linear attention layers exactly or refuse",
        ("CacheCropTest", "LinearAttentionCropTest", "AssistedDecodingCropTest"),
    ),
    Step(
        "step3_static",
        "3-static",
        "Clamp `crop` on static cache layers and crop static hybrid layers",
        ("StaticLayersCropTest",),
    ),
    Step(
        "step4_quantized",
        "4-quantized",
        "Crop the quantized states of quantized cache layers",
        ("QuantizedLayersCropTest",),
    ),
    Step(
        "step5_models",
        "5-models",
        "Crop the model-specific cache layers exactly, or refuse clearly",
        ("ModelCacheLayersCropTest",),
    ),
    Step(
        "step6_history",
        "6-history",
        "Roll back linear-attention assistants exactly with a bounded state history",
        tests=("LinearAttentionHistoryTest",),
        api_tests=("LinearAttentionHistoryTest",),
        summary=(
            "Assisted decoding with a linear-attention assistant (Qwen3-Next-like gated delta rule) could not remove "
            "a few drafted tokens: stock 5.24 cropped the conv states and left the recurrent states stale (#49036), "
            "and with the previous steps the assistant cache is rolled back fully, so the assistant re-encodes the "
            "whole sequence every round. Upstream's `snapshot()/restore()` attempt (#45846) was closed. "
            "`activate_past_recording(history_length=n)` makes each linear-attention layer with recurrent states keep "
            "the states from before each of its last `n` updates, with the number of tokens each added: `crop(-k)` "
            "restores that point exactly when the last updates add up to `k` tokens, and refuses otherwise. Conv-only "
            "layers need no history. The assistant's cache records its past from its first token, and the candidate "
            "generator decides once how it rolls back."
        ),
        behaviour_changes=(
            "Linear-attention assistants roll back exactly instead of re-encoding; a cache that can only be rolled "
            "back fully says so once (`logger.warning_once`).",
            "With a history, the recurrent states are the tensors the model hands over (no fixed buffer, no copy), "
            "and are copied only when a kernel writes them in place; memory: state bytes times `history_length`.",
            "`is_croppable` is true for linear attention layers with recurrent states when they keep a history.",
        ),
    ),
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
    label="5.24 main line",
    versions=">=5.24.0,<5.25",
    sdist_version="5.24.0",
    steps=STEPS,
    seed_lengths=(3, 0),  # 5.24: `crop(0)` removes nothing
    fingerprints=FINGERPRINTS,
)
