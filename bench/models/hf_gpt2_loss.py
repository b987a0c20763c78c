"""A Hugging Face GPT-2 language-model loss, in KernelBench's format: GPT-2 small's width (768, 12 heads, 3072 MLP)
with 2 layers, from a config with random weights (no download); token ids in, the next-token cross entropy out
(`labels=input_ids`: Hugging Face shifts them, pads with -100 and averages over the kept targets). Its loss is
log_softmax, a gather of each target's log probability and a masked mean over rows of 50257 logits."""
import torch
import transformers

BATCH, SEQ_LEN = 4, 256


class Model(torch.nn.Module):
    def __init__(self, n_layer, n_embd, n_head):
        super().__init__()
        config = transformers.GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=1024,
                                         use_cache=False)
        self.lm = transformers.GPT2LMHeadModel(config)

    def forward(self, input_ids):
        return self.lm(input_ids, labels=input_ids).loss


def get_inputs():
    return [torch.randint(0, 50257, (BATCH, SEQ_LEN))]


def get_init_inputs():
    return [2, 768, 12]
