"""CEL as the Kubernetes API server evaluates it: cel-python plus the Kubernetes CEL library functions
(lists, strings, regex, quantities, format) that the pinned CRD rules and our admission policies may use.

Programs are compiled once per expression. An expression that does not parse, or calls a function this
library does not provide, raises `Unevaluable`: the caller lists it instead of skipping it silently.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import celpy
from celpy import celtypes, evaluation

from infra.apiserver import quantity


class Unevaluable(Exception):
    """The expression cannot be evaluated offline (syntax this interpreter lacks, an unknown function)."""


def _is_sorted(items: list[Any]) -> celtypes.BoolType:
    return celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(items)))


def _index_of(container: Any, item: Any) -> celtypes.IntType:
    return celtypes.IntType(container.find(item) if isinstance(container, str) else
                            next((i for i, v in enumerate(container) if v == item), -1))


def _last_index_of(container: Any, item: Any) -> celtypes.IntType:
    if isinstance(container, str):
        return celtypes.IntType(container.rfind(item))
    return celtypes.IntType(max((i for i, v in enumerate(container) if v == item), default=-1))


def _quantity(text: str) -> Decimal:
    return quantity.parse(text)  # raises on a malformed quantity, as the library does on the server


def _format(template: str, args: celtypes.ListType) -> celtypes.StringType:
    """`'%s has %d'.format([a, b])`: the verbs the Kubernetes strings library accepts (%s %d %f %x %o %b)."""
    values = iter(args)

    def one(match: re.Match[str]) -> str:
        verb = match.group(0)
        if verb == "%%":
            return "%"
        value = next(values)
        return {"d": lambda v: str(int(v)), "x": lambda v: format(int(v), "x"), "o": lambda v: format(int(v), "o"),
                "b": lambda v: format(int(v), "b")}.get(verb[-1], _plain)(value)
    return celtypes.StringType(re.sub(r"%%|%(?:\.\d+)?[sdfxob]", one, template))


def _plain(value: Any) -> str:
    if isinstance(value, celtypes.BoolType):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    return str(value)


def _url_problem(text: str) -> str | None:
    """Why Kubernetes' url() refuses `text` (Go's url.ParseRequestURI: an absolute URL or an absolute path), or None."""
    parts = urlsplit(text)
    if (parts.scheme and (parts.netloc or parts.path)) or text.startswith("/"):
        return None
    return f"URL parse error during conversion from string: {text!r} is not an absolute URL or path"


def _url(text: Any) -> celtypes.StringType:
    problem = _url_problem(str(text))
    if problem:
        raise ValueError(problem)
    return celtypes.StringType(str(text))


def _join(items: celtypes.ListType, separator: str = "") -> celtypes.StringType:
    return celtypes.StringType(str(separator).join(str(i) for i in items))


def _split(text: str, separator: str) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


def _bool(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(bool(value))


def _without_operand_dumps(operator: Callable[[Any, Any], Any], symbol: str) -> Callable[[Any, Any], Any]:
    """celpy's `||` or `&&` (commutative over errors), failing on two non-boolean operands with a short TypeError.
    celpy's own renders both operands, and an error operand renders its whole parse tree: a quarter of the time of
    evaluating our admission policies, for text the evaluator replaces with its own "no matching overload" message."""
    def apply(left: Any, right: Any) -> Any:
        if not isinstance(left, celtypes.BoolType) and not isinstance(right, celtypes.BoolType):
            raise TypeError(f"{type(left).__name__} {symbol} {type(right).__name__}")
        return operator(left, right)
    return apply


# The operators' short-circuit over errors, as celpy evaluates them (a test compares both on every operand kind).
LOGIC: dict[str, Callable[..., Any]] = {
    "_||_": _without_operand_dumps(celtypes.logical_or, "||"),
    "_&&_": _without_operand_dumps(celtypes.logical_and, "&&"),
}
# The macros `exists` and `all` fold their items with celtypes' own functions, looked up at each call: over items
# that are errors, each fold's error rendered the previous one twice, so an `exists` over the 26 registries of a
# stack with models grew its message past the machine's memory. The short-error versions in their place.
celtypes.logical_or, celtypes.logical_and = LOGIC["_||_"], LOGIC["_&&_"]  # type: ignore[assignment]


# celpy visits both operands of `||` and `&&`, and folds every item of `exists` and `all`, before combining them. A
# left operand or a running fold that decides the answer (true for `||` and `exists`, false for `&&` and `all`)
# decides it whatever follows, errors included: celtypes' functions above return it unchanged. So stopping there
# gives the same value, as cel-go on the API server does, and skips what a guard such as
# `request.resource.resource != 'pods' || <the rule>` exists to skip (tests/test_apiserver_cel.py compares both).
DECISIVE = {LOGIC["_||_"]: True, LOGIC["_&&_"]: False}
UPSTREAM_OPERATORS = {"conditionalor": evaluation.Evaluator.conditionalor,
                      "conditionaland": evaluation.Evaluator.conditionaland}


def _short_circuit(symbol: str) -> Callable[[evaluation.Evaluator, Any], Any]:
    decisive = DECISIVE[LOGIC[symbol]]
    upstream = UPSTREAM_OPERATORS["conditionalor" if symbol == "_||_" else "conditionaland"]

    def visit(self: evaluation.Evaluator, tree: Any) -> Any:
        if len(tree.children) != 2:
            return upstream(self, tree)
        left = self.visit(tree.children[0])
        if isinstance(left, celtypes.BoolType) and bool(left) is decisive:
            return left
        right = self.visit(tree.children[1])
        try:
            return self.activation.resolve_function(symbol)(left, right)
        except TypeError as error:  # celpy's own wording of this error
            value = evaluation.CELEvalError(f"found no matching overload for {symbol} applied to "
                                            f"'({type(left)}, {type(right)})'", error.__class__, error.args, tree=tree)
            value.__cause__ = error
            return value
    return visit


def _fold(function: Callable[[Any, Any], Any], items: Iterable[Any], initial: Any) -> Any:
    """functools.reduce as celpy's evaluator calls it (always with an initial value), stopping once an `exists` or
    `all` fold is decided (celpy wraps the operator it folds)."""
    decisive = DECISIVE.get(getattr(function, "__wrapped__", function))
    value = initial
    for item in items:  # an item of celpy's lazy map is evaluated when taken
        value = function(value, item)
        if decisive is not None and isinstance(value, celtypes.BoolType) and bool(value) is decisive:
            return value
    return value


# `has(e.f)` (cel-spec langdef, field selection): `e` is evaluated as any expression, so an error in it (a missing
# key on the way, as in `has(a.b.c)` without `a.b`: cel-go answers "no such key", cel-expr/cel-go#912) is the
# answer, and only the last field is tested; a receiver that is no map is an error too. celpy answers false to
# every error of the whole `e.f`, which admitted offline what the API server fails.
UPSTREAM_HAS = evaluation.Evaluator.macro_has_eval


def _selection(tree: Any) -> Any:
    """The `e.f` node of has()'s argument (each level of the grammar above it has one child), or None."""
    while hasattr(tree, "data"):  # a lark Tree; its tokens have no `data`
        if tree.data == "member_dot":
            return tree
        if len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return None


def _has(self: evaluation.Evaluator, exprlist: Any) -> Any:
    selection = _selection(exprlist)
    if selection is None:
        return UPSTREAM_HAS(self, exprlist)
    receiver_tree, field = selection.children
    receiver = self.visit(receiver_tree)
    if isinstance(receiver, evaluation.CELEvalError):
        return receiver
    if isinstance(receiver, celtypes.MapType | evaluation.NameContainer):
        return celtypes.BoolType(field.value in receiver)
    return evaluation.CELEvalError(f"has(): {type(receiver).__name__} does not support field selection", TypeError,
                                   None, tree=selection)


evaluation.Evaluator.macro_has_eval = _has  # type: ignore[method-assign]
evaluation.Evaluator.conditionalor = _short_circuit("_||_")  # type: ignore[method-assign]
evaluation.Evaluator.conditionaland = _short_circuit("_&&_")  # type: ignore[method-assign]
evaluation.reduce = _fold  # type: ignore[assignment]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # lists (k8s.io/apiserver/pkg/cel/library/lists.go)
    "isSorted": _is_sorted,
    "sum": lambda items: functools.reduce(lambda a, b: a + b, items),
    "min": lambda items: min(items),
    "max": lambda items: max(items),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    # strings (cel-go ext strings, as enabled by the API server)
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
    "trim": lambda s: celtypes.StringType(str(s).strip()),
    "replace": lambda s, old, new: celtypes.StringType(str(s).replace(str(old), str(new))),
    "split": _split,
    "join": _join,
    "substring": lambda s, start, end=None: celtypes.StringType(str(s)[int(start):None if end is None else int(end)]),
    "charAt": lambda s, i: celtypes.StringType(str(s)[int(i):int(i) + 1]),
    "format": _format,
    # regex (k8s.io/apiserver/pkg/cel/library/regex.go)
    "find": lambda s, pattern: celtypes.StringType(m.group(0) if (m := re.search(str(pattern), str(s))) else ""),
    "findAll": lambda s, pattern: celtypes.ListType([celtypes.StringType(m) for m in re.findall(str(pattern), str(s))]),
    # URLs (k8s.io/apiserver/pkg/cel/library/urls.go), represented by their text
    "url": _url,
    "isURL": lambda s: _bool(_url_problem(str(s)) is None),
    "getScheme": lambda u: celtypes.StringType(urlsplit(str(u)).scheme),
    "getHost": lambda u: celtypes.StringType(urlsplit(str(u)).netloc.rpartition("@")[2]),
    "getHostname": lambda u: celtypes.StringType(urlsplit(str(u)).hostname or ""),
    "getEscapedPath": lambda u: celtypes.StringType(urlsplit(str(u)).path),
    # quantities (k8s.io/apiserver/pkg/cel/library/quantity.go), represented by their decimal value
    "quantity": lambda s: celtypes.DoubleType(float(_quantity(s))),
    "isQuantity": lambda s: _bool(quantity.valid(s)),
    "compareTo": lambda a, b: celtypes.IntType((a > b) - (a < b)),
    "isGreaterThan": lambda a, b: _bool(a > b),
    "isLessThan": lambda a, b: _bool(a < b),
    "asInteger": lambda q: celtypes.IntType(int(q)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q)),
    **LOGIC,
}


# celpy's evaluator writes `cast(Tuple[Result, Result], ...)` on its hottest paths (each operator, each variable):
# every call subscripts a typing generic, which hashes the twenty-member `Result` union again, a fifth of the time
# of evaluating our admission policies. The module reads `Result` at run time only in such casts and in the
# annotations of functions it defines while evaluating, neither of which changes a value: a plain class in its
# place makes each subscript a cache hit of typing's (tests/test_apiserver_cel.py compares answers both ways).
evaluation.Result = object  # type: ignore[misc, assignment]


@functools.cache
def _environment() -> celpy.Environment:
    """Built on first use: its parser takes a second to build, and a render or a refused stack file needs none."""
    return celpy.Environment()


# What an expression may call: cel-python's standard functions, the macros its parser expands, and the library above.
_KNOWN_CALLS = frozenset({*evaluation.base_functions, *FUNCTIONS,
                          "has", "all", "exists", "exists_one", "map", "filter"})
_UNKNOWN_CALL = re.compile(r"undeclared reference to '(\w+)'|no function '(\w+)'")


_NAMING = frozenset({"ident", "ident_arg", "dot_ident", "dot_ident_arg"})  # parse-tree nodes that read a name
_UNSET = object()


class Program:
    """One compiled expression; `run(activation)` returns the CEL value or raises `EvalError`."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            tree = _environment().compile(expression)
            self._program = _environment().program(tree, functions=FUNCTIONS)
        except Exception as error:  # celpy raises its own parse errors; all mean "cannot evaluate here"
            raise Unevaluable(f"does not compile: {str(error).splitlines()[0][:160]}") from error
        # Found here rather than when a run reaches the call: a rule is listed as not evaluable without an object.
        unknown = sorted(_calls(tree) - _KNOWN_CALLS)
        if unknown:
            raise Unevaluable(f"function {unknown[0]}() is not implemented")
        # An expression that names nothing (a policy's literal list or map) has one value: computed on its first run.
        self._constant = not any(node.data in _NAMING for node in tree.iter_subtrees())
        self._value: Any = _UNSET

    def run(self, activation: dict[str, Any]) -> Any:
        if not self._constant:
            return self._evaluate(activation)
        if self._value is _UNSET:
            self._value = self._evaluate(activation)
        return self._value

    def _evaluate(self, activation: dict[str, Any]) -> Any:
        try:
            result = self._program.evaluate(activation)
        except celpy.CELEvalError as error:
            raise EvalError(error) from error
        if isinstance(result, celpy.CELEvalError):
            raise EvalError(result)
        return result


class EvalError(Exception):
    """A run-time evaluation error; the API server refuses the object with it (as under failurePolicy Fail).
    An undeclared function is `Unevaluable` instead: a gap of this library, not of the object."""

    def __init__(self, error: Exception) -> None:
        text = str(error.args[0] if error.args else error)
        missing = _UNKNOWN_CALL.search(text)
        self.unknown_function = next((g for g in missing.groups() if g), "") if missing else ""
        super().__init__(text.split(" (in activation")[0][:200])


def _calls(tree: Any) -> set[str]:
    """Names of the functions and macros an expression calls (`f(x)` and `x.f(y)` in celpy's parse tree)."""
    found = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg":
            found.add(str(node.children[1]))
        elif node.data == "ident_arg":
            found.add(str(node.children[0]))
    return found


@functools.lru_cache(maxsize=4096)
def compiled(expression: str) -> Program:
    return Program(expression)


def to_cel(value: Any) -> Any:
    return celpy.json_to_cel(value)


def is_true(value: Any) -> bool:
    return isinstance(value, celtypes.BoolType) and bool(value)
