from unittest import mock

import torch

from transformers import InklingForCausalLM, InklingTextConfig
from transformers.modeling_layers import MtpModel


torch.manual_seed(0)
config = InklingTextConfig(
    vocab_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=8, sliding_window_size=16, d_rel=4, rel_extent=32,
    intermediate_size=64, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, num_mtp_layers=2,
    eos_token_id=None,  # generate every token
)  # fmt: skip
model = InklingForCausalLM(config)
random_mtp_layers = classmethod(lambda cls, main_model, **kwargs: cls(main_model, 2))  # no checkpoint needed
with mock.patch.object(MtpModel, "from_pretrained", random_mtp_layers):
    output = model.generate(torch.tensor([[5]]), use_mtp=True, do_sample=False, max_new_tokens=10)
print(output.shape[1])  # 5.25.0: RuntimeError. With this PR: 11
