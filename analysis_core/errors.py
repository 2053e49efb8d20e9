"""Typed errors users can hit. Each message names the file, the problem and the fix."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: the CLI exits 2 with this message; the dashboard shows it on the page."""

    def __init__(self, source: str, problem: str, fix: str) -> None:
        self.source = source
        self.problem = problem
        self.fix = fix
        super().__init__(f"{source}: {problem} Fix: {fix}")


class ComputeError(RuntimeError):
    """The compute backend could not finish (cluster unreachable, workers lost, inconsistent
    workers). Nothing partial is returned: the CLI exits 3 with this message and writes nothing."""
