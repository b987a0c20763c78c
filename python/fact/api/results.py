"""What fact.optimize and fact.explain give back besides the module: the run's report and the plan, as dicts (the
JSON files the CLI writes) that print as their Markdown / table text, also in a notebook."""
from __future__ import annotations

import json
from pathlib import Path


class Report(dict):
    """report.json of a `fact optimize` run (patterns with their verdicts, end-to-end check and times, numerics,
    steps), printed as its report.md. `folder` holds the whole run (plan, logs, composed module)."""

    def __init__(self, data: dict, markdown: str = "", folder: Path | None = None):
        super().__init__(data)
        self.markdown = markdown
        self.folder = folder

    @classmethod
    def load(cls, folder: Path) -> "Report":
        md = folder / "report.md"
        return cls(json.loads((folder / "report.json").read_text()), md.read_text() if md.is_file() else "", folder)

    @classmethod
    def left_to_pytorch(cls, why: str) -> "Report":
        """A module FACT could not take at all: every op stays PyTorch's."""
        return cls({"format": "fact-optimize-report", "left_to_pytorch": why, "patterns": []},
                   f"# FACT report\n\nThe whole module stays PyTorch's: {why}\n")

    @property
    def fact_ops(self) -> list[str]:
        """The FACT ops the optimized module runs."""
        return [p.get("op", "") for p in self.get("patterns", []) if p.get("accepted")]

    def __str__(self) -> str:
        return self.markdown or json.dumps(dict(self), indent=1)

    def _repr_markdown_(self) -> str:
        return str(self)


class Plan(dict):
    """plan.json of `fact discover` (the matched patterns ranked by the cost model, what stays PyTorch's), printed
    as the plan table `fact discover` prints. Needs no GPU."""

    def __init__(self, data: dict, table: str = ""):
        super().__init__(data)
        self.table = table

    @property
    def patterns(self) -> list[dict]:
        return self.get("patterns", [])

    def __str__(self) -> str:
        return self.table or json.dumps(dict(self), indent=1)

    def _repr_markdown_(self) -> str:
        return "```\n" + str(self) + "\n```"
