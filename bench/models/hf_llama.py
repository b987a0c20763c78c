"""A Hugging Face Llama (TinyLlama-1.1B's width: 2048 hidden, 16 heads of 128, GQA with 4 key/value heads, SwiGLU MLP
of 5632, RMSNorm, RoPE) with 4 layers, from a config with random weights (no download), in bf16 (which makes FACT's
numerics bf16): token ids in, the logits over 32000 out. Attention is SDPA with the causal mask; no KV cache."""
import torch
import transformers

BATCH, SEQ_LEN = 4, 1024
LAYERS, HIDDEN, HEADS, KV_HEADS, INTERMEDIATE, VOCAB = 4, 2048, 16, 4, 5632, 32000
DTYPE = "bfloat16"  # the weights' dtype; the rotary frequencies stay float32, as from_pretrained leaves them


class Model(torch.nn.Module):
    def __init__(self, num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, intermediate_size,
                 vocab_size, dtype):
        super().__init__()
        config = transformers.LlamaConfig(num_hidden_layers=num_hidden_layers, hidden_size=hidden_size,
                                          num_attention_heads=num_attention_heads,
                                          num_key_value_heads=num_key_value_heads,
                                          head_dim=hidden_size // num_attention_heads,
                                          intermediate_size=intermediate_size, vocab_size=vocab_size,
                                          max_position_embeddings=2048, rms_norm_eps=1e-5, use_cache=False,
                                          attn_implementation="sdpa")
        self.lm = transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))

    def forward(self, input_ids):
        return self.lm(input_ids).logits


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ_LEN))]


def get_init_inputs():
    return [LAYERS, HIDDEN, HEADS, KV_HEADS, INTERMEDIATE, VOCAB, DTYPE]
