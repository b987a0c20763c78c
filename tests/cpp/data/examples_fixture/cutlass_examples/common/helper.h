// Shared helpers; not an example (no number), so not indexed. Mentions attention and gemm.
