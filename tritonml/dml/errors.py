"""How the descriptor layer reports mistakes: ``Problem`` (one broken rule, with the path of its
field) and ``DescriptorError`` (every problem found, raised at once)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union


@dataclass(frozen=True)
class Problem:
    """One broken rule: ``field`` is the path of the offending field (``input_tensor.sizes[1]``),
    ``rule`` says what the rule is and what was found."""
    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


class DescriptorError(ValueError):
    """An invalid descriptor, JSON document or buffer.

    ``field``: the path of the first broken field; ``problems``: every broken rule found (a list of
    ``Problem``); the message lists them all, one per line.
    """

    def __init__(self, problems: Union[Problem, Sequence[Problem]]):
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems = list(problems)
        if not self.problems:
            raise ValueError("DescriptorError needs at least one problem")
        self.field = self.problems[0].field
        self.rule = self.problems[0].rule
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(cls, path: str, rule: str) -> "DescriptorError":
        return cls(Problem(path, rule))


def join_path(prefix: str, path: str) -> str:
    """``prefix`` and ``path`` as one field path: ``input_tensor`` + ``sizes[1]`` gives
    ``input_tensor.sizes[1]``, ``axes`` + ``[0]`` gives ``axes[0]``."""
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"
