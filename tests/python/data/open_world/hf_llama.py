# A Hugging Face Llama (RMSNorm, RoPE, GQA, SwiGLU) from a small config, token ids in. The init input names the
# weights' dtype (tests write a bfloat16 copy: its RMSNorms cast to fp32 and back around the norm, and torch.export
# checks each cast's input); the rotary frequencies stay fp32, as from_pretrained leaves them.
import torch
import transformers


class Model(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128,
                                          max_position_embeddings=64, use_cache=False, attn_implementation="sdpa")
        self.lm = transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))

    def forward(self, input_ids):
        return self.lm(input_ids).logits


def get_inputs():
    return [torch.randint(0, 128, (2, 16))]


def get_init_inputs():
    return ["float32"]
