"""The agent's PyTorch boundary: the verification harness for generated kernels."""
