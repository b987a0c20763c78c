"""Realize, Python side: loading candidate kernels through the C ABI and measuring them (verify + time).

The C++ tuner (`fact tune`) runs `python -m fact.realize.measure REQUEST.json -o RESULT.json`.
"""
