from unittest import mock

import torch

from transformers import InklingForCausalLM, InklingTextConfig
from transformers.generation.candidate_generator import MTPCandidateGenerator
from transformers.modeling_layers import MtpModel


def inkling(num_mtp_layers):
    config = InklingTextConfig(
        vocab_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=16, d_rel=4,
        rel_extent=32, intermediate_size=64, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2,
        num_mtp_layers=num_mtp_layers, eos_token_id=None,  # generate every token
    )  # fmt: skip
    return InklingForCausalLM(config)


def random_mtp_layers(cls, main_model, **kwargs):  # no checkpoint needed
    return cls(main_model, main_model.config.num_mtp_layers)


def keep_generator(self, *args, **kwargs):  # to see the MTP cache
    init(self, *args, **kwargs)
    generators.append(self)


torch.manual_seed(0)
generators, init = [], MTPCandidateGenerator.__init__
with mock.patch.object(MtpModel, "from_pretrained", classmethod(random_mtp_layers)):
    with mock.patch.object(MTPCandidateGenerator, "__init__", keep_generator):
        inkling(1).generate(torch.tensor([[1, 5, 2, 3, 7]]), use_mtp=True, do_sample=False, max_new_tokens=40)
    conv_states = generators[0].mtp_cache.layers[0].conv_states.values()
    print(max(state.shape[-1] for state in conv_states))  # 5.25.0: 43 (a column per token). With this PR: 5
    output = inkling(2).generate(torch.tensor([[5]]), use_mtp=True, do_sample=False, max_new_tokens=10)
    print(output.shape[1])  # 5.25.0: RuntimeError. With this PR: 11
