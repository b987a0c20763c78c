"""A model of the Python entry points' benchmark (bench/scripts/python_api_h100.sh), in KernelBench's format so the
CLI runs it too: a Hugging Face GPT-2 at GPT-2 small's width (768, 12 heads, 3072 MLP) with 4 layers, from a config
with random weights (no download): token ids in, a CausalLMOutputWithCrossAttentions out (logits over 50257)."""
import torch
import transformers

BATCH, SEQ_LEN = 8, 512


class Model(torch.nn.Module):
    def __init__(self, n_layer, n_embd, n_head):
        super().__init__()
        config = transformers.GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=1024,
                                         use_cache=False)
        self.lm = transformers.GPT2LMHeadModel(config)

    def forward(self, input_ids):
        return self.lm(input_ids)


def get_inputs():
    return [torch.randint(0, 50257, (BATCH, SEQ_LEN))]


def get_init_inputs():
    return [4, 768, 12]
