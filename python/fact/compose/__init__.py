"""Stage 3 on the Python side: CPU reference implementations of the composed module's FACT ops."""
