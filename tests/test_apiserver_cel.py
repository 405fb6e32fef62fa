"""The pinned CRDs' CEL rules, evaluated by the offline API server as the API server does: scoped to their
schema node, defaulted first, transition rules as an unchanged update, unevaluable rules listed."""

from __future__ import annotations

import copy
import functools
import itertools
from typing import Any

import celpy
import pytest
from celpy import celtypes, evaluation
from celpy.evaluation import base_functions

from infra.apiserver import crd_rules
from infra.apiserver.cel import LOGIC, UPSTREAM_OPERATORS, EvalError, compiled, to_cel
from infra.apiserver.schema import CrdIndex
from tests.conftest import CRDS, platform_of

KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture(scope="module")
def index() -> CrdIndex:
    return CrdIndex(CRDS, platform_of("onprem-lab").spec.versions.crd_dirs())


def _refusals(index: CrdIndex, obj: dict[str, Any]) -> list[str]:
    schema = index.schema(obj["apiVersion"], obj["kind"])
    assert schema is not None
    return [r.line() for r in crd_rules.evaluate(obj, schema).refusals]


def _cq(**flavor_resource: Any) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "vision"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": 8, **flavor_resource},
                                               {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}


def test_rules_are_counted_per_crd_of_the_pinned_versions(index: CrdIndex) -> None:
    counts = {kind: len(crd_rules.rules_of(kind, schema)) for (group, version, kind), schema in index.schemas.items()
              if version in ("v1beta2", "v1alpha1", "v1alpha2")}
    assert counts["ClusterQueue"] == 4 and counts["TrainJob"] == 16 and counts["JobSet"] == 8
    assert counts["ResourceFlavor"] == 10 and counts["Workload"] == 23


def test_a_clusterqueue_without_cohort_may_not_set_a_borrowing_limit(index: CrdIndex) -> None:
    assert _refusals(index, _cq()) == []
    cohort = _cq(borrowingLimit=4)
    assert _refusals(index, cohort) == ["crd-cel: spec: borrowingLimit must be nil when cohort is empty"]
    cohort["spec"]["cohortName"] = "all"
    assert _refusals(index, cohort) == []


def test_a_rule_is_scoped_to_its_node_inside_arrays(index: CrdIndex) -> None:
    cq = _cq()
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert _refusals(index, cq) == [
        "crd-cel: spec.resourceGroups[0]: flavors must have the same number of resources as the coveredResources"]


def test_schema_defaults_apply_before_the_rules(index: CrdIndex) -> None:
    """reclaimWithinCohort defaults to Never, so a borrowWithinCohort policy alone is refused."""
    cq = _cq()
    cq["spec"]["cohortName"] = "all"
    cq["spec"]["preemption"] = {"borrowWithinCohort": {"policy": "LowerPriority"}}
    assert any("reclaimWithinCohort" in line for line in _refusals(index, cq))
    cq["spec"]["preemption"]["reclaimWithinCohort"] = "Any"
    assert _refusals(index, cq) == []


def test_transition_rules_hold_on_an_unchanged_update(index: CrdIndex) -> None:
    local_queue = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "vision", "namespace": "vision"},
                   "spec": {"clusterQueue": "vision"}}
    schema = index.schema(KUEUE, "LocalQueue")
    assert schema is not None
    outcome = crd_rules.evaluate(local_queue, schema)
    assert outcome.evaluated == 1 and outcome.refusals == []


def test_topology_levels_must_be_unique(index: CrdIndex) -> None:
    topology: dict[str, Any] = {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "racks"},
                "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    assert _refusals(index, topology) == []
    topology["spec"]["levels"].insert(0, {"nodeLabel": "rack"})
    assert len(_refusals(index, topology)) == 1


def test_jobset_startup_order_excludes_depends_on(index: CrdIndex) -> None:
    jobs: list[dict[str, Any]] = [{"name": name, "replicas": 1, "template": {"spec": {"template": {
        "spec": {"containers": [{"name": "c", "image": "i"}]}}}}} for name in ("a", "b")]
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "j"},
              "spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": jobs}}
    assert _refusals(index, jobset) == []
    jobs[1]["dependsOn"] = [{"name": "a", "status": "Ready"}]
    assert _refusals(index, jobset) == ["crd-cel: spec: StartupPolicy and DependsOn APIs are mutually exclusive"]


@pytest.mark.parametrize(("name", "refused"), [("a" * 63, False), ("a" * 64, True), ("resnet-1", False),
                                               ("1resnet", True)])
def test_trainjob_names_are_dns_labels(index: CrdIndex, name: str, refused: bool) -> None:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
           "spec": {"runtimeRef": {"name": "torch-distributed"}}}
    assert bool(_refusals(index, job)) is refused


def test_unevaluable_rules_are_listed_not_skipped(index: CrdIndex) -> None:
    schema = copy.deepcopy(index.schema(KUEUE, "LocalQueue"))
    assert schema is not None
    schema["x-kubernetes-validations"] = [{"rule": "self.metadata.name.noSuchFunction()", "message": "m"}]
    outcome = crd_rules.evaluate({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "a"}}, schema)
    assert outcome.refusals == [] and [u.why for u in outcome.unchecked] == [
        "function noSuchFunction() is not implemented"]


def test_kubernetes_library_functions() -> None:
    assert compiled("self.isSorted()").run({"self": to_cel([1, 2, 2])})
    assert not compiled("self.isSorted()").run({"self": to_cel([2, 1])})
    assert compiled("'%s/%d'.format(['a', 3])").run({}) == "a/3"
    assert compiled("quantity('1Gi').isGreaterThan(quantity('1G'))").run({})
    assert not compiled("quantity('1G').isGreaterThan(quantity('1G'))").run({})
    assert compiled("'a,b'.split(',').join('-')").run({}) == "a-b"


OPERANDS = [celtypes.BoolType(True), celtypes.BoolType(False), celpy.CELEvalError("no such key: x"),
            celtypes.IntType(1), celtypes.StringType("a")]


@pytest.mark.parametrize("symbol", ["_||_", "_&&_"])
def test_logic_operators_answer_as_celpys_own_on_every_operand_kind(symbol: str) -> None:
    """`||` and `&&` without operand dumps give celpy's answer for every pair: the same value, or a TypeError."""
    def outcome(operator: Any, left: Any, right: Any) -> Any:
        try:
            return ("value", operator(left, right))
        except TypeError:
            return ("TypeError", None)
    for left, right in itertools.product(OPERANDS, repeat=2):
        ours, celpys = outcome(LOGIC[symbol], left, right), outcome(base_functions[symbol], left, right)
        assert ours[0] == celpys[0] and ours[1] is celpys[1], (symbol, left, right)


@pytest.mark.parametrize("expression", ["self.a.x || self.b.y", "self.a.x && self.b.y", "self.a.x || true",
                                        "false && self.b.y", "has(self.a) || self.b.y == 1"])
def test_an_expression_over_missing_fields_answers_and_fails_as_with_celpys_operators(expression: str) -> None:
    """Same value, or the same error text, as celpy's own operators (only the TypeError inside differs)."""
    environment = celpy.Environment()
    plain = environment.program(environment.compile(expression))
    activation = {"self": to_cel({"c": 1})}

    def answer(evaluate: Any) -> tuple[str, Any]:
        try:
            result = evaluate(activation)
        except (celpy.CELEvalError, EvalError) as error:
            return "error", str(error.args[0])[:200]
        return ("error", str(result.args[0])[:200]) if isinstance(result, celpy.CELEvalError) else ("value", result)
    assert answer(compiled(expression).run) == answer(plain.evaluate)


def test_the_url_library_reads_the_scheme_as_istio_s_jwks_rule_does() -> None:
    """Istio's RequestAuthentication checks `url(self).getScheme() in ["http", "https"]` on jwksUri."""
    rule = compiled('url(self).getScheme() in ["http", "https"]')
    assert rule.run({"self": to_cel("http://dex.auth.svc.cluster.local:5556/dex/keys")})
    assert not rule.run({"self": to_cel("ftp://keys.example.com/keys")})
    assert compiled("isURL(self)").run({"self": to_cel("/dex/keys")})
    assert not compiled("isURL(self)").run({"self": to_cel("dex keys")})
    assert compiled("url(self).getHostname()").run({"self": to_cel("https://u@ml.example.com:8443/x")}) == \
        "ml.example.com"


@pytest.mark.parametrize(("symbol", "name"), [("_||_", "logical_or"), ("_&&_", "logical_and")])
def test_the_macros_fold_with_the_short_error_operators(symbol: str, name: str) -> None:
    """celpy's `exists` and `all` fold their items with celtypes.logical_or/logical_and, looked up at each call. Its
    own render both error operands into the next error, whose text then escapes the previous one's quotes again at
    every item: over the 26 registries a stack with models admits, one `exists` exhausted the machine's memory
    (admit of any TrainJob on onprem-lab). The folds are the short-error operators, whose message names no operand."""
    fold = getattr(celtypes, name)
    assert fold is LOGIC[symbol]
    error = celpy.CELEvalError("no such key: 'x'" * 50)
    with pytest.raises(TypeError) as failed:
        fold(error, error)
    assert "no such key" not in str(failed.value) and len(str(failed.value)) < 100


@pytest.mark.parametrize("expression", [
    "self.a.x + 1 > 2 && !(self.a.y in ['b']) || self.c.size() == 2",  # binary, unary, relation, member, call
    "self.c.all(i, i > 0) && self.c.map(i, i * 2).exists(i, i == 4)",  # macros: the casts over their lists
    "self.a.nope == 1 || -self.a.x < 0",  # an error operand, a unary minus
    "{'k': self.c[0]}.k + self.c.filter(i, i > 1)[0] - 3 / 1 % 2",  # map literal, indexes, multiplication
])
def test_celpys_evaluator_answers_alike_with_its_result_union_replaced(expression: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """infra/apiserver/cel.py replaces `celpy.evaluation.Result` (read at run time only by casts) with a plain
    class: the same values and the same errors as with celpy's own union."""
    activation = {"self": to_cel({"a": {"x": 2, "y": "b"}, "c": [1, 2]})}

    def answer() -> tuple[str, Any]:
        environment = celpy.Environment()
        try:
            return "value", environment.program(environment.compile(expression)).evaluate(activation)
        except celpy.CELEvalError as error:
            return "error", str(error.args[0])[:200]
    replaced = answer()
    monkeypatch.setattr(evaluation, "Result", celpy.Result)
    assert evaluation.Result is not object and replaced == answer()


@pytest.mark.parametrize("expression", [
    "object.spec.items.size()", "request.namespace", "variables.count + 1", "has(object.spec.x)",
    "int(object.spec.items.size())", "[1].exists(x, x == object.spec.items.size())", "object.spec.items.map(x, x)[0]",
])
def test_an_expression_that_reads_the_activation_is_computed_for_each(expression: str) -> None:
    """Only an expression that names nothing keeps its first value: each of these answers two activations apart."""
    program = compiled(expression)
    answers = [program.run({"object": to_cel({"spec": spec}), "request": to_cel({"namespace": namespace}),
                            "variables": to_cel({"count": count})})
               for spec, namespace, count in (({"x": 1, "items": [1]}, "a", 1), ({"items": [2, 2]}, "b", 2))]
    assert answers[0] != answers[1], expression


def test_a_literal_is_computed_once() -> None:
    program = compiled('["docker.io/a", "nvcr.io/b"]')
    first = program.run({})
    assert first == ["docker.io/a", "nvcr.io/b"]
    assert program.run({"object": to_cel({})}) is first


OPERANDS = ["true", "false", "(1 / 0 == 1)", "1", "object.missing"]  # both answers, an error, no bool, no key


def _answer(expression: str) -> tuple[str, Any]:
    try:
        value = compiled(expression).run({"object": to_cel({})})
    except EvalError:
        return "error", None
    return type(value).__name__, value


@pytest.mark.parametrize(("left", "right"), list(itertools.product(OPERANDS, repeat=2)))
def test_short_circuits_answer_as_celpys_full_evaluation(left: str, right: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`||`, `&&`, `exists` and `all` stop once decided: every pair of operand kinds answers as celpy's own
    evaluation of both operands and of every item."""
    expressions = [f"{left} || {right}", f"{left} && {right}", f"{left} || {right} || {left}",
                   f"[0, 1].exists(i, i == 0 ? {left} : {right})", f"[0, 1].all(i, i == 0 ? {left} : {right})"]
    ours = [_answer(e) for e in expressions]
    for name, method in UPSTREAM_OPERATORS.items():
        monkeypatch.setattr(evaluation.Evaluator, name, method)
    monkeypatch.setattr(evaluation, "reduce", functools.reduce)
    assert ours == [_answer(e) for e in expressions]


def test_what_follows_a_decided_operand_or_item_is_not_evaluated() -> None:
    calls: list[int] = []

    def tick() -> celtypes.BoolType:
        calls.append(1)
        return celtypes.BoolType(True)
    environment = celpy.Environment()
    for expression, evaluated in [("true || tick()", 0), ("false && tick()", 0), ("false || tick()", 1),
                                  ("[1, 2, 3].exists(x, tick())", 1), ("[1, 2, 3].all(x, x > 1 && tick())", 0),
                                  ("[1, 2, 3].all(x, tick())", 3)]:
        calls.clear()
        environment.program(environment.compile(expression), functions={"tick": tick}).evaluate({})
        assert len(calls) == evaluated, expression


HAS_OBJECT = {"spec": {"template": {"spec": {}}, "replicas": 0, "empty": {}, "none": None}, "items": [1]}


@pytest.mark.parametrize(("expression", "answer"), [
    ("has(o.spec)", True),
    ("has(o.status)", False),  # the last field absent: false
    ("has(o.spec.template.spec)", True),
    ("has(o.spec.replicas)", True),  # present with a zero value: a map key is there
    ("has(o.spec.empty.x)", False),
    ("has(o.spec.template.metadata)", False),
    # a missing key on the way is an error, not false (cel-go: "no such key", cel-expr/cel-go#912)
    ("has(o.status.phase)", EvalError),
    ("has(o.spec.template.metadata.labels)", EvalError),
    # a receiver that is no map has no fields to test
    ("has(o.spec.replicas.x)", EvalError),
    ("has(o.spec.none.x)", EvalError),
    ("has(o.items.x)", EvalError),
    # the guards that avoid the error: each step tested on its own
    ("has(o.status) && has(o.status.phase)", False),
    ("!has(o.status) || has(o.status.phase)", True),
])
def test_has_tests_only_the_last_field_and_an_error_on_the_way_is_the_answer(expression: str, answer: Any) -> None:
    """The API server's has() (cel-spec langdef, field selection): `e` in has(e.f) is evaluated as any expression and
    only `f` is tested, so a policy's `has(object.a.b)` without `a` fails the request there; celpy alone answers
    false to every error under has()."""
    program = compiled(expression)
    if answer is EvalError:
        with pytest.raises(EvalError):
            program.run({"o": to_cel(HAS_OBJECT)})
    else:
        assert program.run({"o": to_cel(HAS_OBJECT)}) == celtypes.BoolType(answer)
