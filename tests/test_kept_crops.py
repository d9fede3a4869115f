"""What the fix keeps from upstream at the edges of its rules (each passes on stock transformers too, so it is a project
test, not an exported one): a sliding window layer one token short of its window can still remove a token, an FP8
layer never updated has nothing to crop, and UnlimitedOcr's static layer is not croppable while its prefill is shorter
than the room kept for it; `reset` of a linear attention layer without a history zeroes its states in place, and its
updates without recording keep their addresses; an assistant that builds its own cache (MiniMax) is left to it."""

import pytest
import torch

from .compat import TARGET


pytestmark = pytest.mark.skipif(TARGET.name == "v5_14", reason="layers of transformers 5.24 and later")

WINDOW = 4


def _tokens(start, length):
    return torch.arange(start + 1, start + length + 1, dtype=torch.float64).reshape(1, 1, length, 1)


def test_sliding_window_layer_short_of_its_window_is_croppable():
    from transformers.cache_utils import DynamicSlidingWindowLayer

    layer = DynamicSlidingWindowLayer(sliding_window=WINDOW)
    for position in range(WINDOW - 1):
        layer.update(_tokens(position, 1), _tokens(position, 1))
    assert layer.is_croppable
    layer.crop(-1)
    assert layer.get_seq_length() == WINDOW - 2
    assert torch.equal(layer.keys, _tokens(0, WINDOW - 2))


@pytest.mark.parametrize("tokens_to_remove", [0, -1])
def test_fp8_layer_never_updated(tokens_to_remove):
    from transformers.cache_utils import Fp8QuantizedLayer

    layer = Fp8QuantizedLayer()
    layer.crop(tokens_to_remove)
    assert layer.get_seq_length() == 0


def test_unlimited_ocr_static_layer_with_a_short_prefill_is_not_croppable():
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrStaticReferenceSlidingWindowLayer

    # 3 prefill slots, of which a prefill of 2 fills only 2
    layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=7, sliding_window=WINDOW)
    layer.update(_tokens(0, 2), _tokens(0, 2))
    assert layer.is_croppable is False


def test_linear_attention_layer_reset_zeroes_its_states_in_place():
    # Without a history, `reset` keeps the states' static addresses, as upstream
    from transformers.cache_utils import LinearAttentionLayer

    layer = LinearAttentionLayer()
    layer.update_conv_state(torch.ones(1, 2, 3, dtype=torch.float64), conv_kernel_size=2)
    layer.update_recurrent_state(torch.ones(1, 2, 3, dtype=torch.float64))
    conv_states, recurrent_states = layer.conv_states[0], layer.recurrent_states[0]
    layer.reset()
    assert layer.conv_states[0] is conv_states and layer.recurrent_states[0] is recurrent_states
    assert not conv_states.any() and not recurrent_states.any()


def test_linear_attention_layer_updates_without_recording_keep_the_states_addresses():
    # Static addresses, as upstream: the conv states are copied in place, the cached recurrent states are returned
    from transformers.cache_utils import LinearAttentionLayer

    layer = LinearAttentionLayer()
    layer.update_conv_state(torch.ones(1, 2, 3, dtype=torch.float64), conv_kernel_size=2)
    layer.update_recurrent_state(torch.ones(1, 2, 3, dtype=torch.float64))
    conv_states, recurrent_states = layer.conv_states[0], layer.recurrent_states[0]
    layer.update_conv_state(torch.full((1, 2, 1), 2.0, dtype=torch.float64), conv_kernel_size=2)
    assert layer.conv_states[0] is conv_states and conv_states[..., -1].tolist() == [[2.0, 2.0]]
    assert layer.update_recurrent_state(torch.zeros(1, 2, 3, dtype=torch.float64)) is recurrent_states


@pytest.mark.skipif(
    TARGET.name != "v5_24",
    reason="5.25's assisted decoding crops a MiniMaxCache, which refuses: stock and fixed alike",
)
def test_assistant_that_prepares_its_own_cache_matches_greedy():
    # MiniMax (linear attention) builds its own cache in `forward` (`generate` prepares none for it): as an assistant
    # its cache is left to the model, and assisted decoding matches greedy decoding
    from transformers import LlamaConfig, LlamaForCausalLM, MiniMaxConfig, MiniMaxForCausalLM

    torch.manual_seed(0)
    common = {"vocab_size": 32, "hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2}
    common.update(num_key_value_heads=1, head_dim=8, pad_token_id=0, bos_token_id=None, eos_token_id=None)
    main_model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **common)).eval()
    assistant_config = MiniMaxConfig(
        num_hidden_layers=2, layer_types=["linear_attention", "full_attention"], num_local_experts=2, **common
    )
    assistant = MiniMaxForCausalLM(assistant_config).eval()
    assert not assistant._supports_default_dynamic_cache()
    input_ids = torch.tensor([[5, 6, 7, 8]])
    greedy = main_model.generate(input_ids, max_new_tokens=6, do_sample=False)
    assisted = main_model.generate(input_ids, max_new_tokens=6, do_sample=False, assistant_model=assistant)
    assert assisted.tolist() == greedy.tolist()
