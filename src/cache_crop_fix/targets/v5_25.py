"""The `main` target: the fix for transformers 5.25.x, upstream `main` since 2026-12-01.

5.25 rolls linear-attention (hybrid, SSM) layers back through a per-token recurrent-state history
(`activate_past_recording(recurrent_states_to_keep=N)`) and lets hybrid main models use assisted decoding. This stack
keeps that design and its `crop` semantics (`crop(-k)` removes the last `k` tokens, `crop(0)` removes none, positive
values raise) and makes the rollback exact: removals are clamped, the history holds exactly the states a rollback needs,
and a layer that cannot be put back as it was refuses before anything changes.
"""

from . import Step, Target


RELATED = (
    "- #49036: 5.24 never rolled recurrent states back; 5.25's per-token history does, exactly with this stack.\n"
    "- #47977 (open) clamps oversized removals in `DynamicLayer` only; the first PR covers every layer type."
)

STEPS = (
    Step(
        "step1_clamp",
        "1-clamp",
        "Crop exactly the tokens asked for on every attention cache layer: clamp oversized removals, cut the indexer "
        "positions",
        tests=(
            "CropClampTest",
            "MiniMaxM3VLSparseCacheCropTest",
            "Qwen4ExpStaticCacheAssistedDecodingTest",
        ),
        behaviour_changes=(
            "Removing more tokens than a layer holds empties it (sliding-window, static and indexer counters went "
            "negative).",
            "`StaticIndexedLayer.crop` removes the positions of the removed tokens too.",
        ),
    ),
    Step(
        "step2_history",
        "2-history",
        "Restore the state of the last kept token when assisted decoding rejects every draft",
        tests=("RecurrentStatesHistoryTest", "AssistedDecodingStatesTest"),
        behaviour_changes=(
            "Assisted decoding with a hybrid or SSM main model continues from the state of the last accepted token.",
        ),
    ),
    Step(
        "step3_static",
        "3-static",
        "Crop the attention part of the static hybrid cache layers",
        tests=("StaticHybridLayerCropTest", "FalconH1StaticCacheAssistedDecodingTest"),
        behaviour_changes=(
            "`crop` of a static hybrid layer removes the tokens from its attention part too.",
            "A static sliding-window hybrid layer whose window is shorter than `max_cache_len` says it cannot be "
            "cropped: assisted decoding with it raises a `ValueError` up front (5.25.0: an `IndexError`).",
        ),
    ),
    Step(
        "step4_ocr",
        "4-ocr",
        "Crop the prefill tokens of UnlimitedOcr's static reference sliding-window layer",
        needs=("1-clamp",),  # the clamp of `StaticSlidingWindowLayer.crop`, whose removal it splits
        tests=("UnlimitedOcrStaticCropTest",),
        behaviour_changes=("A crop beyond the decoded tokens removes prefill tokens too (they were kept).",),
    ),
    Step(
        "step5_lookup",
        "5-lookup",
        "Leave room for the main model's token in the candidates of prompt lookup, DFlash and MTP",
        needs=("2-history",),  # with a hybrid main model, the drafts that now fit are rolled back through its history
        tests=("PromptLookupCandidateGeneratorTest", "DFlashStaticCacheTest", "MTPCandidateGeneratorStaticCacheTest"),
        behaviour_changes=(
            "Near `max_length`, prompt lookup, DFlash and MTP propose fewer candidates (the surplus was discarded, or "
            "overflowed a static cache).",
        ),
    ),
    Step(
        "step6_zaya",
        "6-zaya",
        "Hand a recording cache the state after each token in Zaya",
        tests=("ZayaRecurrentStatesRollbackTest",),
        behaviour_changes=("Zaya hands a recording cache the state after each of its last tokens.",),
    ),
    Step(
        "step7_zamba",
        "7-zamba",
        "Hand a recording cache the state after each token in Zamba",
        tests=("ZambaRecurrentStatesRollbackTest",),
        behaviour_changes=(
            "Zamba runs the forwards of a recording cache token by token, from the cached state, and hands over the "
            "state after each of the last tokens.",
        ),
    ),
    Step(
        "step8_zamba_scan",
        "8-zamba-scan",
        "Continue the cached state in Zamba's multi-token forward",
        needs=("7-zamba",),  # the same statements of `ZambaMambaMixer.forward`
        tests=("ZambaCachedStateContinuationTest",),
        behaviour_changes=(
            "Zamba's multi-token forward over a non-empty cache continues the cached SSM state (it restarted from "
            "zeros).",
        ),
    ),
    Step(
        "step9_mask",
        "9-mask",
        "Keep the causal mask of a single token over static layers while linear attention layers record",
        tests=("StaticCacheRecordingMaskTest",),
        behaviour_changes=(
            "A single query token over a static cache whose linear layers record gets its causal mask (it was "
            "skipped).",
        ),
    ),
    Step(
        "step10_inkling",
        "10-inkling",
        "Keep Inkling's query offset of a static layer from before the cache update",
        tests=("InklingStaticCacheQueryOffsetTest",),
        behaviour_changes=(
            "Inkling with a static cache: the queries of a forward continuing the cache are placed right.",
        ),
    ),
    Step(
        "step11_bailing",
        "11-bailing",
        "Name the types of Bailing-hybrid's MTP layers, and load their post-norm",
        tests=("BailingHybridMtpConfigTest", "BailingHybridMtpLoadingTest"),
        behaviour_changes=(
            "Bailing-hybrid configs carry `mtp_layer_types` and `mtp_mlp_layer_types` (`generate(use_mtp=True)` "
            "builds the MTP layers instead of raising).",
            "`MtpModel` loads the post-norm of Bailing-hybrid's MTP layers from the checkpoints' `final_layernorm` (it "
            "raised a `RuntimeError`).",
        ),
    ),
    Step(
        "step12_mtp",
        "12-mtp",
        "Keep the MTP cache at its working size, and re-feed only the tokens the MTP layers have seen",
        # The main cache's rollback (a hybrid main model), and Bailing-hybrid's MTP layers
        needs=("2-history", "11-bailing"),
        tests=("MTPCandidateGeneratorCacheSizeTest", "MTPCandidateGeneratorShortPromptTest"),
        behaviour_changes=(
            "The MTP cache's conv states no longer grow with the generation (memory).",
            "`use_mtp=True` with several MTP layers works after a prompt shorter than them.",
            "A recording linear layer stores a first conv update shorter than the kernel behind zeros, as one that does "
            "not record does.",
        ),
    ),
    Step(
        "step13_continue",
        "13-continue",
        "Continue a cache that already holds tokens in assisted decoding",
        tests=("AssistedDecodingContinuedCacheTest",),
        behaviour_changes=(
            "Assisted decoding over a cache that holds tokens feeds only the others (it fed the cached ones again).",
        ),
    ),
    Step(
        "step14_recording",
        "14-recording",
        "Stop recording the past of the cache that assisted decoding returns",
        tests=("AssistedDecodingReturnedCacheTest",),
        behaviour_changes=("The cache that assisted decoding leaves behind no longer records its past.",),
    ),
    Step(
        "step15_stop_strings",
        "15-stop-strings",
        "Support stop strings in assisted decoding",
        tests=("AssistedDecodingStopStringsTest",),
        behaviour_changes=(
            "Assisted decoding accepts `stop_strings` (it raised a `ValueError`), and ends at the first one it "
            "generates.",
        ),
    ),
    Step(
        "step16_mamba_scan",
        "16-mamba-scan",
        "Continue the cached state in the multi-token forward of Mamba, FalconMamba and Jamba",
        tests=(
            "MambaCachedStateContinuationTest",
            "FalconMambaCachedStateContinuationTest",
            "JambaCachedStateContinuationTest",
        ),
        behaviour_changes=(
            "A multi-token forward of Mamba, FalconMamba and Jamba over a non-empty cache continues its state "
            "(token by token) instead of restarting from zeros.",
        ),
    ),
    Step(
        "step17_sliding",
        "17-static-sliding",
        "Roll static sliding-window layers back exactly, and allow them in speculative decoding",
        # Its `crop` replaces the clamped one of step 1; the room follows the drafts of each round, which the heuristic
        # schedule grows past the first round's count (step 2 records each round's)
        needs=("1-clamp", "2-history"),
        tests=("StaticSlidingWindowRollbackTest", "StaticSlidingWindowAssistedDecodingTest"),
        behaviour_changes=(
            "`activate_past_recording` on a `StaticSlidingWindowLayer` (assisted decoding calls it) makes its states "
            "hold `sliding_window + N - 1` tokens (at most `max_cache_len`): speculative decoding with a static cache "
            "works on sliding-window models (it raised a `ValueError` up front).",
            "`crop` of a static sliding-window layer whose window wrapped around restores the kept tokens' states, or "
            "raises a `ValueError` before anything changes if they were overwritten (it kept the wrong ones).",
        ),
    ),
    Step(
        "step18_exact",
        "18-fork-exact",
        "Roll linear attention layers back exactly, or refuse before anything changes",
        tests=("LinearAttentionHistoryTest", "GrowingScheduleAssistedDecodingTest"),
        behaviour_changes=(
            "Linear attention layers restore the state after the kept tokens, or raise a `ValueError` before anything "
            "changes; removing every token resets them.",
            "The static sliding-window hybrid layer refuses a crop its window cannot undo.",
            "`activate_past_recording()` without `recurrent_states_to_keep` keeps the number set before (1 if none); "
            "with `None` the next Qwen3-Next forward raised a `TypeError`.",
            "`activate_past_recording` called again keeps the states recorded so far, `reset` empties them, and an "
            "assistant's cache records the drafts of each round.",
        ),
        kind="fork",
    ),
    Step(
        "step19_refuse",
        "19-fork-refuse",
        "Refuse `crop` on attention layers that cannot put their states back",
        tests=(
            "RefusedCropTest",
            "EncoderDecoderCacheCropTest",
            "UnlimitedOcrStaticRefusedCropTest",
            "UnlimitedOcrDynamicCropCheckTest",
            "SlidingWindowAssistantTest",
        ),
        behaviour_changes=(
            "These crops raise a `ValueError` instead of keeping wrong tokens; `crop(0)` of a full, non-recording "
            "`DynamicSlidingWindowLayer` no longer raises (it has nothing to restore).",
            "`crop(-k)` of a quantized layer raises (`is_croppable` was already `False`).",
            "`crop` of a `DynamicSlidingWindowLayer` that holds nothing (never updated, or reset) does nothing (it "
            "raised an `AttributeError`).",
        ),
        kind="fork",
    ),
    Step(
        "step20_deepseek",
        "20-fork-deepseek",
        "Refuse partial `crop` on DeepSeek-V4's compressed-attention caches, and assistants whose cache cannot be cropped",
        tests=("DeepseekV4CacheCropTest",),
        behaviour_changes=(
            "Partial crops of DeepSeek-V4's caches raise; full rollbacks reset them. Assisted decoding with an "
            "assistant whose cache cannot be cropped (DeepSeek-V4) raises a `ValueError` after its first drafts (it "
            "failed with a `RuntimeError` in the second round).",
        ),
        kind="fork",
    ),
    Step(
        "step21_edges",
        "21-fork-edges",
        "Crop dynamic layers without tokens yet, and removals beyond 64 bits",
        tests=(
            "CropEdgesTest",
            "MiniMaxM3VLSparseCacheCropEdgesTest",
            "StaticLayerHotPathTest",
            "DraftsPerRoundTest",
            "StaticIndexedLayerPositionsCropTest",
        ),
        behaviour_changes=(
            "Cropping a dynamic layer initialized without tokens (`early_initialization`) does nothing (it raised an "
            "`IndexError`).",
        ),
        kind="fork",
    ),
    Step(
        "step22_mtp_linear",
        "22-fork-mtp-linear",
        "Build MTP layers of linear attention, and roll them back exactly",
        tests=("MTPLinearAttentionLayersTest", "MTPCacheRoundsTest"),
        behaviour_changes=("MTP layers of linear attention build and decode exactly (they raised a `TypeError`).",),
        kind="fork",
    ),
)

# The upstream methods the overlay replaces: `patcher.source_fingerprint` of their source. If the installed source
# differs, the method changed upstream and the fix refuses to install. Regenerate with
# `python -m cache_crop_fix fingerprints`.
# Read from transformers 5.25.0
FINGERPRINTS: dict[str, frozenset[str]] = {
    "transformers.cache_utils.Cache.crop": frozenset({"f5ec7ef507b1051e"}),
    "transformers.cache_utils.DynamicIndexedLayer.crop": frozenset({"2809f6f48a5dafed"}),
    "transformers.cache_utils.DynamicLayer.crop": frozenset({"2a23d79eb17fe0e1"}),
    "transformers.cache_utils.DynamicSlidingWindowLayer.crop": frozenset({"4828691c691ceb3e"}),
    "transformers.cache_utils.LinearAttentionAndFullAttentionLayer.crop": frozenset({"5fd2756561f5b757"}),
    "transformers.cache_utils.LinearAttentionAndSlidingWindowAttentionLayer.crop": frozenset({"c4b507eab8599be1"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.__init__": frozenset({"2d9ad4f57910fea6"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.activate_past_recording": frozenset({"09324b225263d7a0"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.crop": frozenset({"11f5e340426b90d9"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.increase_count": frozenset({"b0b2915762ffa2f4"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.reorder_cache": frozenset({"15ab090498b9cb05"}),
    "transformers.cache_utils.LinearAttentionCacheLayerMixin.reset": frozenset({"8c92d2e8dac751a5"}),
    "transformers.cache_utils.LinearAttentionLayer.update_conv_state": frozenset({"447593539da01284"}),
    "transformers.cache_utils.LinearAttentionLayer.update_recurrent_state": frozenset({"a3602356e5605e30"}),
    "transformers.cache_utils.StaticIndexedLayer.crop": frozenset({"b2bd645bcb89e37f"}),
    "transformers.cache_utils.StaticLayer.crop": frozenset({"3765188a4ed38cf6"}),
    "transformers.cache_utils.StaticSlidingWindowLayer.__init__": frozenset({"1f108236b5c48c00"}),
    "transformers.cache_utils.StaticSlidingWindowLayer.crop": frozenset({"08845cd2cd669ff7"}),
    "transformers.cache_utils.StaticSlidingWindowLayer.is_croppable": frozenset({"ef661ab01adde08a"}),
    "transformers.cache_utils.StaticSlidingWindowLayer.reset": frozenset({"77c0bf92ac784c4e"}),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator.__init__": frozenset({"0186fbe245717658"}),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator._update_past_and_masks": frozenset(
        {"f79f4f17fa1a9f47"}
    ),
    "transformers.generation.candidate_generator.AssistedCandidateGenerator.get_candidates": frozenset(
        {"3dff4adceeb98f44"}
    ),
    "transformers.generation.candidate_generator.PromptLookupCandidateGenerator.get_candidates": frozenset(
        {"f5649648285e8b7d"}
    ),
    "transformers.generation.utils.GenerationMixin._assisted_decoding": frozenset({"ceaaa272a1ca9c68"}),
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLSparseCacheLayer.crop": frozenset(
        {"5bb2a812c4ee9e6d"}
    ),
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLSparseStaticCacheLayer.crop": frozenset(
        {"933a47b2579a45d4"}
    ),
    "transformers.models.zamba.modeling_zamba.ZambaMambaMixer.forward": frozenset({"c696cc1bea89a3c1"}),
    "transformers.models.zaya.modeling_zaya.ZayaCCAProjection.forward": frozenset({"329c05058f3e35ca"}),
    "transformers.masking_utils.create_causal_mask": frozenset({"f83fc992dace1f5f"}),
    "transformers.masking_utils.create_chunked_causal_mask": frozenset({"e64b45d0f7dd2a35"}),
    "transformers.masking_utils.create_sliding_window_causal_mask": frozenset({"ffab5dcece593326"}),
    "transformers.models.inkling.modeling_inkling.InklingAttention.forward": frozenset({"56200cdd598271cd"}),
    "transformers.conversion_mapping._build_checkpoint_conversion_mapping": frozenset({"8cce53a72814521f"}),
    "transformers.models.bailing_hybrid.configuration_bailing_hybrid.BailingHybridConfig.__post_init__": frozenset(
        {"cbd19e1594afe258"}
    ),
    "transformers.generation.candidate_generator.MTPCandidateGenerator.__init__": frozenset({"c01bbed9809bfd8f"}),
    "transformers.generation.candidate_generator.MTPCandidateGenerator.get_candidates": frozenset(
        {"57457772013253e8"}
    ),
    "transformers.generation.candidate_generator.DFlashTokenCandidateGenerator.get_candidates": frozenset(
        {"7e8e468c42b2397e"}
    ),
    "transformers.models.mamba.modeling_mamba.mamba_scan_forward": frozenset({"99fedc9a77161154"}),
    "transformers.models.falcon_mamba.modeling_falcon_mamba.mamba_scan_forward": frozenset({"0600bb4989c79b13"}),
    "transformers.models.jamba.modeling_jamba.mamba_scan_forward": frozenset({"0d82329040266fca"}),
    "transformers.modeling_layers.MtpModel.__init__": frozenset({"49d82b4826f7c404"}),
    "transformers.modeling_layers.MtpModel.create_masks_for_mtp_layer": frozenset({"c2fefb785b753d2c"}),
}


TARGET = Target(
    name="v5_25",
    label="5.25 main line",
    versions=">=5.25.0,<5.26",
    sdist_version="5.25.0",
    steps=STEPS,
    seed_lengths=(3, 0),  # `crop(0)` removes nothing
    fingerprints=FINGERPRINTS,
    related=RELATED,
)
