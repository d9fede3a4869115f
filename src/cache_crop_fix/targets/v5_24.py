"""The 5.24 backport: the fix for transformers 5.24.x (upstream `main` until 5.25.0), where `crop(tokens_to_remove)` removes that many tokens (#47720).

On this line the semantics of 5.24 are kept for correct calls (`crop(-k)` removes the last `k` tokens, `crop(0)`
removes none, positive values raise), and the rest of the contract holds everywhere: removals are clamped, every layer
is checked before any changes, and every layer type crops exactly or refuses clearly.
"""

from . import Step, Target, backport
from .v5_25 import STEPS as MAIN_LINE_STEPS


RELATED = (
    "- #47720 (5.15) made the argument `tokens_to_remove`; this stack keeps its meaning and makes every layer type "
    "honour it exactly or refuse before anything changes (the audit asked for in #47433).\n"
    "- #47977 (open) clamps oversized removals in `DynamicLayer` only.\n"
    "- #49036: recurrent states cannot be rolled back by a few tokens; they are refused here, not kept stale.\n"
    "- #49036: 5.25 rolls recurrent states back through a per-token history; this 5.24 stack keeps them with an "
    "update-level history instead (5.24 has no per-token states).\n"
    "- The 5.14 backport of this stack (`crop(0)` empties the cache there) is a separate stack on `v5.14-release`."
)

REPRODUCTION = """\
```python
import torch
from transformers.cache_utils import DynamicSlidingWindowLayer
layer = DynamicSlidingWindowLayer(sliding_window=4)
layer.activate_past_recording()
layer.update(torch.ones(1, 1, 6, 1), torch.ones(1, 1, 6, 1))  # 6 tokens
layer.crop(-8)  # remove more tokens than the layer holds
print(layer.cumulative_length)  # 5.24.0: -2, and the next `update` reports a length of -1. With this PR: 0
```"""

STEPS = (
    Step(
        "step1_clamp",
        "1-clamp",
        "Clamp oversized `crop` removals on dynamic cache layers and check `crop` arguments",
        tests=("DynamicLayersCropTest", "CropArgumentsTest"),
        api_tests=("CropArgumentsTest",),
        summary=(
            "`crop(tokens_to_remove)` (#47720) removes the last `-tokens_to_remove` tokens. Removing more tokens than "
            "a layer holds is what a full rollback does (`crop(-cache.get_seq_length())` when layers differ in "
            "length), but outside `DynamicLayer` it is not clamped: a sliding-window layer that records its past "
            "drives `cumulative_length` negative, and the next `update` reports a wrong length.\n\n"
            + REPRODUCTION
            + "\n\nEvery dynamic layer now clamps the removal to what it holds, `DynamicIndexedLayer` cuts its "
            "indexer positions with its keys, and `crop` checks its argument once: `False`, floats, `None` and "
            "tensors of more than one element raise a `TypeError` that says what was passed, instead of acting as "
            "`0` or failing inside the layer. Each layer also gets a `_check_crop` hook (a no-op here) that the next "
            "PR uses to check every layer before any changes."
        ),
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
        summary=(
            "`Cache.crop` cropped layer by layer, so a layer that refuses left the layers before it cropped (the "
            "outcome depended on layer order), and `Cache.is_croppable` could say `True` for a cache that then "
            "refused. It now asks every layer first (`_check_crop`) and changes nothing when one cannot honour the "
            "crop. Linear attention layers roll back the conv states they recorded (`activate_past_recording`), "
            "clamped and padded to the kernel size, and refuse when their recurrent states would have to be undone "
            "(#49036) instead of keeping them silently; a removal of every cached token is a full rollback that "
            "resets them. A never-filled linear attention layer no longer fails on `None` states. Assisted decoding "
            "rolls the assistant back fully, and re-encodes, when its cache refuses to remove the rejected tokens."
        ),
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
        summary=(
            "The static layers (`StaticLayer`, `StaticIndexedLayer`, `StaticSlidingWindowLayer`) rewind their write "
            "position without a bound, so an oversized removal drives it negative and the next `update` fails. They "
            "now clamp it, in place and without reading it on the host (the masks hide the freed slots until the next "
            "`update` overwrites them), and move their side tensors (indexer positions) with the keys. "
            "`StaticSlidingWindowLayer` refuses, as its own `is_croppable` says, a crop that needs tokens its window "
            "already overwrote. The two static hybrid layers (`LinearAttentionAndStaticFullAttentionLayer`, "
            "`LinearAttentionAndStaticSlidingWindowAttentionLayer`) had no `crop` of their own, so their attention "
            "part kept every token: they now crop both parts, or neither. Telling a full rollback (which resets the "
            "linear attention part) from a partial one needs their lengths on the host: `Cache.crop` reads them "
            "together, once per call, not once per layer."
        ),
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
        summary=(
            "`QuantizedLayer` and `Fp8QuantizedLayer` inherit `DynamicLayer.crop`, which cuts only the residual "
            "(original precision) part, never the quantized tensors or `cumulative_length`, or raises an "
            "`IndexError`. A full rollback now empties both parts; `Fp8QuantizedLayer` cuts its FP8 states "
            "exactly (their scale is frozen); `QuantizedLayer` removes tokens from its residual part and refuses, "
            "before changing anything, a crop that reaches into the quantized part."
        ),
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
        summary=(
            "DeepSeek-V4's compressed-attention caches now roll their compressor buffers back with the sliding "
            "window, and refuse a crop that would reopen an entry the compressor already closed (they kept a stale "
            "state). The MiniMax-M3-VL sparse layers cut their index keys with the key and value states, however "
            "many tokens are removed, and the static one clamps. UnlimitedOcr's reference sliding-window layers "
            "remove the sliding tokens first, then the reference (prefill) ones, and refuse what their window "
            "dropped; the static one had no `crop`."
        ),
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


# Bugs of the assisted decoding and Mamba code that 5.24 shares with 5.25 (issue 39)
# (the main line's steps 13-16; their reproductions print the same on 5.24.0)
_MAIN_LINE = {step.package: step for step in MAIN_LINE_STEPS}
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
