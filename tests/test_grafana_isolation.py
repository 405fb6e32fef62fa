"""Each team's Grafana organization reads only its team's series (infra/platform/grafana/datasources.py): its
datasource is its own prom-label-proxy, whose arguments fix the team's ClusterQueue; every query of the team's
dashboards, sent through that proxy, selects only series that carry the team's queue, and a query for another team's
queue is refused; only Grafana reaches the proxies, the proxies reach Prometheus, team pods reach neither."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlparse

import promql_parser
import pytest
import yaml

from infra.apiserver.podsecurity import restricted
from infra.apiserver.selectors import matches_selector
from infra.checks.observability import metric_names
from infra.components import ISTIO, MONITORING
from infra.offline.engine import Capture
from infra.offline.images import stack_images
from infra.platform.dashboards import DATASOURCE, usage_dashboard
from infra.platform.frontdoor import GATEWAY_POD_LABELS, GRAFANA_POD_LABELS, GRAFANA_PORT
from infra.platform.grafana.datasources import APP, IMAGE, LABEL, PORT, PROMETHEUS_PORT, PROMETHEUS_URL, proxy_name
from infra.platform.grafana.orgs import CONFIGMAP, plan
from infra.platform.usage_rules import IDLE_POD, usage_rules
from infra.spec import Platform
from infra.spec.metrics import CATALOG, series_names
from infra.spec.teams import INITIALIZER_JOBS, REPLICATED_JOB_LABEL
from infra.vocabulary import NAME_LABEL, TEAM_LABEL
from tests.conftest import ALL_STACKS, STACKS, capture_of, kube_objects, platform_of

Obj = dict[str, Any]
# The Prometheus pods' labels as prometheus-operator sets them (the chart's Prometheus is named after the release).
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus",
                  "operator.prometheus.io/name": "kube-prometheus-stack-prometheus"}
PROXY_POD = {"app.kubernetes.io/name": APP}
DNS_POD = {"k8s-app": "kube-dns"}


def _meta(obj: Obj) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _rendered_plan(capture: Capture) -> Obj:
    """The bootstrap's plan as the rendered ConfigMap in Grafana's namespace holds it."""
    (found,) = [c for c in kube_objects(capture, "ConfigMap") if _meta(c) == (MONITORING.namespace, CONFIGMAP)]
    plan_json: Obj = json.loads(found["data"]["plan.json"])
    return plan_json


def _args(deployment: Obj) -> list[str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def _flag(args: list[str], name: str) -> list[str]:
    return [arg.split("=", 1)[1] for arg in args if arg.startswith(f"-{name}=")]


# --- each organization's datasource is its own team's proxy ------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_each_team_organization_reads_through_its_own_team_s_proxy_only(stack: str) -> None:
    capture, platform = capture_of(stack), platform_of(stack)
    queues = {team.name: team.queue for team in platform.teams}
    services = {_meta(s): s for s in kube_objects(capture, "Service")}
    proxies = [d for d in kube_objects(capture, "Deployment")
               if matches_selector({"matchLabels": PROXY_POD}, d["spec"]["template"]["metadata"]["labels"])]
    assert len(proxies) == len(queues)
    orgs = _rendered_plan(capture)["orgs"]
    assert sorted(org["name"] for org in orgs) == sorted(queues)
    assert len({org["datasource"]["url"] for org in orgs}) == len(orgs)  # no organization shares another's
    for org in orgs:
        source = org["datasource"]
        assert (source["uid"], source["type"], source["isDefault"]) == (DATASOURCE["uid"], DATASOURCE["type"], True)
        url = urlparse(source["url"])
        assert url.hostname is not None
        name, namespace = url.hostname.split(".")
        service = services[(namespace, name)]
        assert [p["port"] for p in service["spec"]["ports"]] == [url.port]
        # The Service's pods are one Deployment's: the proxy whose fixed value is this organization's team's queue.
        (backing,) = [d for d in proxies if _meta(d)[0] == namespace and matches_selector(
            {"matchLabels": service["spec"]["selector"]}, d["spec"]["template"]["metadata"]["labels"])]
        args = _args(backing)
        assert _flag(args, "label") == [LABEL]
        assert _flag(args, "label-value") == [queues[org["name"]]], org["name"]
        # Nothing of the request chooses the value, another queue is refused rather than rewritten.
        assert not _flag(args, "query-param") and not _flag(args, "header-name") and "-regex-match" not in args
        assert "-error-on-replace" in args and not _flag(args, "unsafe-passthrough-paths")
        assert _flag(args, "upstream") == [PROMETHEUS_URL]
    # Prometheus itself is the chart's Service on 9090, which only organization 1's datasource names.
    prometheus = urlparse(PROMETHEUS_URL)
    assert prometheus.hostname is not None
    prometheus_name, prometheus_namespace = prometheus.hostname.split(".")
    assert PROMETHEUS_PORT in [p["port"] for p in services[(prometheus_namespace, prometheus_name)]["spec"]["ports"]]
    (chart_sources,) = [c for c in kube_objects(capture, "ConfigMap")
                        if _meta(c) == (MONITORING.namespace, "kube-prometheus-stack-grafana-datasource")]
    admin = yaml.safe_load(chart_sources["data"]["datasource.yaml"])["datasources"]
    (unrestricted,) = [s for s in admin if s["type"] == "prometheus"]
    assert unrestricted["url"].rstrip("/") == PROMETHEUS_URL and unrestricted.get("orgId", 1) == 1
    assert all(urlparse(org["datasource"]["url"]).hostname != prometheus.hostname for org in orgs)


def test_the_program_plan_gives_each_organization_the_proxy_of_its_own_team() -> None:
    platform = platform_of("onprem-lab")
    for org in plan(platform)["orgs"]:
        assert urlparse(org["datasource"]["url"]).hostname == f"{proxy_name(org['name'])}.{MONITORING.namespace}"


def test_a_long_team_name_gets_a_dns_label_of_its_own() -> None:
    at_limit = "t" * (63 - len(APP) - 1)
    assert proxy_name(at_limit) == f"{APP}-{at_limit}"  # 63 characters: kept
    over, other = f"{at_limit}x", f"{at_limit}y"
    assert len(proxy_name(over)) == 63 and proxy_name(over) != proxy_name(other)


@pytest.mark.parametrize("stack", STACKS)
def test_the_proxies_pass_restricted_with_a_pinned_image_and_requests(stack: str) -> None:
    capture = capture_of(stack)
    proxies = [d for d in kube_objects(capture, "Deployment") if d["metadata"]["name"].startswith(f"{APP}-")]
    assert proxies
    for proxy in proxies:
        template = proxy["spec"]["template"]
        assert restricted(template) == [], proxy["metadata"]["name"]
        (container,) = template["spec"]["containers"]
        assert container["image"] == IMAGE and container["resources"]["requests"]
    assert IMAGE in stack_images(kube_objects(capture))
    broken = {"spec": {"containers": [{"name": "x", "image": IMAGE}]}}
    assert restricted(broken)  # the check sees a pod that would be refused


def test_the_worker_of_a_hybrid_stack_runs_no_proxy() -> None:
    """Team organizations exist only where Grafana sits behind the front door (hybrid-burst: the core)."""
    assert "hybrid-burst" in ALL_STACKS
    names = [d["metadata"]["name"] for d in kube_objects(capture_of("hybrid-burst"), "Deployment")
             if d["metadata"]["name"].startswith(f"{APP}-")]
    assert sorted(names) == sorted(proxy_name(team.name) for team in platform_of("hybrid-burst").teams)


# --- the team's dashboards through its proxy ---------------------------------------------------------------------

class Refused(Exception):
    """prom-label-proxy answers HTTP 400: the query's own matcher on the label conflicts with the enforced one."""


def _agrees(matcher: Any, value: str) -> bool:
    """Whether the query's matcher on the enforced label can select `value` (enforce.go, an `=` enforced matcher)."""
    if matcher.op == promql_parser.MatchOp.Equal:
        return bool(matcher.value == value)
    if matcher.op == promql_parser.MatchOp.NotEqual:
        return bool(matcher.value != value)
    matched = re.fullmatch(matcher.value, value) is not None  # Prometheus anchors its regular expressions
    return matched if matcher.op == promql_parser.MatchOp.Re else not matched


def enforce(expr: str, queue: str) -> str:
    """What the team's proxy sends on to Prometheus (prom-label-proxy v0.14.0 injectproxy/enforce.go, one static
    value, -error-on-replace): every selector gets `cluster_queue="<queue>"`, the query's own matcher on it is
    dropped when it agrees and refused when it cannot select the queue."""
    def inject(node: Any) -> Any:
        if not isinstance(node, promql_parser.VectorSelector):
            return None
        assert node.at is None and node.offset is None  # not rebuilt below; the dashboards use neither
        kept = []
        for matcher in node.matchers.matchers:
            if matcher.name == LABEL and not _agrees(matcher, queue):
                raise Refused(f"{matcher} conflicts with {LABEL}={json.dumps(queue)}")
            if matcher.name != LABEL:
                kept.append(str(matcher))
        return promql_parser.parse(f"{node.name or ''}{{{', '.join([*kept, f'{LABEL}={json.dumps(queue)}'])}}}")

    return str(promql_parser.transform(promql_parser.parse(expr), post_visit=inject).prettify())


def _labels(node: Any, known: dict[str, set[str]]) -> set[str]:
    """The labels every series of an expression's result carries (a sound under-approximation for the rules' forms:
    aggregations keep their `by` labels, label_replace adds its target, binary operations keep the left side's)."""
    parser = promql_parser
    if isinstance(node, parser.VectorSelector):
        return set(known.get(node.name or "", set()))
    if isinstance(node, parser.MatrixSelector):
        return _labels(node.vector_selector, known)
    if isinstance(node, (parser.ParenExpr, parser.SubqueryExpr)):
        return _labels(node.expr, known)
    if isinstance(node, parser.AggregateExpr):
        inner, by = _labels(node.expr, known), set(node.modifier.labels) if node.modifier else set()
        return inner & by if node.modifier and node.modifier.type == parser.AggModifierType.By else inner - by
    if isinstance(node, parser.Call):
        vectors = [arg for arg in node.args if not isinstance(arg, (parser.StringLiteral, parser.NumberLiteral))]
        found = _labels(vectors[0], known) if vectors else set()
        return found | {node.args[1].val} if node.func.name == "label_replace" else found
    if isinstance(node, parser.BinaryExpr):
        lhs, rhs = _labels(node.lhs, known), _labels(node.rhs, known)
        if isinstance(node.lhs, parser.NumberLiteral):
            return rhs
        return lhs & rhs if str(node.op) == "or" else lhs
    return set()


def series_labels(platform: Platform) -> dict[str, set[str]]:
    """Every series a team dashboard may read, with the labels all its series carry: the catalog's, and the
    recorded ones as their rules build them (a series recorded by several rules: the labels they all give)."""
    known = {name: set(metric.labels) for metric in CATALOG for name in series_names(metric)}
    recorded: dict[str, set[str]] = {}
    for rule in usage_rules(platform):
        labels = _labels(promql_parser.parse(rule["expr"]), {**known, **recorded}) | set(rule.get("labels", {}))
        recorded[rule["record"]] = recorded[rule["record"]] & labels if rule["record"] in recorded else labels
    return {**known, **recorded}


def _selectors(expr: str) -> list[Any]:
    found: list[Any] = []

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def _queries(board: Obj) -> list[str]:
    """The board's queries as Grafana sends them: the team constant in, a range for $__rate_interval."""
    (constant,) = board["templating"]["list"]
    return [target["expr"].replace("$__rate_interval", "5m").replace("$team", constant["query"])
            for panel in board["panels"] for target in panel["targets"]]


@pytest.mark.parametrize("stack", STACKS)
def test_every_team_dashboard_query_through_its_proxy_selects_only_the_team_s_queue(stack: str) -> None:
    platform = platform_of(stack)
    labels = series_labels(platform)
    queues = {team.name: team.queue for team in platform.teams}
    for org in plan(platform)["orgs"]:
        queue = queues[org["name"]]
        queries = [q for board in org["dashboards"] for q in _queries(board)]
        assert queries and not any("$" in q for q in queries)
        for query in queries:
            sent = enforce(query, queue)
            assert all(LABEL in labels[name] for name in metric_names(sent)), (org["name"], query)
            for selector in _selectors(sent):
                on_label = [m for m in selector.matchers.matchers if m.name == LABEL]
                assert [(m.op, m.value) for m in on_label] == [(promql_parser.MatchOp.Equal, queue)]
            # The same panel, through another team's proxy, either is refused or reads that team's queue only.
            for other in set(queues.values()) - {queue}:
                if any(m.name == LABEL for s in _selectors(query) for m in s.matchers.matchers):
                    with pytest.raises(Refused):
                        enforce(query, other)


def test_a_query_for_another_team_s_queue_is_refused_and_no_query_escapes_the_team_s_own() -> None:
    assert enforce("kueue_pending_workloads", "vision") == 'kueue_pending_workloads{cluster_queue="vision"}'
    with pytest.raises(Refused):
        enforce('kueue_pending_workloads{cluster_queue="nlp"}', "vision")
    with pytest.raises(Refused):
        enforce('sum(kueue_pending_workloads{cluster_queue=~"nlp|speech"})', "vision")
    with pytest.raises(Refused):
        enforce('kueue_pending_workloads{cluster_queue!="vision"}', "vision")
    # Asking for everything, or for the own queue among others, gives the own queue only.
    for asked in ('kueue_pending_workloads', 'kueue_pending_workloads{cluster_queue=~".+"}',
                  'kueue_pending_workloads{cluster_queue=~"nlp|vision"}', '{__name__=~"kueue_.*"}'):
        (selector,) = _selectors(enforce(asked, "vision"))
        assert [(m.name, m.value) for m in selector.matchers.matchers if m.name == LABEL] == [(LABEL, "vision")]


def test_every_series_a_team_reads_carries_its_queue_the_per_pod_idle_series_too() -> None:
    """The usage dashboard is the same for a team as for the admins (the team's proxy can answer each panel): every
    recorded usage series, the per-pod idle one included, carries the team's `cluster_queue`."""
    platform = platform_of("onprem-lab")
    assert platform.observability.dcgm
    labels = series_labels(platform)
    assert {LABEL, "team"} <= labels[IDLE_POD]
    admins = {p["title"] for p in usage_dashboard(platform)["panels"]}
    assert "Workloads with the most idle GPU-hours, per day" in admins
    for org in plan(platform)["orgs"]:
        assert {p["title"] for b in org["dashboards"] for p in b["panels"]} >= admins
    queues = {team.name: team.queue for team in platform.teams}
    for rule in usage_rules(platform):
        if rule["record"] == IDLE_POD:
            assert rule["labels"][LABEL] == queues[rule["labels"]["team"]]


def test_the_label_reader_sees_a_rule_that_drops_the_queue() -> None:
    """series_labels is the oracle above: a rule aggregating the queue away is seen without it."""
    known = {"kueue_pending_workloads": {"cluster_queue", "status"}}
    assert _labels(promql_parser.parse("sum by (status) (kueue_pending_workloads)"), known) == {"status"}
    assert _labels(promql_parser.parse("sum by (cluster_queue) (kueue_pending_workloads) > 0"), known) == \
        {"cluster_queue"}
    assert _labels(promql_parser.parse('label_replace(kueue_pending_workloads, "team", "$1", "cluster_queue", "(.+)")'),
                   known) == {"cluster_queue", "status", "team"}


# --- network: only Grafana reaches the proxies, the proxies reach Prometheus, team pods reach neither -------------

def _namespace(capture: Capture, name: str) -> Obj:
    found = [ns for ns in kube_objects(capture, "Namespace") if _meta(ns)[1] == name]
    labels = {**((found[0]["metadata"].get("labels") or {}) if found else {}), NAME_LABEL: name}
    return {"metadata": {"name": name, "labels": labels}}


def _admits(policies: list[Obj], direction: str, namespace: str, pod: dict[str, str], port: int, peer_ns: Obj,
            peer: dict[str, str]) -> bool:
    """NetworkPolicy semantics on one side of a connection: unisolated in `direction` when no policy of the pod's
    namespace selects it for that direction; else some rule of a selecting policy admits the peer on the port. An
    ipBlock admits any peer (some network plugins match pod addresses with it): the strict reading for a deny."""
    selecting = [p for p in policies if _meta(p)[0] == namespace
                 and direction in p["spec"].get("policyTypes", ["Ingress"])
                 and matches_selector(p["spec"].get("podSelector"), pod)]
    if not selecting:
        return True
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")

    def matches(entry: Obj) -> bool:
        if "ipBlock" in entry:
            return True
        in_ns = (matches_selector(entry["namespaceSelector"], peer_ns["metadata"]["labels"])
                 if "namespaceSelector" in entry else peer_ns["metadata"]["name"] == namespace)
        return in_ns and matches_selector(entry.get("podSelector"), peer)

    return any((not rule.get("ports") or port in [p.get("port") for p in rule["ports"]])
               and (not rule.get(peers_key) or any(matches(e) for e in rule[peers_key]))
               for policy in selecting for rule in policy["spec"].get(rules_key, []))


def reaches(capture: Capture, policies: list[Obj], source: tuple[str, dict[str, str]],
            target: tuple[str, dict[str, str]], port: int) -> bool:
    """The source pod's egress and the target pod's ingress both let the connection through."""
    (src_ns, src), (dst_ns, dst) = source, target
    return (_admits(policies, "Egress", src_ns, src, port, _namespace(capture, dst_ns), dst)
            and _admits(policies, "Ingress", dst_ns, dst, port, _namespace(capture, src_ns), src))


def _team_pods(capture: Capture) -> list[tuple[str, dict[str, str]]]:
    """A training pod and a runtime's initializer pod (the one pod allowed out to the model hub) in every team
    namespace."""
    teams = [_meta(ns)[1] for ns in kube_objects(capture, "Namespace") if TEAM_LABEL in (ns["metadata"].get("labels")
                                                                                        or {})]
    assert teams
    return [(team, labels) for team in teams
            for labels in ({"app": "trainer"}, {REPLICATED_JOB_LABEL: INITIALIZER_JOBS[0]})]


@pytest.mark.parametrize("stack", STACKS)
def test_only_grafana_reaches_the_proxies_and_the_proxies_only_prometheus(stack: str) -> None:
    capture = capture_of(stack)
    policies = kube_objects(capture, "NetworkPolicy")
    monitoring = MONITORING.namespace
    grafana, proxy = (monitoring, GRAFANA_POD_LABELS), (monitoring, PROXY_POD)
    prometheus = (monitoring, PROMETHEUS_POD)
    assert reaches(capture, policies, grafana, proxy, PORT)
    assert not reaches(capture, policies, grafana, proxy, PORT + 1)  # the proxy's port only
    for team_pod in _team_pods(capture):
        assert not reaches(capture, policies, team_pod, proxy, PORT), team_pod
        assert not reaches(capture, policies, team_pod, prometheus, PROMETHEUS_PORT), team_pod
    # Not the gateway, nor the other pods of Grafana's namespace (Alertmanager), nor Prometheus.
    for other in ((ISTIO.namespace, dict(GATEWAY_POD_LABELS)), (monitoring, {"app.kubernetes.io/name": "alertmanager"}),
                  prometheus):
        assert not reaches(capture, policies, other, proxy, PORT), other
    assert reaches(capture, policies, proxy, prometheus, PROMETHEUS_PORT)
    assert reaches(capture, policies, proxy, ("kube-system", DNS_POD), 53)
    assert not reaches(capture, policies, proxy, prometheus, PROMETHEUS_PORT + 1)
    assert not reaches(capture, policies, proxy, grafana, GRAFANA_PORT)
    for team_pod in _team_pods(capture):
        assert not reaches(capture, policies, proxy, team_pod, PROMETHEUS_PORT)
    assert reaches(capture, policies, grafana, prometheus, PROMETHEUS_PORT)  # organization 1, the admins'


def test_without_their_policies_the_proxies_and_prometheus_are_open_to_team_pods() -> None:
    """The denials above come from the rendered policies: the proxies' ingress, the team namespaces' default-deny."""
    capture = capture_of("onprem-lab")
    policies = kube_objects(capture, "NetworkPolicy")
    team_pod = _team_pods(capture)[0]
    proxy, prometheus = (MONITORING.namespace, PROXY_POD), (MONITORING.namespace, PROMETHEUS_POD)
    open_egress = [p for p in policies if not (_meta(p)[0] == team_pod[0] and "Egress" in p["spec"]["policyTypes"])]
    assert reaches(capture, open_egress, team_pod, prometheus, PROMETHEUS_PORT)
    assert not reaches(capture, open_egress, team_pod, proxy, PORT)  # still the proxies' own ingress
    no_proxy_ingress = [p for p in open_egress if not (_meta(p)[0] == MONITORING.namespace
                                                       and "Ingress" in p["spec"]["policyTypes"]
                                                       and matches_selector(p["spec"]["podSelector"], PROXY_POD))]
    assert reaches(capture, no_proxy_ingress, team_pod, proxy, PORT)
