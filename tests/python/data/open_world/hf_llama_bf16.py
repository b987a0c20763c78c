# A Hugging Face Llama in bf16 (weights made in bf16, rotary frequencies left fp32 as from_pretrained leaves them):
# its RMSNorms cast to fp32 and back around the norm, and torch.export checks each cast's input.
import torch
import transformers


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128,
                                          max_position_embeddings=64, use_cache=False, attn_implementation="sdpa")
        self.lm = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)

    def forward(self, input_ids):
        return self.lm(input_ids).logits


def get_inputs():
    return [torch.randint(0, 128, (2, 16))]


def get_init_inputs():
    return []
