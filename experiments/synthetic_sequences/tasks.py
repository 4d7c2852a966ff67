"""Tasks, the strategies that solve them, and the parser that maps an output back.

Every output y has the shape  trace + [ANS] + answer digits + [<eos>]. The
strategy lives in the trace's format alone: `direct` writes no trace;
`stepwise` and `alternative` write a task-specific working. The parser reads
a trace back to its strategy and checks the working is internally consistent
and agrees with the answer, so a corrupted sample fails to parse.

  add    x = ADD a + b          stepwise: per column, low first: a_i b_i carry > s_i ;
  sort   x = SORT d1 .. dn      stepwise: insertion, the sorted prefix after each element, ';'-ended
                                alternative: counting, d : count ; for each distinct digit
  count  x = COUNT t : d1 .. dn stepwise: the running count of t after each element
                                alternative: a tally, ':' then one '|' per match
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PAD, BOS, SEP, EOS = "<pad>", "<bos>", "<sep>", "<eos>"
DIGITS = tuple(str(d) for d in range(10))
VOCAB: tuple[str, ...] = (PAD, BOS, SEP, EOS, *DIGITS, "ANS", "ADD", "SORT", "COUNT", "+", ">", ";", ":", "|")

DIRECT, STEPWISE, ALTERNATIVE = "direct", "stepwise", "alternative"


class ParseError(ValueError):
    """The sequence is not a well-formed output of any strategy of the task."""


@dataclass(frozen=True)
class Parsed:
    strategy: str
    answer: str


@dataclass(frozen=True)
class Problem:
    x: list[str]
    answer: str
    operands: tuple


def _digits(tokens: Sequence[str]) -> bool:
    return len(tokens) > 0 and all(t in DIGITS for t in tokens)


def _segments(trace: Sequence[str]) -> list[list[str]]:
    """Split a ';'-terminated trace into its segments."""
    if not trace or trace[-1] != ";":
        raise ParseError("trace must end with ';'")
    segments, current = [], []
    for token in trace:
        if token == ";":
            segments.append(current)
            current = []
        else:
            current.append(token)
    return segments


class Add:
    name = "add"
    strategies = (DIRECT, STEPWISE)

    def sample(self, rng: np.random.Generator, size: int) -> Problem:
        low = 10 ** (size - 1) if size > 1 else 0
        a, b = (int(rng.integers(low, 10**size)) for _ in range(2))
        return Problem(["ADD", *str(a), "+", *str(b)], str(a + b), (a, b))

    def trace(self, problem: Problem, strategy: str) -> list[str]:
        if strategy == DIRECT:
            return []
        a, b = (str(v)[::-1] for v in problem.operands)
        out, carry = [], 0
        for da, db in zip(a, b, strict=True):
            total = int(da) + int(db) + carry
            out += [da, db, str(carry), ">", str(total % 10), ";"]
            carry = total // 10
        return out

    def parse_trace(self, trace: Sequence[str], answer: str) -> str:
        written, carry = [], 0
        for segment in _segments(trace):
            if len(segment) != 5 or segment[3] != ">" or not _digits(segment[:3] + segment[4:]):
                raise ParseError(f"add column {segment} is not 'a b carry > digit'")
            da, db, c, _, s = segment
            total = int(da) + int(db) + int(c)
            if int(c) != carry or int(s) != total % 10:
                raise ParseError(f"add column {segment} is inconsistent with carry {carry}")
            written.append(s)
            carry = total // 10
        result = ("1" if carry else "") + "".join(reversed(written))
        if result != answer:
            raise ParseError(f"add columns give {result}, answer says {answer}")
        return STEPWISE


class Sort:
    name = "sort"
    strategies = (DIRECT, STEPWISE, ALTERNATIVE)

    def sample(self, rng: np.random.Generator, size: int) -> Problem:
        items = [str(d) for d in rng.integers(0, 10, size=size)]
        return Problem(["SORT", *items], "".join(sorted(items)), tuple(items))

    def trace(self, problem: Problem, strategy: str) -> list[str]:
        items = list(problem.operands)
        if strategy == DIRECT:
            return []
        if strategy == STEPWISE:
            return [t for k in range(1, len(items) + 1) for t in (*sorted(items[:k]), ";")]
        return [t for d, c in sorted(Counter(items).items()) for t in (d, ":", str(c), ";")]

    def parse_trace(self, trace: Sequence[str], answer: str) -> str:
        segments = _segments(trace)
        if ":" in trace:
            result, previous = "", None
            for segment in segments:
                if len(segment) != 3 or segment[1] != ":" or not _digits(segment[::2]) or segment[2] == "0":
                    raise ParseError(f"sort count {segment} is not 'digit : count'")
                if previous is not None and segment[0] <= previous:
                    raise ParseError("sort counts are not in increasing digit order")
                previous = segment[0]
                result += segment[0] * int(segment[2])
            strategy = ALTERNATIVE
        else:
            for k, segment in enumerate(segments, start=1):
                if len(segment) != k or not _digits(segment) or segment != sorted(segment):
                    raise ParseError(f"insertion step {k} {segment} is not a sorted prefix of length {k}")
                if k > 1 and Counter(segments[k - 2]) - Counter(segment):
                    raise ParseError(f"insertion step {k} drops an element of step {k - 1}")
            result = "".join(segments[-1])
            strategy = STEPWISE
        if result != answer:
            raise ParseError(f"sort working gives {result}, answer says {answer}")
        return strategy


class Count:
    name = "count"
    strategies = (DIRECT, STEPWISE, ALTERNATIVE)

    def sample(self, rng: np.random.Generator, size: int) -> Problem:
        target = str(rng.integers(0, 10))
        # draw half the items from the target so counts are spread, not mostly zero
        items = [target if rng.random() < 0.5 else str(rng.integers(0, 10)) for _ in range(size)]
        return Problem(["COUNT", target, ":", *items], str(items.count(target)), (target, tuple(items)))

    def trace(self, problem: Problem, strategy: str) -> list[str]:
        target, items = problem.operands
        if strategy == DIRECT:
            return []
        if strategy == STEPWISE:
            return [str(items[: k + 1].count(target)) for k in range(len(items))]
        return [":"] + ["|"] * items.count(target)

    def parse_trace(self, trace: Sequence[str], answer: str) -> str:
        if trace[0] == ":":
            if any(t != "|" for t in trace[1:]):
                raise ParseError("tally holds something other than '|'")
            result, strategy = str(len(trace) - 1), ALTERNATIVE
        else:
            if not _digits(trace):
                raise ParseError("running count holds a non-digit")
            steps = [int(t) for t in trace]
            if any(step - before not in (0, 1) for before, step in zip([0, *steps], steps, strict=False)):
                raise ParseError("running count does not grow by 0 or 1 per element")
            result, strategy = trace[-1], STEPWISE
        if result != answer:
            raise ParseError(f"count working gives {result}, answer says {answer}")
        return strategy


TASKS = {task.name: task for task in (Add(), Sort(), Count())}


def render_output(task: str, problem: Problem, strategy: str) -> list[str]:
    return [*TASKS[task].trace(problem, strategy), "ANS", *problem.answer, EOS]


def parse_output(task: str, y: Sequence[str]) -> Parsed:
    """Map an output token sequence to (strategy, answer), or raise ParseError."""
    if task not in TASKS:
        raise ValueError(f"task: {task!r} is not allowed; allowed values: {', '.join(TASKS)}")
    y = list(y)
    if not y or y[-1] != EOS or y.count(EOS) != 1:
        raise ParseError("output must end with exactly one <eos>")
    if y.count("ANS") != 1:
        raise ParseError("output must hold exactly one ANS")
    cut = y.index("ANS")
    trace, answer = y[:cut], y[cut + 1 : -1]
    if not _digits(answer):
        raise ParseError(f"answer {answer} is not a non-empty digit string")
    answer = "".join(answer)
    strategy = DIRECT if not trace else TASKS[task].parse_trace(trace, answer)
    return Parsed(strategy, answer)
