"""Writes the KernelBench-style models that bench/scripts/fused_ops_h100.sh tunes for the residual add + norm
rules (add_layer_norm, add_rms_norm) when asked for the problem "add_norm".

In the MiniGPT and Llama-3 blocks the residual add before the second norm is fed by a Linear, so the plan gives it
to the GEMM + residual epilogue and the add-norm op is never tuned there. These models are that step alone, at the
blocks' shapes, in pre-norm form: h = x + y is returned beside norm(h), so the op must write both (store_sum).
Odd row counts and widths (scalar accesses, a ragged last CTA) check the same op off the happy path; the level2
problems cover the form where the norm is the sum's only reader.

Usage: python3 bench/scripts/add_norm_models.py OUT_DIR   (prints the written files, one per line)
"""
from __future__ import annotations

import sys
from pathlib import Path

# name -> (norm, batch, seq, hidden, eps); the sum is returned by every model.
SHAPES = {
    "minigpt_add_layer_norm": ("layer_norm", 128, 512, 768, 1e-5),     # MiniGPT block: B=128, T=512, C=768
    "llama3_add_rms_norm": ("rms_norm", 2, 2048, 4096, 1e-5),          # Llama-3 block: B=2, T=2048, hidden 4096
    "odd_add_layer_norm": ("layer_norm", 5, 331, 771, 1e-5),           # 1655 rows of 771: scalar loads
    "odd_add_rms_norm": ("rms_norm", 7, 129, 1001, 1e-6),              # 903 rows of 1001
}

LAYER_NORM = '''
class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps={eps})

    def forward(self, x, y):
        h = x + y
        return h, self.norm(h)
'''

RMS_NORM = '''
class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))

    def forward(self, x, y):
        h = x + y
        return h, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + {eps}) * self.weight
'''


def model_source(name: str) -> str:
    kind, batch, seq, hidden, eps = SHAPES[name]
    body = (LAYER_NORM if kind == "layer_norm" else RMS_NORM).format(eps=eps)
    return (f'"""Residual add then {kind} over the last dim, the sum returned too: ({batch}, {seq}, {hidden}), '
            f'float32 (written by bench/scripts/add_norm_models.py)."""\n'
            "import torch\nimport torch.nn as nn\n"
            f"{body}\n\n"
            f"def get_inputs():\n    return [torch.randn({batch}, {seq}, {hidden}), torch.randn({batch}, {seq}, {hidden})]\n\n\n"
            f"def get_init_inputs():\n    return [{hidden}]\n")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in SHAPES:
        path = out / f"{name}.py"
        path.write_text(model_source(name))
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
