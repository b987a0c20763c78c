"""The measurement cases of the kernel families besides GEMM, by the name `fact tune` sends as
request.family (the C++ KernelFamily::name()). Each case module defines parse_problem and a Case class."""
from __future__ import annotations

from . import attention_case, norm_case, rope_case, rowwise_case

CASES = {
    "normalization": (norm_case.parse_problem, norm_case.NormCase),
    "attention": (attention_case.parse_problem, attention_case.AttentionCase),
    "rope": (rope_case.parse_problem, rope_case.RopeCase),
    "rowwise": (rowwise_case.parse_problem, rowwise_case.RowwiseCase),
}
FAMILIES = ("gemm",) + tuple(CASES)


def parse_family_problem(family: str, obj, where: str):
    """The family's problem; raises problem_fields.ProblemError (a ValueError) naming the field."""
    return CASES[family][0](obj, where)


def case_for(family: str, problem):
    return CASES[family][1](problem)
