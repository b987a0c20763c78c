# An LSTM whose forward draws its initial state from torch.randn (as KernelBench level3/35 does): float32 tensors
# made inside forward, so the float64 reference cannot run it.
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.lstm = nn.LSTM(8, 16, batch_first=True); self.fc = nn.Linear(16, 4)
    def forward(self, x):
        h0 = torch.randn(1, x.size(0), 16, device=x.device); c0 = torch.randn(1, x.size(0), 16, device=x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])
def get_inputs(): return [torch.randn(4, 5, 8)]
def get_init_inputs(): return []
