"""FACT's Python side: loading KernelBench-format problems and tracing them to FACT IR (`python -m fact.trace`)."""
