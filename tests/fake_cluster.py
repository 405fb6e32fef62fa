"""A simulated cluster behind tests/fake_kube.py: the stack's nodes and operators, Kueue admitting Workloads by
quota and priority (gang: all pods or none), the Trainer/JobSet starting one pod per node, pods running
infra/accept/program.py's step counter on a volume, the Job controller replacing deleted pods, the restore
drill's Job, and RBAC answering access reviews from the rendered roles and bindings.

Time is a FakeClock: each sleep advances it and lets every controller take one step. `faults` switches on
the misbehaviours the checks must catch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from infra.accept.program import PREFIX
from infra.apiserver.rbac import aggregated
from infra.offline.plan import objects
from infra.platform.observability import NAMESPACE as MONITORING_NAMESPACE
from infra.platform.observability import PROMETHEUS_SERVICE, scrape_jobs
from infra.spec import Platform
from infra.spec.pools import POOL_LABEL
from tests.fake_kube import FakeApiServer, Store

SNAPSHOTS = "snapshot.storage.k8s.io"

TRAINER, KUEUE = "trainer.kubeflow.org", "kueue.x-k8s.io"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
class FakeClock:
    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster, self.time, self.slept = cluster, 1000.0, 0.0

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.time += seconds
        self.slept += seconds
        self.cluster.step()


def _cond(kind: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason or kind, "message": message,
            "lastTransitionTime": "2026-11-30T12:00:00Z"}


def _set(obj: dict[str, Any], *conditions: dict[str, str]) -> None:
    current = [c for c in obj.setdefault("status", {}).get("conditions", [])
               if c["type"] not in {n["type"] for n in conditions}]
    obj["status"]["conditions"] = current + list(conditions)


class SimulatedCluster:
    def __init__(self, platform: Platform, capture: Any = None, faults: Iterable[str] = (),
                 busbw: float = 187.5) -> None:
        self.platform, self.capture, self.faults, self.busbw = platform, capture, set(faults), busbw
        self.store = Store()
        self.api = FakeApiServer(self.store, self.authorize)
        self.volume: dict[tuple[str, str], int] = {}  # (namespace, host) -> saved step
        self.steps: dict[str, int] = {}  # pod name -> steps run by its process
        self.names = itertools.count(1)
        self.extra_grants: set[tuple[str, str, str]] = set()  # (user or group, verb, resource) allowed on top
        self.withheld: set[tuple[str, str, str]] = set()  # ... and denied whatever the bindings say
        self.controllers: list[Callable[[], None]] = []  # further controllers (tests/serving_cluster.py), each step
        self.store.on_create[(TRAINER, "trainjobs")] = self._new_trainjob
        self.store.on_delete[("", "pods")] = self._pod_gone
        self.store.on_delete[(TRAINER, "trainjobs")] = self._trainjob_gone
        self._seed()

    # the cluster as `pulumi up` left it
    def _seed(self) -> None:
        put, platform = self.store.put, self.platform
        for flavor in platform.flavors:
            pool = platform.pool(flavor.pool)
            per_node = {r: str(int(flavor.capacity[r]) // max(pool.node_count, 1)) for r in flavor.gpu_resources}
            if pool.fabric_request:
                per_node[pool.fabric_request[0]] = str(pool.fabric_request[1])
            for node in pool.nodes or [f"{flavor.pool}-{i}" for i in range(pool.node_count)]:
                put("", "nodes", {"metadata": {"name": node, "labels": {**flavor.node_labels,
                                                                          "kubernetes.io/hostname": node}},
                                  "spec": {}, "status": {"allocatable": per_node}})
        for ns, names in (("kueue-system", ["kueue-controller-manager"]),
                          ("kubeflow-system", ["kubeflow-trainer-controller-manager", "jobset-controller-manager"])):
            for name in names:
                put("apps", "deployments", {"metadata": {"name": name, "namespace": ns}, "spec": {
                    "replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": {
                        "metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "manager"}]}}},
                    "status": {"availableReplicas": 1}})
        for group in (KUEUE, TRAINER, "jobset.x-k8s.io", "velero.io"):
            put("apiextensions.k8s.io", "customresourcedefinitions", {
                "metadata": {"name": f"things.{group}"},
                "spec": {"group": group, "names": {"plural": "things", "kind": "Thing"}, "scope": "Namespaced",
                         "versions": []}})
        self._seed_prerequisites()
        for team in platform.teams:
            put(KUEUE, "clusterqueues", {"metadata": {"name": team.queue},
                                         "status": {"conditions": [_cond("Active")]}})
        for ns in ("velero", *(n for t in platform.teams for n in t.namespaces)):
            put("", "namespaces", {"metadata": {"name": ns}})
        for drill in ("restore-drill", *(("journal-drill",) if platform.pipelines else ())):
            put("batch", "cronjobs", {"metadata": {"name": drill, "namespace": "velero"}, "spec": {
                "schedule": "0 5 * * 6", "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "run", "image": "kubectl"}]}}}}}})

    def _seed_prerequisites(self) -> None:
        """What the site or the cloud provides (verify's prerequisite reads) and Prometheus' scrape targets."""
        put, platform = self.store.put, self.platform
        needed = {need.capability for need in platform.prerequisites.needs}
        for driver in sorted(c.removeprefix("csi:") for c in needed if c.startswith("csi:")):
            put("storage.k8s.io", "csidrivers", {"metadata": {"name": driver}, "spec": {"attachRequired": False}})
        for group in sorted({c.removeprefix("crd:") for c in needed if c.startswith("crd:")} | {SNAPSHOTS}):
            put("apiextensions.k8s.io", "customresourcedefinitions", {
                "metadata": {"name": f"things.{group}"},
                "spec": {"group": group, "names": {"plural": "things", "kind": "Thing"}, "scope": "Namespaced",
                         "versions": []}})
        template = {"metadata": {"labels": {"app": "calico-node"}}, "spec": {"containers": [{"name": "calico-node"}]}}
        put("apps", "daemonsets", {"metadata": {"name": "calico-node", "namespace": "kube-system"}, "spec": {
            "selector": {"matchLabels": {"app": "calico-node"}}, "template": template}, "status": {
            "currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 1}})
        for name in ("snapshot-controller", "cluster-autoscaler"):
            put("apps", "deployments", {"metadata": {"name": name, "namespace": "kube-system"}, "spec": {
                "replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": {
                    "metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": name}]}}},
                "status": {"availableReplicas": 1}})
        put("velero.io", "backupstoragelocations", {"metadata": {"name": "default", "namespace": "velero"},
                                                    "status": {"phase": "Available"}})
        targets = [{"labels": {"job": job}, "health": "up"} for job in scrape_jobs(platform)]
        self.api.proxies[f"/api/v1/namespaces/{MONITORING_NAMESPACE}/services/{PROMETHEUS_SERVICE}:http-web/proxy/"
                         "api/v1/targets"] = {"status": "success", "data": {"activeTargets": targets}}

    # RBAC, from the rendered roles and bindings
    def authorize(self, user: str, groups: list[str], attrs: dict[str, Any]) -> bool:
        if user == "admin":
            return True
        asked = [(who, attrs.get("verb"), attrs.get("resource")) for who in (user, *groups)]
        if any(key in self.withheld for key in asked):
            return False
        if any(key in self.extra_grants for key in asked):
            return True
        rendered = [obj for _, obj in objects(self.capture)] if self.capture else []
        roles = aggregated(o for o in rendered if o.get("kind") == "ClusterRole")
        for binding in rendered:
            if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            where = binding["metadata"].get("namespace")
            if where and where != attrs.get("namespace"):
                continue
            if not any(self._is(s, user, groups) for s in binding.get("subjects", [])):
                continue
            if any(self._grants(rule, attrs) for rule in roles.get(binding["roleRef"]["name"], [])):
                return True
        return False

    @staticmethod
    def _is(subject: dict[str, str], user: str, groups: list[str]) -> bool:
        if subject["kind"] == "Group":
            return subject["name"] in groups
        if subject["kind"] == "ServiceAccount":
            return user == f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
        return subject["name"] == user

    @staticmethod
    def _grants(rule: dict[str, Any], attrs: dict[str, Any]) -> bool:
        def has(field: str, value: str) -> bool:
            return "*" in rule.get(field, []) or value in rule.get(field, [])
        return (has("apiGroups", attrs.get("group", "")) and has("resources", attrs.get("resource", ""))
                and has("verbs", attrs.get("verb", "")) and not rule.get("resourceNames"))

    # Kueue
    def _new_trainjob(self, job: dict[str, Any]) -> None:
        job["spec"]["suspend"] = True
        labels = job["metadata"].get("labels", {})
        priority = self.platform.queueing.priorities.get(labels.get("kueue.x-k8s.io/priority-class", ""))
        self.store.put(KUEUE, "workloads", {
            "metadata": {"name": f"trainjob-{job['metadata']['name']}-{next(self.names):05x}",
                         "namespace": job["metadata"]["namespace"],
                         "ownerReferences": [{"apiVersion": f"{TRAINER}/v1alpha1", "kind": "TrainJob",
                                              "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]}]},
            "spec": {"queueName": labels.get("kueue.x-k8s.io/queue-name"), "priority": priority.value if priority
                     else 0, "podSets": [{"name": "node", "count": job["spec"]["trainer"]["numNodes"]}]},
            "status": {"conditions": []}})

    def _job_of(self, workload: dict[str, Any]) -> dict[str, Any] | None:
        ref = workload["metadata"]["ownerReferences"][0]
        return self.store.get(TRAINER, "trainjobs", workload["metadata"]["namespace"], ref["name"])

    def _pool_and_gpus(self, job: dict[str, Any]) -> tuple[str, Decimal]:
        patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        selector = patch["template"]["spec"]["template"]["spec"].get("nodeSelector", {})
        runtime = job["spec"]["runtimeRef"]["name"]
        pool = selector.get(POOL_LABEL) or next(p for p in self.platform.spec.pools if runtime.endswith(f"-{p}"))
        flavor = self.platform.flavor(pool)
        requests = job["spec"]["trainer"]["resourcesPerNode"]["requests"]
        per_node = Decimal(requests.get(flavor.gpu_resources[0], 0)) if flavor.gpu_resources else Decimal(0)
        return pool, per_node * job["spec"]["trainer"]["numNodes"]

    def _limit(self, team: str, pool: str) -> Decimal:
        flavor = self.platform.flavor(pool)
        if not flavor.gpu_resources:
            return Decimal(10**6)
        entry = next(e for e in self.platform.queueing.queue(team).flavors if e.flavor == pool)
        resource, capacity = flavor.gpu_resources[0], flavor.capacity[flavor.gpu_resources[0]]
        borrow = entry.borrowing.get(resource)
        return min(capacity, entry.nominal.get(resource, Decimal(0)) + (capacity if borrow is None else borrow))

    def _admitted(self) -> list[dict[str, Any]]:
        def holds(workload: dict[str, Any]) -> bool:
            true = {c["type"] for c in workload["status"]["conditions"] if c["status"] == "True"}
            return "Admitted" in true and "Finished" not in true
        return [w for w in self.store.list(KUEUE, "workloads") if holds(w)]

    def _event(self, namespace: str, kind: str, name: str, reason: str, message: str) -> None:
        self.store.put("", "events", {"metadata": {"name": f"{name}.{next(self.names):x}", "namespace": namespace},
                                      "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
                                      "reason": reason, "message": message, "type": "Normal",
                                      "lastTimestamp": "2026-11-30T12:00:00Z"})

    def _admit(self) -> None:
        pending = [w for w in self.store.list(KUEUE, "workloads") if w not in self._admitted()
                   and not any(c["type"] == "Finished" for c in w["status"]["conditions"])]
        for workload in sorted(pending, key=lambda w: -w["spec"]["priority"]):
            job = self._job_of(workload)
            if job is None:
                continue
            team, (pool, gpus) = workload["spec"]["queueName"], self._pool_and_gpus(job)
            ns, name = workload["metadata"]["namespace"], workload["metadata"]["name"]
            used = [w for w in self._admitted() if w["spec"]["queueName"] == team]
            held = sum((self._pool_and_gpus(j)[1] for w in used if (j := self._job_of(w))), Decimal(0))
            limit = self._limit(team, pool)
            fits = held + gpus <= limit or "over_quota" in self.faults
            if not fits and gpus <= limit and "no_preemption" not in self.faults:
                fits = self._preempt(used, workload, limit - gpus)
            if not fits:
                _set(workload, _cond("QuotaReserved", "False", "Pending",
                                     f"couldn't assign flavors to pod set node: insufficient quota for GPUs in "
                                     f"flavor {pool}, {gpus} more needed"))
                if "partial_gang" in self.faults:
                    self._start(job, 1)  # a pod started before the whole gang was admitted
                continue
            workload["status"]["admission"] = {"clusterQueue": team, "podSetAssignments": [
                {"name": "node", "flavors": {"gpu": pool}, "count": workload["spec"]["podSets"][0]["count"]}]}
            _set(workload, _cond("QuotaReserved"), _cond("Admitted"))
            self._event(ns, "Workload", name, "Admitted", f"Admitted by ClusterQueue {team}")
            job["spec"]["suspend"] = False

    def _preempt(self, used: list[dict[str, Any]], workload: dict[str, Any], room: Decimal) -> bool:
        lower = sorted((w for w in used if w["spec"]["priority"] < workload["spec"]["priority"]),
                       key=lambda w: w["spec"]["priority"])
        held = sum((self._pool_and_gpus(j)[1] for w in used if (j := self._job_of(w))), Decimal(0))
        victims = []
        for victim in lower:
            if held <= room:
                break
            victims.append(victim)
            held -= self._pool_and_gpus(self._job_of(victim) or {})[1]
        if held > room:
            return False
        for victim in victims:
            _set(victim, _cond("Evicted", reason="Preempted"), _cond("Preempted", reason="InClusterQueue"),
                 _cond("Admitted", "False"), _cond("QuotaReserved", "False"))
            victim["status"].pop("admission", None)
            job = self._job_of(victim)
            if job:
                job["spec"]["suspend"] = True
                for pod in self._pods(job):
                    self.store.delete("", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
            self._event(victim["metadata"]["namespace"], "Workload", victim["metadata"]["name"], "Preempted",
                        f"Preempted to accommodate {workload['metadata']['name']}")
        return True

    # Trainer, JobSet, the Job controller and the kubelet
    def _pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        return [p for p in self.store.list("", "pods", job["metadata"]["namespace"])
                if p["metadata"]["labels"].get(JOBSET_LABEL) == job["metadata"]["name"]]

    def _start(self, job: dict[str, Any], count: int | None = None) -> None:
        existing = {p["spec"]["hostname"] for p in self._pods(job)}
        for index in range(count if count is not None else job["spec"]["trainer"]["numNodes"]):
            host = f"{job['metadata']['name']}-node-0-{index}"
            if host not in existing:
                self._pod(job, host)

    def _pod(self, job: dict[str, Any], host: str) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        env = {e["name"]: e["value"] for e in job["spec"]["trainer"]["env"]}
        self.store.put("", "pods", {
            "metadata": {"name": f"{host}-{next(self.names):05x}", "namespace": ns,
                         "labels": {JOBSET_LABEL: name, "jobset.sigs.k8s.io/replicatedjob-name": "node"}},
            "spec": {"hostname": host, "containers": [{"name": "node", "env": [
                {"name": k, "value": v} for k, v in env.items()]}], "nodeName": None},
            "status": {"phase": "Pending"}})

    def _place(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        pool, _ = self._pool_and_gpus(job)
        busy = {p["spec"]["nodeName"] for p in self._pods(job) if p["spec"].get("nodeName")
                and p["status"]["phase"] in ("Pending", "Running")}
        nodes = [n for n in self.store.list("", "nodes") if n["metadata"]["labels"].get(POOL_LABEL) == pool
                 and not n["spec"].get("unschedulable") and n["metadata"]["name"] not in busy]
        patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        preferred = patch["template"]["spec"]["template"]["spec"].get("affinity", {}).get("nodeAffinity", {})
        wanted = [t["preference"]["matchExpressions"][0]["values"][0]
                  for t in preferred.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
        nodes.sort(key=lambda n: n["metadata"]["name"] not in wanted)
        if nodes:
            pod["spec"]["nodeName"] = nodes[0]["metadata"]["name"]

    def _run(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        ns, name, host = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["spec"]["hostname"]
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
        log = self.api.logs.setdefault((ns, name), [])
        if pod["status"]["phase"] == "Pending":
            if not pod["spec"].get("nodeName"):
                self._place(pod, job)
            if pod["spec"].get("nodeName"):
                pod["status"]["phase"] = "Running"
                resumed = 0 if "restart_from_zero" in self.faults else self.volume.get((ns, host), 0)
                log.append(f"{PREFIX} start host={host} resumed_from={resumed}")
                self.steps[name] = resumed
                if env.get("ACCEPT_ALLREDUCE") == "1" and host.endswith("-0") and "no_allreduce" not in self.faults:
                    ranks = job["spec"]["trainer"]["numNodes"]
                    log.append(f"{PREFIX} allreduce ranks={ranks} bytes=268435456 busbw_gbps={self.busbw:.2f}")
            return
        if pod["status"]["phase"] != "Running" or "never_complete" in self.faults:
            return
        step = self.steps[name] + 1
        self.steps[name] = self.volume[(ns, host)] = step
        log.append(f"{PREFIX} step={step} host={host}")
        if step >= int(env["ACCEPT_STEPS"]):
            log.append(f"{PREFIX} done host={host} steps={step}")
            pod["status"]["phase"] = "Succeeded"

    def _pod_gone(self, pod: dict[str, Any], evicted: bool) -> None:
        labels = pod["metadata"].get("labels", {})
        job = self.store.get(TRAINER, "trainjobs", pod["metadata"]["namespace"], labels.get(JOBSET_LABEL, ""))
        if job is None or job["spec"].get("suspend"):
            return
        if evicted and "job_fails_on_drain" in self.faults:
            _set(job, _cond("Failed", reason="BackoffLimitExceeded"))
            return
        self._pod(job, pod["spec"]["hostname"])  # the child Job replaces its pod

    def _trainjob_gone(self, job: dict[str, Any], _: bool) -> None:
        for workload in self.store.list(KUEUE, "workloads", job["metadata"]["namespace"]):
            if workload["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]:
                self.store.delete(KUEUE, "workloads", job["metadata"]["namespace"], workload["metadata"]["name"])
        for pod in self._pods(job):
            self.store.delete("", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _drill(self) -> None:
        """Each drill Job in velero: a pod on the first step, its verdict on the next (fault `drill_fails`: the
        volume drill fails, `journal_drill_fails`: the journal drill)."""
        for job in self.store.list("batch", "jobs", "velero"):
            if job.get("status", {}).get("conditions"):
                continue
            name = job["metadata"]["name"]
            pod = f"{name}-x1"
            if not any(p["metadata"]["name"] == pod for p in self.store.list("", "pods", "velero")):
                self.store.put("", "pods", {"metadata": {"name": pod, "namespace": "velero",
                                                         "labels": {"job-name": name}},
                                            "spec": {"containers": [{"name": "run"}]}, "status": {"phase": "Running"}})
                continue
            journal = name.startswith("journal-drill")
            if ("journal_drill_fails" if journal else "drill_fails") in self.faults:
                self.api.logs[("velero", pod)] = [
                    "drill drill-20261130-120000 FAILED: run 5f0c (started before the backup) is not in the restored "
                    "mlpipeline.run_details" if journal else
                    "drill drill-20261130-120000 FAILED: restore ended PartiallyFailed (0 errors, 2 warnings)"]
                _set(job, _cond("Failed", reason="BackoffLimitExceeded"))
            else:
                self.api.logs[("velero", pod)] = [
                    "journal drill drill-20261130-120000 passed: backup daily-20261130020000 restored in 95s; the "
                    "journal holds 12 runs; run 5f0c is in mlpipeline.run_details and ML Metadata" if journal else
                    "drill drill-20261130-120000 passed: backup daily-20261130020000 (completed "
                    "2026-11-30T02:10:00Z, 10h old) restored in 312s; markers of " + " ".join(
                        f"{s}={d}" for s, d in self.platform.backup.drill_namespaces.items()) + " verified"]
                _set(job, _cond("Complete"))

    def step(self) -> None:
        with self.store.lock:
            self._admit()
            for job in self.store.list(TRAINER, "trainjobs"):
                if job["spec"].get("suspend") or any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
                                                     for c in job.get("status", {}).get("conditions", [])):
                    continue
                self._start(job)
                for pod in self._pods(job):
                    self._run(pod, job)
                hosts = {f"{job['metadata']['name']}-node-0-{i}" for i in range(job["spec"]["trainer"]["numNodes"])}
                if hosts <= {p["spec"]["hostname"] for p in self._pods(job) if p["status"]["phase"] == "Succeeded"}:
                    _set(job, _cond("Complete"))
                    for workload in self.store.list(KUEUE, "workloads", job["metadata"]["namespace"]):
                        if workload["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]:
                            _set(workload, _cond("Finished"))
            self._drill()
            for controller in self.controllers:
                controller()
