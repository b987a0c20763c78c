# GPT-2 as `from_config` gives it: use_cache=True returns a DynamicCache, which torch.export cannot flatten.
import torch
import transformers


class Model(torch.nn.Module):
    def __init__(self, use_cache):
        super().__init__()
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32,
                                         bos_token_id=0, eos_token_id=0, use_cache=use_cache)
        self.lm = transformers.GPT2LMHeadModel(config)

    def forward(self, input_ids):
        return self.lm(input_ids)


def get_inputs():
    return [torch.randint(0, 128, (2, 16))]


def get_init_inputs():
    return [True]
