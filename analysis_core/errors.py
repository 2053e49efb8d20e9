"""Typed errors users can hit. Each message names the file, the problem and the fix."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: the CLI exits 2 with this message; the dashboard shows it on the page."""

    def __init__(self, source: str, problem: str, fix: str) -> None:
        self.source = source
        self.problem = problem
        self.fix = fix
        super().__init__(f"{source}: {problem} Fix: {fix}")
