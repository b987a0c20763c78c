"""The pipeline's console lines while fact.optimize runs: a tqdm bar over its five stages when tqdm is installed
(else the stage lines on stderr); verbose shows every line the CLI would print."""
from __future__ import annotations

import re
import sys

STAGE = re.compile(r"^\[(\d)/5\] (.*)")


class Progress:
    def __init__(self, title: str, verbose: bool = False, enabled: bool = True):
        self.verbose, self.enabled, self.lines = verbose, enabled, []
        self.bar = None
        if enabled and not verbose:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=5, desc=title, unit="stage", leave=True)
            except ImportError:
                pass

    def out_line(self, line: str) -> None:
        self.lines.append(line)
        if self.verbose:
            sys.stdout.write(line)

    def log_line(self, line: str) -> None:
        self.lines.append(line)
        stage = STAGE.match(line)
        if self.verbose or (stage and self.enabled and self.bar is None):
            sys.stderr.write(line)
        elif stage and self.bar is not None:
            self.bar.n = int(stage.group(1)) - 1
            self.bar.set_postfix_str(stage.group(2).split(":")[0])

    def failures(self) -> str:
        """The lines the pipeline printed about failed steps ("  failed; see LOG" and the message), for errors."""
        lines = [line for i, line in enumerate(self.lines)
                 if line.startswith("  failed; see ") or (i and self.lines[i - 1].startswith("  failed; see "))]
        return ("\n" + "".join(lines).rstrip()) if lines else ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            if exc[0] is None:
                self.bar.n = self.bar.total
            self.bar.close()
        return False
