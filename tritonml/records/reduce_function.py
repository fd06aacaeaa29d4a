"""DirectML's reduce functions: the one ``ReduceFunction`` enum of the library.

``tritonml.reduce`` and the descriptor layer (``tritonml.dml``) both take it; it lives in its own
module so that neither has to import the other to share it.
"""
from __future__ import annotations

import enum
from typing import Union

_PREFIX = "DML_REDUCE_FUNCTION_"


class ReduceFunction(enum.IntEnum):
    """DML_REDUCE_FUNCTION, with directml.h's values. ``str(member)`` is the short name (``"SUM"``).

    ``ReduceFunction.parse`` reads a member or a name; every API taking a reduce function uses it
    (``tritonml.reduce``, ``tritonml.segment_reduce``, the descriptor layer ``tritonml.dml``).

    Example:
        >>> import tritonml
        >>> tritonml.ReduceFunction.SUM.value, str(tritonml.ReduceFunction.SUM)
        (10, 'SUM')
        >>> tritonml.ReduceFunction.parse("log_sum_exp")
        <ReduceFunction.LOG_SUM_EXP: 6>
    """
    ARGMAX = 0
    ARGMIN = 1
    AVERAGE = 2
    L1 = 3
    L2 = 4
    LOG_SUM = 5
    LOG_SUM_EXP = 6
    MAX = 7
    MIN = 8
    MULTIPLY = 9
    SUM = 10
    SUM_SQUARE = 11

    def __str__(self) -> str:
        return self.name

    @classmethod
    def names(cls) -> str:
        """``"ARGMAX, ARGMIN, ..."``, for messages."""
        return ", ".join(cls.__members__)

    @classmethod
    def parse(cls, value: Union[ReduceFunction, str, enum.Enum],
              name: str = "function") -> ReduceFunction:
        """A member, or its name in any case, with or without directml.h's ``DML_REDUCE_FUNCTION_``
        prefix (``"sum"``, ``"LOG_SUM_EXP"``, ``"DML_REDUCE_FUNCTION_ARGMAX"``).

        A member of another enum is read by its name (an application's own mirror of DirectML's
        enum works as it is). Integers are refused even though members are integers: a bare 10 in
        a call or a JSON file is more likely a mistake than a deliberate SUM.

        Args:
            value: A member, a member of another enum, or a name.
            name: The argument's name, for the error messages.

        Returns:
            The member.

        Raises:
            TypeError: value is none of the above (an int included); the message starts with
                ``name``.
            ValueError: An unknown name; the message starts with ``name``.

        Example:
            >>> from tritonml import ReduceFunction
            >>> ReduceFunction.parse("DML_REDUCE_FUNCTION_ARGMAX") is ReduceFunction.ARGMAX
            True
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, enum.Enum):
            value = value.name
        if not isinstance(value, str):
            raise TypeError(f"{name}: expected a ReduceFunction or its name, got "
                            f"{type(value).__name__}; the functions are {cls.names()}")
        key = value.strip().upper()
        if key.startswith(_PREFIX):
            key = key[len(_PREFIX):]
        member = cls.__members__.get(key)
        if member is None:
            raise ValueError(f"{name}: {value!r} is not a reduce function; the functions are "
                             f"{cls.names()} (any case)")
        return member
