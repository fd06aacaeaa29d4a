"""How the descriptor layer reports mistakes: ``Problem`` (one broken rule, with the path of its
field) and ``DescriptorError`` (every problem found, raised at once)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Union


@dataclass(frozen=True)
class Problem:
    """One broken rule of a descriptor, a JSON document or a buffer.

    ``str(problem)`` is ``"field: rule"``; ``validate`` returns a list of them, and a
    ``DescriptorError`` carries them.

    Attributes:
        field: The path of the offending field (``input_tensor.sizes[1]``).
        rule: What the rule is and what was found.

    Example:
        >>> from tritonml.dml import Problem
        >>> print(Problem("input_tensor.sizes[1]", "every size must be at least 1, got 0"))
        input_tensor.sizes[1]: every size must be at least 1, got 0
    """
    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


class DescriptorError(ValueError):
    """An invalid descriptor, JSON document or buffer.

    A ``ValueError``; the message lists every problem, one per line (``"field: rule"``).

    Args:
        problems: One ``Problem``, or every problem found (at least one).

    Raises:
        ValueError: ``problems`` is empty.

    Attributes:
        problems: Every broken rule found (a list of ``Problem``).
        field: The path of the first broken field.
        rule: The first problem's rule.

    Example:
        >>> from tritonml.dml import DescriptorError, Problem
        >>> error = DescriptorError([Problem("axis", "got 5"), Problem("axes[0]", "got -1")])
        >>> error.field
        'axis'
        >>> print(error)
        axis: got 5
        axes[0]: got -1
    """

    problems: List[Problem]
    field: str
    rule: str

    def __init__(self, problems: Union[Problem, Sequence[Problem]]) -> None:
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
        """The error of one problem: ``rule`` broken at ``path``."""
        return cls(Problem(path, rule))


def join_path(prefix: str, path: str) -> str:
    """``prefix`` and ``path`` as one field path: ``input_tensor`` + ``sizes[1]`` gives
    ``input_tensor.sizes[1]``, ``axes`` + ``[0]`` gives ``axes[0]``."""
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"
