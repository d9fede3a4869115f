import os
import tempfile

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
    eos_token_id=None,  # generate every token
)  # fmt: skip
model = InklingForCausalLM(config)
weights = {**model.state_dict(), **MtpModel(model, 1).layers.state_dict(prefix="model.mtp.layers.")}
with tempfile.TemporaryDirectory() as checkpoint:  # a checkpoint with MTP weights
    model.save_pretrained(checkpoint)
    save_file(
        {name: tensor.contiguous() for name, tensor in weights.items()}, os.path.join(checkpoint, "model.safetensors")
    )
    model = InklingForCausalLM.from_pretrained(checkpoint, use_kernels=False)
    generators, init = [], MTPCandidateGenerator.__init__  # to see the MTP cache
    MTPCandidateGenerator.__init__ = lambda self, *args, **kw: (init(self, *args, **kw), generators.append(self))[0]
    model.generate(torch.tensor([[1, 5, 2, 3, 7]]), use_mtp=True, do_sample=False, max_new_tokens=40)
print(max(state.shape[-1] for state in generators[0].mtp_cache.layers[0].conv_states.values()))  # conv columns
# 5.25.0: 43 (one per token). With this PR: 5
