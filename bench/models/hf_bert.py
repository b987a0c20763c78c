"""A Hugging Face BERT encoder at BERT-base's width (768, 12 heads, 3072 MLP) with 4 layers, from a config with
random weights (no download), fed a padding mask as a tokenizer makes it for a batch of unequal sentences: token ids
and attention_mask in, the last hidden state out. Every layer's scaled_dot_product_attention carries the padding mask
(boolean, [batch, 1, seq, seq]). Dropout is 0: an inference model, the same in train() and eval()."""
import torch
import transformers

BATCH, SEQ_LEN = 32, 256
LAYERS, HIDDEN, HEADS, INTERMEDIATE = 4, 768, 12, 3072
DTYPE = "float32"  # the weights' dtype (bfloat16 or float16 makes FACT's numerics those)


class Model(torch.nn.Module):
    def __init__(self, num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, dtype):
        super().__init__()
        config = transformers.BertConfig(num_hidden_layers=num_hidden_layers, hidden_size=hidden_size,
                                         num_attention_heads=num_attention_heads, intermediate_size=intermediate_size,
                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                         attn_implementation="sdpa")
        self.bert = transformers.BertModel(config, add_pooling_layer=False).to(getattr(torch, dtype))

    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def get_inputs():
    # Sentences of random lengths, padded to SEQ_LEN: keys past each one's length are masked.
    lengths = torch.randint(SEQ_LEN // 4, SEQ_LEN + 1, (BATCH,))
    attention_mask = (torch.arange(SEQ_LEN)[None, :] < lengths[:, None]).long()
    return [torch.randint(0, 30522, (BATCH, SEQ_LEN)), attention_mask]


def get_init_inputs():
    return [LAYERS, HIDDEN, HEADS, INTERMEDIATE, DTYPE]
