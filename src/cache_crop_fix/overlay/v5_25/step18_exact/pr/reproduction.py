import torch

from transformers.cache_utils import LinearAttentionLayer


layer = LinearAttentionLayer()
layer.activate_past_recording(recurrent_states_to_keep=2)  # assisted decoding: N = 2 drafts
layer.update_conv_state(torch.zeros(1, 1, 3), conv_kernel_size=2)  # a forward of 3 tokens
layer.update_recurrent_state([torch.full((1, 1), 2.0), torch.full((1, 1), 3.0)])  # the states after its last N
layer.crop(-2)  # all drafts rejected: the state after the first token is needed
print(layer.recurrent_states[0])  # 5.25.0: tensor([[0.]]) (from before the forward). With this PR: ValueError
