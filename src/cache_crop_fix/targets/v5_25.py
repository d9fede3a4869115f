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

CLAMP_REPRODUCTION = """\
```python
import torch
from transformers.cache_utils import DynamicSlidingWindowLayer, StaticLayer
layer = DynamicSlidingWindowLayer(sliding_window=4)
layer.activate_past_recording()  # as `generate` sets up an assistant's cache
layer.update(torch.ones(1, 1, 6, 1), torch.ones(1, 1, 6, 1))
layer.crop(0)  # `generate`, after every forward
layer.update(torch.ones(1, 1, 2, 1), torch.ones(1, 1, 2, 1))
layer.crop(-20)
print(layer.cumulative_length)  # 5.25.0: -12. With this PR: 0
layer = StaticLayer(max_cache_len=8)
layer.update(torch.ones(1, 1, 3, 1), torch.ones(1, 1, 3, 1), {"cache_position": torch.arange(3)})
layer.crop(-5)
print(layer.get_seq_length())  # 5.25.0: tensor(-2). With this PR: tensor(0)
```"""

HISTORY_REPRODUCTION = """\
```python
import torch
from transformers.cache_utils import LinearAttentionLayer
layer = LinearAttentionLayer()
layer.activate_past_recording(recurrent_states_to_keep=2)  # assisted decoding: N = 2 drafts
layer.update_conv_state(torch.zeros(1, 1, 3), conv_kernel_size=2)  # a forward of 3 tokens
layer.update_recurrent_state([torch.full((1, 1), 2.0), torch.full((1, 1), 3.0)])  # the states after its last N
layer.crop(-2)  # all drafts rejected: the state after the first token is needed
print(layer.recurrent_states[0])  # 5.25.0: tensor([[0.]]) (from before the forward). With this PR: ValueError
```"""

ASSISTED_REPRODUCTION = """\
```python
import torch
from transformers import Cache, LlamaConfig, LlamaForCausalLM, Qwen3NextConfig, Qwen3NextForCausalLM
torch.manual_seed(0)
common = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "pad_token_id": 0}
linear = {"linear_num_value_heads": 2, "linear_num_key_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8}
config = Qwen3NextConfig(
    **common, **linear, num_hidden_layers=2, num_key_value_heads=1, head_dim=16, num_experts=0,
    layer_types=["linear_attention", "full_attention"],
)
model, assistant = Qwen3NextForCausalLM(config), LlamaForCausalLM(LlamaConfig(**common, num_hidden_layers=1))
assistant.generation_config.num_assistant_tokens, assistant.generation_config.assistant_confidence_threshold = 3, 0.0
crop, states = Cache.crop, []
def crop_and_keep_state(cache, tokens_to_remove):  # the main cache's state after each round
    crop(cache, tokens_to_remove)
    if hasattr(cache.layers[0], "recurrent_states"):
        states.append((int(cache.get_seq_length()), cache.layers[0].recurrent_states[0].clone()))
Cache.crop = crop_and_keep_state
out = model.generate(torch.tensor([[5, 9, 2, 7, 1]]), assistant_model=assistant, max_new_tokens=8, do_sample=False)
Cache.crop = crop
errors = [(s - model(out[:, :n]).cache.layers[0].recurrent_states[0]).abs().max() for n, s in states]
print(f"{max(errors):.3f}")  # 5.25.0: 0.004. With this PR: 0.000
```"""

REFUSE_REPRODUCTION = """\
```python
import torch
from transformers.cache_utils import DynamicSlidingWindowLayer
layer = DynamicSlidingWindowLayer(sliding_window=3)
layer.activate_past_recording()  # an assistant's cache, as `generate` sets it up
layer.update(torch.ones(1, 1, 4, 1), torch.ones(1, 1, 4, 1))
layer.crop(0)  # `generate`, after every forward
layer.crop(-1)
print(layer.keys.shape[-2], layer.get_seq_length())  # 5.25.0: 1 3 (the window needs 3). With this PR: ValueError
```"""

STATIC_REPRODUCTION = """\
```python
import torch
from transformers import FalconH1Config, FalconH1ForCausalLM, LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "num_hidden_layers": 1}
mamba = {"mamba_d_ssm": 32, "mamba_n_heads": 2, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_d_state": 8}
model = FalconH1ForCausalLM(FalconH1Config(**tiny, **mamba, num_key_value_heads=1, head_dim=16))
assistant = LlamaForCausalLM(LlamaConfig(**tiny))
assistant.generation_config.num_assistant_tokens, assistant.generation_config.assistant_confidence_threshold = 3, 0.0
inputs = {"input_ids": torch.tensor([[5, 9, 2, 7, 1]]), "max_new_tokens": 8, "do_sample": False}
greedy = model.generate(**inputs, cache_implementation="static")
assisted = model.generate(**inputs, assistant_model=assistant, cache_implementation="static")
print(assisted.tolist() == greedy.tolist())  # 5.25.0: IndexError (index 12 is out of bounds). With this PR: True
```"""

OCR_REPRODUCTION = """\
```python
import torch
from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrStaticReferenceSlidingWindowLayer
layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=6, sliding_window=4)
layer.set_prefill_length(2)
layer.update(torch.ones(1, 1, 2, 1), torch.ones(1, 1, 2, 1))  # the prefill (reference) tokens
layer.update(torch.ones(1, 1, 1, 1), torch.ones(1, 1, 1, 1))  # a decoded token
layer.crop(-3)  # every token
print(layer.prefill_cumulative_length, layer.cumulative_length_int)  # 5.25.0: 2 -2. With this PR: 0 0
```"""

INDEXER_REPRODUCTION = """\
```python
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.qwen4_exp import Qwen4ExpForCausalLM, Qwen4ExpTextConfig
torch.manual_seed(0)
tiny = {"vocab_size": 64, "hidden_size": 32, "num_attention_heads": 2, "pad_token_id": 0, "bos_token_id": 1}
linear = {"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 2}
moe = {"moe_intermediate_size": 16, "shared_expert_intermediate_size": 16, "num_experts": 4, "num_experts_per_tok": 2}
ple = {"ple_layer_ids": [1, 3], "ple_embed_dim": 32, "ple_conv_kernel_size": 2, "hc_count": 2, "hc_lowrank": 8}
ngram = {"ngram_size": 2, "heads_per_ngram": 2, "ngram_vocab_size_base": 101, "make_ngram_vocab_size_divisible_by": 8}
indexer = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 2, "indexer_compress_ratio": 2}
rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
config = Qwen4ExpTextConfig(
    **tiny, **linear, **moe, **ple, **ngram, **indexer, num_hidden_layers=4, num_key_value_heads=1, head_dim=16,
    layer_types=["linear_attention", "indexed_attention"] * 2, rope_parameters=rope, split_ngram_parts=1, eos_token_id=63,
)
model = Qwen4ExpForCausalLM(config)
assistant = LlamaForCausalLM(LlamaConfig(**tiny, intermediate_size=37, num_hidden_layers=1))
assistant.generation_config.num_assistant_tokens, assistant.generation_config.assistant_confidence_threshold = 3, 0.0
input_ids = torch.randint(2, 63, (1, 12), generator=torch.Generator().manual_seed(1))
kwargs = {"attention_mask": torch.ones_like(input_ids), "max_new_tokens": 16, "do_sample": False, "eos_token_id": None}
greedy = model.generate(input_ids, cache_implementation="static", **kwargs)
assisted = model.generate(input_ids, cache_implementation="static", assistant_model=assistant, **kwargs)
print(assisted.tolist() == greedy.tolist())  # 5.25.0: False. With this PR: True
```"""

DEEPSEEK_REPRODUCTION = """\
```python
import torch
from transformers import DeepseekV4Config
from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4CSACache
config = DeepseekV4Config(num_hidden_layers=1, layer_types=["compressed_sparse_attention"], sliding_window=8)
layer = DeepseekV4CSACache(config)
states = torch.ones(1, 1, 3, 1)
layer.update(states, states)
layer.store_compression_weights("compressor", states.view(1, 3, 1), states.view(1, 3, 1))
layer.crop(-1)
print(layer.get_seq_length(), layer.buffer_kv["compressor"].shape[1])  # 5.25.0: 2 3. With this PR: ValueError
```"""

LOOKUP_REPRODUCTION = """\
```python
import torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=37, num_attention_heads=2, num_hidden_layers=1))
input_ids = torch.arange(16).repeat(1, 2)  # each token is followed by others: prompt lookup always finds candidates
inputs = {"input_ids": input_ids, "max_new_tokens": 12, "do_sample": False, "cache_implementation": "static"}
print(model.generate(**inputs, prompt_lookup_num_tokens=10).tolist() == model.generate(**inputs).tolist())
# 5.25.0: IndexError (index 43 is out of bounds for dimension 2 with size 43). With this PR: True
```"""

STATES_REPRODUCTION = """\
```python
import torch
from transformers import DynamicCache, ZayaConfig, ZayaForCausalLM
torch.manual_seed(0)
config = ZayaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=8, moe_intermediate_size=16, num_experts=4, router_hidden_size=16)
model, input_ids = ZayaForCausalLM(config), torch.randint(64, (1, 10))
cache = DynamicCache(config=config)
model(input_ids[:, :6], cache=cache)
cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding does with 3 drafts
model(input_ids[:, 6:], cache=cache)  # the verification forward
cache.crop(-2)  # 2 drafts rejected
expected = DynamicCache(config=config)
model(input_ids[:, :8], cache=expected)
print(torch.equal(cache.get_recurrent_state(0), expected.get_recurrent_state(0)))
# 5.25.0: IndexError (list index out of range). With this PR: True
```"""

MASK_REPRODUCTION = """\
```python
import torch
from transformers import Qwen3NextConfig, StaticCache
from transformers.masking_utils import create_causal_mask
config = Qwen3NextConfig(
    hidden_size=32, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"], attn_implementation="sdpa"
)
cache = StaticCache(config=config, max_cache_len=8)
cache.update(torch.rand(1, 2, 3, 256), torch.rand(1, 2, 3, 256), layer_idx=1)  # 3 tokens
cache.activate_past_recording(recurrent_states_to_keep=4)  # as assisted decoding and prompt lookup do
mask = create_causal_mask(config, torch.empty(1, 1, 0), None, cache, position_ids=torch.tensor([[3]]))
print(mask if mask is None else int(mask.sum()))  # slots the 4th token sees. 5.25.0: None (all 8). With this PR: 4
```"""

INKLING_REPRODUCTION = """\
```python
import torch
from transformers import InklingForCausalLM, InklingTextConfig, StaticCache
torch.manual_seed(0)
config = InklingTextConfig(
    vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=8, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=16, d_rel=4,
    rel_extent=16, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, mlp_layer_types=["dense", "dense"], local_layer_ids=[0],
)
model, input_ids = InklingForCausalLM(config).double(), torch.randint(64, (1, 12))
cache = StaticCache(config=config, max_cache_len=16)
model(input_ids[:, :7], cache=cache)
logits = model(input_ids[:, 7:], cache=cache).logits  # 5 tokens continuing the static cache
print(torch.allclose(logits, model(input_ids).logits[:, 7:]))  # 5.25.0: False. With this PR: True
```"""

MTP_REPRODUCTION = """\
```python
import os, tempfile
import torch
from safetensors.torch import save_file
from transformers import InklingForCausalLM, InklingTextConfig
from transformers.generation.candidate_generator import MTPCandidateGenerator
from transformers.modeling_layers import MtpModel
torch.manual_seed(0)
config = InklingTextConfig(
    vocab_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=16, d_rel=4, rel_extent=32,
    intermediate_size=64, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, num_mtp_layers=1,
)
model = InklingForCausalLM(config)
weights = {**model.state_dict(), **MtpModel(model, 1).layers.state_dict(prefix="model.mtp.layers.")}
with tempfile.TemporaryDirectory() as checkpoint:  # a checkpoint with MTP weights
    model.save_pretrained(checkpoint)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()}, os.path.join(checkpoint, "model.safetensors"))
    model = InklingForCausalLM.from_pretrained(checkpoint, use_kernels=False)
    generators, init = [], MTPCandidateGenerator.__init__  # to see the MTP cache
    MTPCandidateGenerator.__init__ = lambda self, *args, **kw: (init(self, *args, **kw), generators.append(self))[0]
    model.generate(torch.tensor([[1, 5, 2, 3, 7]]), use_mtp=True, do_sample=False, max_new_tokens=40)
print(max(state.shape[-1] for state in generators[0].mtp_cache.layers[0].conv_states.values()))  # conv columns
# 5.25.0: 43 (one per token). With this PR: 5
```"""

BAILING_MTP_REPRODUCTION = """\
```python
from transformers import BailingHybridConfig
config = BailingHybridConfig(num_mtp_layers=2)
print(config.get_mtp_config().layer_types)  # 5.25.0: ValueError. With this PR: ['full_attention', 'full_attention']
```"""

REFEED_REPRODUCTION = """\
```python
from unittest import mock
import torch
from transformers import InklingForCausalLM, InklingTextConfig
from transformers.modeling_layers import MtpModel
config = InklingTextConfig(
    vocab_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=16, d_rel=4, rel_extent=32,
    intermediate_size=64, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, num_mtp_layers=2,
)
model = InklingForCausalLM(config)
random_mtp_layers = classmethod(lambda cls, main_model, **kwargs: cls(main_model, 2))  # no checkpoint needed
with mock.patch.object(MtpModel, "from_pretrained", random_mtp_layers):
    output = model.generate(torch.tensor([[5]]), use_mtp=True, do_sample=False, max_new_tokens=10)
print(output.shape[1])  # 5.25.0: RuntimeError. With this PR: 11
```"""

CONTINUE_REPRODUCTION = """\
```python
import torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2}
model, assistant = (LlamaForCausalLM(LlamaConfig(**tiny, num_hidden_layers=layers)) for layers in (2, 1))
first_turn = model.generate(torch.tensor([[5, 9, 2, 7, 1]]), max_new_tokens=4, return_dict_in_generate=True)
input_ids = torch.cat([first_turn.sequences, torch.tensor([[3, 4]])], dim=-1)  # the second turn
output = model.generate(input_ids, cache=first_turn.cache, assistant_model=assistant, max_new_tokens=6)
print(output.shape[1], first_turn.cache.get_seq_length())  # 5.25.0: 17 24 (the first turn twice). With this PR: 17 16
```"""

RECORDING_REPRODUCTION = """\
```python
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM
torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "num_hidden_layers": 1}
model, assistant = MistralForCausalLM(MistralConfig(**tiny, sliding_window=4, num_key_value_heads=1)), LlamaForCausalLM(LlamaConfig(**tiny))
output = model.generate(torch.tensor([[5, 9, 2, 7, 1]]), assistant_model=assistant, max_new_tokens=4, return_dict_in_generate=True)
model.generate(output.sequences, cache=output.cache, max_new_tokens=20)  # continue the returned cache
print(output.cache.layers[0].keys.shape[-2])  # tokens the window of 4 keeps. 5.25.0: 28. With this PR: 3
```"""

STOP_STRINGS_REPRODUCTION = """\
```python
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
tokenizer = Tokenizer(models.BPE({character: i for i, character in enumerate("abcdefghijklmnopqrstuvwxyz\\u0120.,!?")}, []))
tokenizer.pre_tokenizer, tokenizer.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="a")  # one token per character
torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "num_hidden_layers": 1}
model, assistant = LlamaForCausalLM(LlamaConfig(**tiny)), LlamaForCausalLM(LlamaConfig(**tiny))
output = model.generate(tokenizer("hello", return_tensors="pt").input_ids, assistant_model=assistant, stop_strings="j", tokenizer=tokenizer)
print(tokenizer.decode(output[0]))  # 5.25.0: ValueError (we could not locate a tokenizer). With this PR: hellotj
```"""

MAMBA_SCAN_REPRODUCTION = """\
```python
import torch
from transformers import MambaConfig, MambaForCausalLM
torch.manual_seed(0)
model = MambaForCausalLM(MambaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, state_size=8))
input_ids = torch.randint(64, (1, 10))
cache = model(input_ids[:, :6], use_cache=True).cache  # a first turn, or the first chunk of a chunked prefill
logits = model(input_ids[:, 6:], cache=cache).logits  # 4 tokens continuing it
print(f"{(logits - model(input_ids).logits[:, 6:]).abs().max():.4f}")  # 5.25.0: 0.0009. With this PR: 0.0000
```"""

STEPS = (
    Step(
        "step1_clamp",
        "1-clamp",
        "Clamp oversized `crop` removals on every attention cache layer",
        tests=("CropClampTest", "MiniMaxM3VLSparseCacheCropTest"),
        summary=(
            "Removing more tokens than a layer holds is what a full rollback does (`crop(-cache.get_seq_length())` "
            "when layers differ in length). `DynamicLayer` empties itself (slicing a shorter tensor), but a recording "
            "`DynamicSlidingWindowLayer` beyond its window and the static layers drive their counters negative, and "
            "the next `update` writes at a negative position.\n\n"
            + CLAMP_REPRODUCTION
            + "\n\nEach of these layers now clamps the removal to what it holds, and so do the static indexers "
            "(`StaticIndexedLayer`, MiniMax-M3-VL's static sparse layer). The static counters move in place (`sub_` "
            "then `clamp_(min=0)`), without reading the count on the host, and `crop(0)`, which `generate` calls "
            "after every forward, returns before launching a kernel."
        ),
        behaviour_changes=(
            "Removing more tokens than a layer holds empties it (sliding-window, static and indexer counters went "
            "negative).",
        ),
    ),
    Step(
        "step2_history",
        "2-history",
        "Restore the state of the last kept token when assisted decoding rejects every draft",
        tests=("RecurrentStatesHistoryTest", "AssistedDecodingStatesTest"),
        summary=(
            "5.25 lets hybrid main models use assisted decoding: their cache records the recurrent states of the last "
            "`num_drafting_tokens` tokens, and `crop` restores one of them. But the verification forward has "
            "`candidate_length + 1` tokens, so when every draft is rejected, `crop(-candidate_length)` restores the "
            "state from *before* the forward: the next round continues from a state that misses the last accepted "
            "token (on the first round, an all-zero state). The heuristic schedule also drafts more tokens than were "
            "recorded, and `crop` raises an `IndexError`.\n\n"
            + ASSISTED_REPRODUCTION
            + "\n\nAssisted decoding now records `candidate_length + 1` states each round, and the assistant the "
            "drafts of the round. The history is one list per recurrent state (`dict.fromkeys(..., [])` shared one "
            "list between them), kept when recording is activated again, and cleared by `reset`."
        ),
        behaviour_changes=(
            "Assisted decoding with a hybrid or SSM main model continues from the state of the last accepted token.",
            "`activate_past_recording` called again keeps the states recorded so far.",
        ),
    ),
    Step(
        "step3_static",
        "3-static",
        "Crop the attention part of the static hybrid cache layers",
        tests=("StaticHybridLayerCropTest", "FalconH1StaticCacheAssistedDecodingTest"),
        summary=(
            "`LinearAttentionAndStaticFullAttentionLayer` and `LinearAttentionAndStaticSlidingWindowAttentionLayer` "
            "inherit `LinearAttentionLayer.crop`, which rolls back only the recurrent states: their attention part "
            "keeps every rejected draft, and assisted decoding with a static cache writes past its end (`StaticCache` "
            "makes them for the `hybrid` layers of FalconH1, Zamba, Zamba2, Zaya and Inkling).\n\n"
            + STATIC_REPRODUCTION
            + "\n\nThey now crop both parts, as `LinearAttentionAndFullAttentionLayer` and "
            "`LinearAttentionAndSlidingWindowAttentionLayer` do. The sliding one also reports its window's "
            "`is_croppable` (the linear part's class attribute hid it), so that `generate` refuses assisted decoding "
            "when the window is shorter than the cache, as for `StaticSlidingWindowLayer`, instead of cropping a "
            "window that may have overwritten the states to restore."
        ),
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
        tests=("UnlimitedOcrStaticCropTest",),
        summary=(
            "`UnlimitedOcrStaticReferenceSlidingWindowLayer` inherits `StaticSlidingWindowLayer.crop`, which only "
            "rolls the sliding-window part back: removing more tokens than were decoded kept the prefill (reference) "
            "tokens, so `get_seq_length()` stayed at the prefill length after a full rollback and the next prompt was "
            "appended to the old one.\n\n"
            + OCR_REPRODUCTION
            + "\n\nIt now removes the sliding tokens first, then the prefill ones (moving the "
            "write position back, as `StaticLayer.crop` does); the next tokens fill the prefill again."
        ),
        behaviour_changes=("A crop beyond the decoded tokens removes prefill tokens too (they were kept).",),
    ),
    Step(
        "step5_indexer",
        "5-indexer",
        "Crop the indexer positions of `StaticIndexedLayer`",
        tests=("StaticIndexedLayerPositionsCropTest", "Qwen4ExpStaticCacheAssistedDecodingTest"),
        summary=(
            "Qwen4-Exp keeps the positions of its cached tokens in `StaticIndexedLayer.indexer_position_ids` (it "
            "concatenates its 3-D positions to them every forward, so that cache operations update them), but "
            "`StaticIndexedLayer.crop` never cut them: after rejected drafts the indexer reads the positions of tokens "
            "the cache no longer holds, and assisted decoding with a static cache leaves greedy decoding "
            "(`DynamicIndexedLayer.crop` already cuts them).\n\n"
            + INDEXER_REPRODUCTION
            + "\n\nThey now follow the kept tokens."
        ),
        behaviour_changes=("`StaticIndexedLayer.crop` removes the positions of the removed tokens too.",),
    ),
    Step(
        "step6_lookup",
        "6-lookup",
        "Leave room for the main model's token in the candidates of prompt lookup, DFlash and MTP",
        tests=("PromptLookupCandidateGeneratorTest", "DFlashStaticCacheTest", "MTPCandidateGeneratorStaticCacheTest"),
        summary=(
            "`PromptLookupCandidateGenerator.get_candidates` clamps the end of its candidates as a position "
            "(`min(end_idx, input_length, max_length)`), which never binds: it proposes up to "
            "`prompt_lookup_num_tokens` candidates at any length, although the main model adds one more token and the "
            "default static cache holds `max_length - 1` tokens. With a dynamic cache the surplus is wasted compute "
            "(trimmed afterwards); with a static one the verification forward writes past the cache's end. "
            "`AssistedCandidateGenerator` already drafts at most `max_length - cur_len - 1` tokens.\n\n"
            + LOOKUP_REPRODUCTION
            + "\n\nPrompt lookup now proposes at most that many candidates too. DFlash computes that bound "
            "(`max_new_tokens`) but returned its `block_size - 1` drafts whatever the length: it now returns at most "
            "`max_new_tokens` of them (its test: a hybrid main model with a static cache, `IndexError` on 5.25.0). "
            "The MTP drafter returned one draft per MTP layer whatever the length: its candidates are now cut to "
            "`max_length - 1` tokens (`max_length` kept from the generation config; its test: Bailing-hybrid's MTP "
            "layer with a static cache, `IndexError` on 5.25.0)."
        ),
        behaviour_changes=(
            "Near `max_length`, prompt lookup, DFlash and MTP propose fewer candidates (the surplus was discarded, or "
            "overflowed a static cache).",
        ),
    ),
    Step(
        "step7_states",
        "7-states",
        "Hand a recording cache the state after each token in Zamba and Zaya, and continue Zamba's cached state",
        tests=("ZayaRecurrentStatesRollbackTest", "ZambaRecurrentStatesRollbackTest"),
        summary=(
            "5.25 rolls linear attention layers back through the states a model hands over after each of the last "
            "`recurrent_states_to_keep` tokens of a forward, but Zamba's Mamba mixer and Zaya's CCA projection hand "
            "over only the state after the last one: with a hybrid main model, assisted decoding's `crop` finds "
            "nothing to roll back to. Zamba's multi-token forward also ignores the cached state (its scan starts "
            "from zeros, and neither the torch scan nor `mamba_ssm`'s takes a starting state), so a chunked prefill or "
            "a verification forward continues from a wrong state.\n\n"
            + STATES_REPRODUCTION
            + "\n\nZaya now hands over `delayed_v_state` after each of those tokens, as the Mamba2 models do. Zamba "
            "runs the tokens that continue a cached state, and the last `recurrent_states_to_keep` ones of a "
            "recording cache, through the single-token update (which gives the state after each), and its "
            "single-token forward hands the state over while the cache records."
        ),
        behaviour_changes=(
            "Zamba's multi-token forward over a non-empty cache continues the cached SSM state (it restarted from "
            "zeros), computed token by token.",
        ),
    ),
    Step(
        "step8_mask",
        "8-mask",
        "Keep the causal mask of a single token over static layers while linear attention layers record",
        tests=("StaticCacheRecordingMaskTest",),
        summary=(
            "The mask functions skip the causal mask of a single query token unless `cache.is_compileable`, their "
            "proxy for static layers (which return all `max_cache_len` slots, the ones not written yet included). "
            "Linear attention layers are not compileable while they record their states for a rollback, so over a "
            "static hybrid cache the single-token forwards of assisted decoding and prompt lookup (a round without "
            "candidates) attend to empty and stale slots: prompt lookup leaves greedy decoding (Qwen3.5, LFM3, "
            "NemotronH, FalconH1, Zamba2 in our tests), and `generate` drops an all-ones `attention_mask`, so passing "
            "one does not help.\n\n"
            + MASK_REPRODUCTION
            + "\n\n`create_causal_mask`, `create_sliding_window_causal_mask` and `create_chunked_causal_mask` now "
            "keep the mask when the cache has static layers (`_has_static_layers`), whatever its linear layers do; "
            "the decisions for every other cache are unchanged."
        ),
        behaviour_changes=(
            "A single query token over a static cache whose linear layers record gets its causal mask (it was "
            "skipped).",
        ),
    ),
    Step(
        "step9_inkling",
        "9-inkling",
        "Keep Inkling's query offset of a static layer from before the cache update",
        tests=("InklingStaticCacheQueryOffsetTest",),
        summary=(
            "`InklingAttention.forward` reads `cache.get_query_offset()` before `cache.update` (its comment says it "
            "must) and uses it after, but a static layer returns its length as the counter tensor that `update` "
            "advances in place: every forward that continues a static cache places its queries `q_length` positions "
            "too far in the relative position bias (greedy decoding with a static cache too; assisted decoding then "
            "leaves greedy decoding).\n\n"
            + INKLING_REPRODUCTION
            + "\n\nThe offset is now copied when it is a tensor (an `int` for dynamic layers, unchanged)."
        ),
        behaviour_changes=(
            "Inkling with a static cache: the queries of a forward continuing the cache are placed right.",
        ),
    ),
    Step(
        "step10_mtp",
        "10-mtp",
        "Keep the working size of the MTP cache's conv states",
        tests=("MTPCandidateGeneratorCacheSizeTest",),
        summary=(
            "`MTPCandidateGenerator` makes its `MtpCache` record its past, so that it can be rolled back, and a "
            "recording linear attention layer keeps every conv column until a crop. But the generator only crops it in "
            "the rounds that re-feed tokens (several MTP layers, few drafts accepted): with one MTP layer (Inkling's, "
            "conv states only) the conv states grow by a column per generated token, for the whole generation.\n\n"
            + MTP_REPRODUCTION
            + "\n\nThe other rounds now `crop(0)` the MTP cache (no token removed), which brings its conv states back "
            "to their working size; the tokens are unchanged."
        ),
        behaviour_changes=("The MTP cache's conv states no longer grow with the generation (memory).",),
    ),
    Step(
        "step11_bailing",
        "11-bailing",
        "Name the types of Bailing-hybrid's MTP layers",
        tests=("BailingHybridMtpConfigTest",),
        summary=(
            "`generate(use_mtp=True)` builds the MTP layers from `config.get_mtp_config()`, which refuses a config "
            "that has `layer_types` but no `mtp_layer_types` (and the same for `mlp_layer_types`) as ambiguous. Every "
            "Bailing-hybrid config has `layer_types` and `mlp_layer_types` and no MTP counterparts, so `use_mtp=True` "
            "raised a `ValueError` for every checkpoint, although the model registers its MTP layers "
            "(`num_mtp_layers`, their weights ignored on load for `MtpModel` to find).\n\n"
            + BAILING_MTP_REPRODUCTION
            + "\n\nThe MTP layers are MLA attention and routed-experts layers (as in the original Ling modeling "
            "code); `__post_init__` now sets these defaults, and a config that names its own keeps them."
        ),
        behaviour_changes=(
            "Bailing-hybrid configs carry `mtp_layer_types` and `mtp_mlp_layer_types` (`generate(use_mtp=True)` "
            "builds the MTP layers instead of raising).",
        ),
    ),
    Step(
        "step12_refeed",
        "12-refeed",
        "Re-feed only the tokens the MTP layers have seen",
        tests=("MTPCandidateGeneratorShortPromptTest",),
        summary=(
            "With several MTP layers, a round that accepted fewer than `num_mtp_layers - 1` drafts crops the last "
            "`num_mtp_layers` tokens from the MTP cache and feeds them again with their hidden states. After a prompt "
            "shorter than that, the MTP layers have seen fewer tokens: the slices then take more input ids than hidden "
            "states, and `generate(use_mtp=True)` raises in `torch.cat` (a one-token prompt with two MTP layers).\n\n"
            + REFEED_REPRODUCTION
            + "\n\nThe generator now re-feeds the tokens the MTP layers saw, at most `num_mtp_layers`; the other "
            "rounds are unchanged."
        ),
        behaviour_changes=("`use_mtp=True` with several MTP layers works after a prompt shorter than them.",),
    ),
    Step(
        "step13_continue",
        "13-continue",
        "Continue a cache that already holds tokens in assisted decoding",
        tests=("AssistedDecodingContinuedCacheTest",),
        summary=(
            "`_prefill` feeds the tokens a cache does not hold yet, but assisted decoding does not use it: its first "
            "verification forward fed the whole sequence whatever the cache held. Continuing a cache with a drafter "
            "(a second turn that passes the first turn's cache back, a prefix cache) then appended the cached tokens "
            "to the cache again: the model attended to each of them twice.\n\n"
            + CONTINUE_REPRODUCTION
            + "\n\nThe first forward now feeds the tokens after the cached ones, as `_prefill` does (a cache that holds "
            "nothing still gets them all)."
        ),
        behaviour_changes=(
            "Assisted decoding over a cache that holds tokens feeds only the others (it fed the cached ones again).",
        ),
    ),
    Step(
        "step14_recording",
        "14-recording",
        "Stop recording the past of the cache that assisted decoding returns",
        tests=("AssistedDecodingReturnedCacheTest",),
        summary=(
            "Assisted decoding turns on the past recording of the main cache (linear attention layers then keep every "
            "conv column and the per-token states, sliding windows every token, until a `crop`) and never turned it "
            "off: the cache it returns, or the caller's own, kept recording, and a later `generate` that continues it "
            "kept a conv column per token (plain decoding never crops) and left the compileable path.\n\n"
            + RECORDING_REPRODUCTION
            + "\n\nIt now stops recording before it returns, as `DeferredStopCheck.finish` does (the last round's "
            "`crop` already brought the states back to their working size)."
        ),
        behaviour_changes=("The cache that assisted decoding leaves behind no longer records its past.",),
    ),
    Step(
        "step15_stop_strings",
        "15-stop-strings",
        "Support stop strings in assisted decoding",
        tests=("AssistedDecodingStopStringsTest",),
        summary=(
            "`AssistedCandidateGenerator` gives the assistant's `generate` a copy of the main generation config, "
            "`stop_strings` included, but not the tokenizer that stop strings need: assisted decoding with "
            "`stop_strings` raised a `ValueError` before the first draft.\n\n"
            + STOP_STRINGS_REPRODUCTION
            + "\n\nThe assistant now drafts without them; the main model's stopping criteria check them on the "
            "verified tokens. They run once per round on the whole sequence, and a stop string is only looked for at "
            "its end: the accepted tokens of a round are now cut after the first stop string among them, as they are "
            "after an end-of-sequence token (its test accepts every draft: the generation went on past the stop "
            "string with the first change alone)."
        ),
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
        summary=(
            "`mamba_scan_forward` runs the tokens of a forward that it does not record through the selective scan, "
            "which starts from zeros (the TODO above it says so: neither the torch scan nor `selective_scan_fn` takes "
            "a starting state). A forward of several tokens over a cache that holds a state (a chunked prefill, a "
            "second turn, a prefix cache) then computed its outputs, and the state it cached, as if the cached tokens "
            "had never been seen.\n\n"
            + MAMBA_SCAN_REPRODUCTION
            + "\n\nThose tokens now go through the recurrent form, which starts from the cached state (the path of "
            "single-token decoding and of recorded tokens); a forward over an empty cache still uses the scan. The "
            "function is Mamba's, copied into FalconMamba and Jamba by the modular converter."
        ),
        behaviour_changes=(
            "A multi-token forward of Mamba, FalconMamba and Jamba over a non-empty cache continues its state "
            "(token by token) instead of restarting from zeros.",
        ),
    ),
    Step(
        "step17_exact",
        "17-fork-exact",
        "Roll linear attention layers back exactly, or refuse before anything changes",
        tests=("LinearAttentionHistoryTest", "GrowingScheduleAssistedDecodingTest"),
        summary=(
            "5.25 rolls linear attention layers back through the per-token states the models hand over "
            "(`recurrent_states_to_keep`), but restores the wrong one when a forward has more tokens than that "
            "number: the history then starts with the state from *before* the forward, so `crop(-N)` restores it. "
            "Assisted decoding verifies `N + 1` tokens with `N` states, so a round that rejects every draft continues "
            "from a state that misses the last accepted token (on the first round, an all-zero state).\n\n"
            + HISTORY_REPRODUCTION
            + "\n\nWith this PR that crop raises a `ValueError` (the state after the first token was never handed "
            "over) and assisted decoding records `N + 1` states, so that it restores `tensor([[1.]])`. A recording layer counts the tokens of each forward on the host (no device sync; "
            "not while it does not record, so that a compiled forward is not recompiled every step) and keeps the state from "
            "before it only when it is adjacent to the per-token states; the history holds at most "
            "`recurrent_states_to_keep` states per state (one list each), is cleared by `reset` and restored in "
            "place. `crop` clamps, and refuses before anything changes what it cannot undo (`Cache.crop` asks every "
            "layer first; a cache of plain `DynamicLayer`s, which never refuse, is cut directly, so that the check "
            "costs the common case nothing). Assisted decoding records `candidate_length + 1` states each round, and the assistant "
            "its drafts (the heuristic schedule outgrew the first round's count: `IndexError`). "
            "State-level evidence: assisted decoding and prompt lookup with tiny hybrid and SSM main models of 14 "
            "families (6 modes each), every cache layer compared after every round with a fresh forward over the "
            "kept tokens: 69 of 86 cases fail on 5.25.0 (46 wrong states with the right tokens, 8 wrong tokens, 15 "
            "`IndexError`s), none with this PR."
        ),
        behaviour_changes=(
            "Linear attention layers restore the state after the kept tokens, or raise a `ValueError` before anything "
            "changes; removing every token resets them.",
            "The static sliding-window hybrid layer refuses a crop its window cannot undo.",
            "`activate_past_recording()` without `recurrent_states_to_keep` keeps the number set before (1 if none); "
            "with `None` the next Qwen3-Next forward raised a `TypeError`.",
        ),
        kind="fork",
    ),
    Step(
        "step18_refuse",
        "18-fork-refuse",
        "Refuse `crop` on attention layers that cannot put their states back",
        tests=(
            "RefusedCropTest",
            "EncoderDecoderCacheCropTest",
            "UnlimitedOcrStaticRefusedCropTest",
            "UnlimitedOcrDynamicCropCheckTest",
            "SlidingWindowAssistantTest",
        ),
        summary=(
            "A crop must leave a layer as if it had only seen the kept tokens, or refuse before anything changes. Three "
            "attention layers silently keep other tokens instead: a recording `DynamicSlidingWindowLayer` after "
            "`crop(0)` (which `generate` calls after every forward) trimmed its window, so a following `crop(-1)` "
            "keeps one token too few; a `StaticSlidingWindowLayer` may have overwritten the states to restore when its "
            "`max_cache_len` exceeds its window (its own `is_croppable` says so, but `crop` did not check) or when it "
            "saw more tokens than its window (a cache of sliding layers only, where `is_croppable` stays `True`); and the "
            "quantized layers cut only their residual part.\n\n"
            + REFUSE_REPRODUCTION
            + "\n\nThey now raise a `ValueError` that says what can be "
            "removed instead, and `Cache.crop` asks every layer before cropping any. Removing every token is always "
            "possible on the sliding windows. (`EncoderDecoderCacheCropTest` pins that `crop`, `crop(0)` included, "
            "touches only the self-attention part of an encoder-decoder cache.)"
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
        "step19_deepseek",
        "19-fork-deepseek",
        "Refuse partial `crop` on DeepSeek-V4's compressed-attention caches, and assistants whose cache cannot be cropped",
        tests=("DeepseekV4CacheCropTest",),
        summary=(
            "`DeepseekV4HCACache` and `DeepseekV4CSACache` say they cannot be cropped (`is_croppable = False`), but "
            "`crop(-k)` cut their sliding window and kept the compressor buffers and compressed entries of the removed "
            "tokens: the next forward compressed stale states. `generate` crops them as an assistant's cache after "
            "every round (5.25.0 then fails with a `RuntimeError`).\n\n"
            + DEEPSEEK_REPRODUCTION
            + "\n\nA partial crop now raises a `ValueError` before anything changes, removing every token resets the "
            "layer (it emptied only the window), and assisted decoding refuses an assistant whose cache cannot be cropped "
            "once its cache exists (after its first drafts, before the main model verifies them), as it refuses such a "
            "main model (a one-statement change of `get_candidates`)."
        ),
        behaviour_changes=(
            "Partial crops of DeepSeek-V4's caches raise; full rollbacks reset them. Assisted decoding with an "
            "assistant whose cache cannot be cropped (DeepSeek-V4) raises a `ValueError` after its first drafts (it "
            "failed with a `RuntimeError` in the second round).",
        ),
        kind="fork",
    ),
    Step(
        "step20_edges",
        "20-fork-edges",
        "Crop dynamic layers without tokens yet, and removals beyond 64 bits",
        tests=("CropEdgesTest", "MiniMaxM3VLSparseCacheCropEdgesTest"),
        summary=(
            "Two edges of `DynamicLayer.crop` that `generate` does not reach: a layer initialized without any token "
            "(the empty 1-D states `early_initialization` leaves, as for `torch.export`) raised an `IndexError`, and a "
            "removal beyond 64 bits emptied the layer with the warning of a truncated slice bound. Both now empty the "
            "layer quietly; the usual crop pays nothing for it (the `IndexError` is caught, not checked for)."
        ),
        behaviour_changes=(
            "Cropping a dynamic layer initialized without tokens (`early_initialization`) does nothing (it raised an "
            "`IndexError`).",
        ),
        kind="fork",
    ),
    Step(
        "step21_mtp_linear",
        "21-fork-mtp-linear",
        "Build MTP layers of linear attention, and roll them back exactly",
        tests=("MTPLinearAttentionLayersTest",),
        summary=(
            "No 5.25 checkpoint has MTP layers of linear attention (Inkling's have convolutions only, Bailing-hybrid's "
            'are MLA attention), but a config may name them (`mtp_layer_types=["linear_attention"]`), and then '
            "`generate(use_mtp=True)` fails or keeps wrong states: `MtpModel` takes its norm class from the first "
            "module named like a norm in the main model's last layer, the gated output norm when that layer is linear "
            "attention (called without its gate: `AttributeError` in the first MTP forward); `MtpLayer.forward` "
            "requires an `attention_mask`, of which a linear attention layer's masks have none (`TypeError`); and the "
            "generator's `MtpCache` records `num_mtp_layers` states per forward, one fewer than removing a re-fed "
            "chain may need, so that with several MTP layers 5.25.0 restores a wrong state (and steps 1-20 refuse the "
            "crop).\n\n"
            "The norm class is that of a norm of the decoder layer itself, masks without an attention mask pass "
            "`attention_mask=None`, and the MTP cache records `num_mtp_layers + 1` states (attention layers keep no "
            "states: nothing changes for them)."
        ),
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
    "transformers.cache_utils.StaticSlidingWindowLayer.crop": frozenset({"08845cd2cd669ff7"}),
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
