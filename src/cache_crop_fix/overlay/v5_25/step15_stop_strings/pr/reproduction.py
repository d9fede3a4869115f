import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast


tokenizer = Tokenizer(
    models.BPE({character: i for i, character in enumerate("abcdefghijklmnopqrstuvwxyz\u0120.,!?")}, [])
)
tokenizer.pre_tokenizer, tokenizer.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="a")  # one token per character
torch.manual_seed(0)
tiny = {"vocab_size": 32, "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 2, "num_hidden_layers": 1}
model, assistant = LlamaForCausalLM(LlamaConfig(**tiny)), LlamaForCausalLM(LlamaConfig(**tiny))
output = model.generate(
    tokenizer("hello", return_tensors="pt").input_ids, assistant_model=assistant, stop_strings="j", tokenizer=tokenizer
)
print(tokenizer.decode(output[0]))  # 5.25.0: ValueError (we could not locate a tokenizer). With this PR: hellotj
