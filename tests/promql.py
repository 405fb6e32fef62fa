"""A small PromQL evaluator for alert tests: an expression, parsed by promql-parser (the parser the offline rule check
uses), evaluated at one instant over series given as samples, as Prometheus' rule manager evaluates an alert's
expression (an alert is pending when the result is not empty; `for` is not simulated).

What it covers is what the rules under test use: selectors with = != =~ !~ matchers and a 5-minute lookback, rate()
(the slope between the first and last samples in the range: Prometheus also extrapolates to the range's edges, which
changes nothing for the steady rates tests feed), histogram_quantile() (Prometheus' linear interpolation within the
bucket), vector(), sum/max/min/count by/without, comparisons with a scalar, arithmetic between vectors (one-to-one on
the matching labels), and the set operators and/or/unless with on()/ignoring(). Anything else raises, so a rule using
more fails its test instead of passing unevaluated.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import promql_parser as pp

Labels = dict[str, str]
LOOKBACK = 300.0
COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne}
ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": lambda a, b: a / b if b else math.copysign(
        math.inf, a) if a else math.nan}


@dataclass
class Series:
    labels: Labels  # with __name__
    samples: list[tuple[float, float]]  # (time, value), ascending


Vector = list[tuple[Labels, float]]


def series(name: str, labels: Labels, values: Iterable[float], step: float = 60.0, end: float = 0.0) -> Series:
    """Samples every `step` seconds ending at `end` (the evaluation time tests use)."""
    points = list(values)
    return Series({"__name__": name, **labels}, [(end - step * (len(points) - 1 - i), v) for i, v in enumerate(points)])


def _matches(labels: Labels, matcher: Any) -> bool:
    value, op = labels.get(matcher.name, ""), str(matcher.op)
    if op.endswith("NotEqual"):
        return value != matcher.value
    if op.endswith("Equal"):
        return value == matcher.value
    found = re.fullmatch(matcher.value, value) is not None
    return not found if op.startswith("MatchOp.NotRe") else found


class Evaluator:
    def __init__(self, data: list[Series], at: float = 0.0) -> None:
        self.data, self.at = data, at

    def _select(self, selector: Any) -> list[Series]:
        return [s for s in self.data if (not selector.name or s.labels["__name__"] == selector.name)
                and all(_matches(s.labels, m) for m in selector.matchers.matchers)]

    def eval(self, node: Any) -> Vector | float:
        if isinstance(node, pp.NumberLiteral):
            return float(node.val)
        if isinstance(node, pp.ParenExpr):
            return self.eval(node.expr)
        if isinstance(node, pp.VectorSelector):
            found = []
            for s in self._select(node):
                recent = [v for t, v in s.samples if self.at - LOOKBACK < t <= self.at]
                if recent:
                    found.append((dict(s.labels), recent[-1]))
            return found
        if isinstance(node, pp.Call):
            return self._call(node)
        if isinstance(node, pp.AggregateExpr):
            return self._aggregate(node)
        if isinstance(node, pp.BinaryExpr):
            return self._binary(node)
        raise NotImplementedError(f"tests/promql.py evaluates no {type(node).__name__}: {node}")

    def _vector(self, node: Any) -> Vector:
        value = self.eval(node)
        if isinstance(value, float):
            raise NotImplementedError(f"a scalar where a vector is expected: {node}")
        return value

    def _call(self, node: Any) -> Vector:
        name, args = node.func.name, node.args
        if name == "vector":
            scalar = self.eval(args[0])
            assert isinstance(scalar, float)
            return [({}, scalar)]
        if name == "rate":
            window = args[0].range.total_seconds()
            found = []
            for s in self._select(args[0].vector_selector):
                inside = [(t, v) for t, v in s.samples if self.at - window < t <= self.at]
                if len(inside) >= 2:
                    (t0, v0), (t1, v1) = inside[0], inside[-1]
                    labels = {k: v for k, v in s.labels.items() if k != "__name__"}
                    found.append((labels, (v1 - v0) / (t1 - t0)))
            return found
        if name == "histogram_quantile":
            quantile = self.eval(args[0])
            assert isinstance(quantile, float)
            return _quantiles(quantile, self._vector(args[1]))
        raise NotImplementedError(f"tests/promql.py evaluates no {name}()")

    def _aggregate(self, node: Any) -> Vector:
        op, rows = str(node.op), self._vector(node.expr)
        keep = node.modifier.labels if node.modifier else []
        without = node.modifier is not None and str(node.modifier.type).endswith("Without")
        groups: dict[tuple[tuple[str, str], ...], list[float]] = {}
        for labels, value in rows:
            key = tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"
                               and ((k not in keep) if without else (k in keep))))
            groups.setdefault(key, []).append(value)
        combine: dict[str, Callable[[list[float]], float]] = {"sum": sum, "max": max, "min": min,
                                                              "count": lambda v: float(len(v))}
        if op not in combine:
            raise NotImplementedError(f"tests/promql.py evaluates no {op}()")
        return [(dict(key), combine[op](values)) for key, values in groups.items()]

    def _binary(self, node: Any) -> Vector | float:
        op, lhs, rhs = str(node.op), self.eval(node.lhs), self.eval(node.rhs)
        if isinstance(lhs, float) and isinstance(rhs, float):
            return float(COMPARE[op](lhs, rhs)) if op in COMPARE else ARITHMETIC[op](lhs, rhs)
        if isinstance(rhs, float) or isinstance(lhs, float):
            vector, scalar, flipped = (lhs, rhs, False) if isinstance(rhs, float) else (rhs, lhs, True)
            assert not isinstance(vector, float) and isinstance(scalar, float)
            if op in COMPARE:
                return [(labels, value) for labels, value in vector
                        if COMPARE[op](*((scalar, value) if flipped else (value, scalar)))]
            return [({k: v for k, v in labels.items() if k != "__name__"},
                     ARITHMETIC[op](*((scalar, value) if flipped else (value, scalar)))) for labels, value in vector]
        assert not isinstance(lhs, float) and not isinstance(rhs, float)
        key = self._matching(node.modifier)
        right = {key(labels): value for labels, value in rhs}
        if op == "and":
            return [(labels, value) for labels, value in lhs if key(labels) in right]
        if op == "unless":
            return [(labels, value) for labels, value in lhs if key(labels) not in right]
        if op == "or":
            left = {key(labels) for labels, _ in lhs}
            return lhs + [(labels, value) for labels, value in rhs if key(labels) not in left]
        if op in ARITHMETIC:
            return [({k: v for k, v in labels.items() if k != "__name__"}, ARITHMETIC[op](value, right[key(labels)]))
                    for labels, value in lhs if key(labels) in right]
        raise NotImplementedError(f"tests/promql.py evaluates no vector {op} vector")

    @staticmethod
    def _matching(modifier: Any) -> Callable[[Labels], tuple[tuple[str, str], ...]]:
        matching = modifier.matching if modifier is not None else None
        names = list(matching.labels) if matching is not None else []
        on = matching is not None and str(matching.type).endswith("Include")

        def key(labels: Labels) -> tuple[tuple[str, str], ...]:
            if on:
                return tuple((n, labels.get(n, "")) for n in names)
            return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__" and k not in names))
        return key


def _quantiles(quantile: float, buckets: Vector) -> Vector:
    groups: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    for labels, value in buckets:
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in ("le", "__name__")))
        groups.setdefault(key, []).append((float(labels["le"]), value))
    found = []
    for key, points in groups.items():
        points.sort()
        total = points[-1][1]
        if total == 0 or not math.isinf(points[-1][0]):
            continue
        rank, lower, below = quantile * total, 0.0, 0.0
        for bound, count in points:
            if count >= rank:
                if math.isinf(bound):
                    found.append((dict(key), lower))
                else:
                    found.append((dict(key), lower + (bound - lower) * (rank - below) / (count - below)))
                break
            lower, below = bound, count
    return found


def evaluate(expr: str, data: list[Series], at: float = 0.0) -> Vector:
    result = Evaluator(data, at).eval(pp.parse(expr))
    if isinstance(result, float):
        raise NotImplementedError("a scalar alert expression")
    return result
