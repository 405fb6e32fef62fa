"""Pod Security admission: the baseline and restricted Pod Security Standards as Kubernetes 1.31 to 1.35 define
them (k8s.io/pod-security-admission/policy, checks at their latest version), enforced at the level of the
target namespace's `pod-security.kubernetes.io/enforce` label (unlabelled: privileged, the API server default).

The server enforces on Pods; for workloads it only warns, and their controllers' Pods are then refused. The
offline answer refuses both, saying which: a Job whose Pods can never start is not an admitted Job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infra.apiserver.state import ClusterState, decoded
from infra.apiserver.verdict import Refusal

FAMILY = "pod-security"
ENFORCE = "pod-security.kubernetes.io/enforce"
LEVELS = ("privileged", "baseline", "restricted")
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                          "net.ipv4.ip_unprivileged_port_start",
                          "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                          "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                          "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                                "projected", "secret"})
CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")
TEMPLATE_PATHS = {"Deployment": ("spec", "template"), "StatefulSet": ("spec", "template"),
                  "DaemonSet": ("spec", "template"), "ReplicaSet": ("spec", "template"), "Job": ("spec", "template"),
                  "CronJob": ("spec", "jobTemplate", "spec", "template")}
POD_KINDS = frozenset({"Pod", "JobSet", "TrainJob", *TEMPLATE_PATHS})  # the kinds pod_templates reads pods from


def pod_templates(obj: dict[str, Any], cluster: ClusterState) -> list[tuple[str, dict[str, Any]]]:
    """(field path, pod template {metadata, spec}) of every pod the object creates; a TrainJob's come from the
    runtime it names."""
    kind = obj.get("kind", "")
    if kind == "Pod":
        return [("", obj)]
    if kind in TEMPLATE_PATHS:
        node: Any = obj
        for step in TEMPLATE_PATHS[kind]:
            node = node.get(step, {}) if isinstance(node, dict) else {}
        return [(".".join(TEMPLATE_PATHS[kind]), node)]
    if kind == "JobSet":
        return [(f"spec.replicatedJobs[{i}].template.spec.template", job.get("template", {}).get("spec", {})
                 .get("template", {})) for i, job in enumerate(obj.get("spec", {}).get("replicatedJobs", []))]
    if kind == "TrainJob":
        ref = obj.get("spec", {}).get("runtimeRef", {})
        runtime = cluster.runtime(str(ref.get("kind", "ClusterTrainingRuntime")), str(ref.get("name", "")),
                                  str(obj.get("metadata", {}).get("namespace", "")))
        if runtime is None:
            return []
        jobs = runtime.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", [])
        return [(f"runtime {runtime['metadata']['name']} job {job.get('name')}",
                 job.get("template", {}).get("spec", {}).get("template", {})) for job in jobs]
    return []


def _containers(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for field in CONTAINER_FIELDS:
        for i, container in enumerate(spec.get(field, [])):
            yield f"spec.{field}[{i}]", container


def baseline(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec", {})
    context = spec.get("securityContext", {})
    found = [f"spec.{key}=true: host namespaces" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    found += [f"spec.volumes[{i}].hostPath: hostPath volumes" for i, v in enumerate(spec.get("volumes", []))
              if "hostPath" in v]
    found += [f"spec.securityContext.sysctls[{s.get('name')}]: forbidden sysctl" for s in context.get("sysctls", [])
              if s.get("name") not in SAFE_SYSCTLS]
    found += _profile_problems("spec.securityContext", context)
    annotations = pod.get("metadata", {}).get("annotations", {})
    found += [f"metadata.annotations[{k}]={v}: AppArmor profile" for k, v in annotations.items()
              if k.startswith("container.apparmor.security.beta.kubernetes.io/") and v not in (
                  "runtime/default", "") and not v.startswith("localhost/")]
    for path, container in _containers(spec):
        ctx = container.get("securityContext", {})
        if ctx.get("privileged"):
            found.append(f"{path}.securityContext.privileged=true")
        added = sorted(set(ctx.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES)
        if added:
            found.append(f"{path}.securityContext.capabilities.add={added}: non-default capabilities")
        found += [f"{path}.ports[{i}].hostPort={p['hostPort']}: host ports"
                  for i, p in enumerate(container.get("ports", [])) if p.get("hostPort")]
        if ctx.get("procMount", "Default") != "Default":
            found.append(f"{path}.securityContext.procMount={ctx['procMount']}")
        found += _profile_problems(f"{path}.securityContext", ctx)
    return found


def _profile_problems(path: str, ctx: dict[str, Any]) -> list[str]:
    found = []
    if ctx.get("windowsOptions", {}).get("hostProcess"):
        found.append(f"{path}.windowsOptions.hostProcess=true")
    if ctx.get("seccompProfile", {}).get("type") == "Unconfined":
        found.append(f"{path}.seccompProfile.type=Unconfined")
    if ctx.get("appArmorProfile", {}).get("type") == "Unconfined":
        found.append(f"{path}.appArmorProfile.type=Unconfined")
    selinux = ctx.get("seLinuxOptions", {})
    if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        found.append(f"{path}.seLinuxOptions: forbidden SELinux type, user or role")
    return found


def restricted(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec", {})
    pod_ctx = spec.get("securityContext", {})
    found = [f"spec.volumes[{i}]: restricted volume type {sorted(set(v) - {'name'})}"
             for i, v in enumerate(spec.get("volumes", [])) if not set(v) - {"name"} <= RESTRICTED_VOLUMES]
    if pod_ctx.get("runAsUser") == 0:
        found.append("spec.securityContext.runAsUser=0")
    for path, container in _containers(spec):
        ctx = container.get("securityContext", {})
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.append(f"{path}.securityContext.allowPrivilegeEscalation != false")
        if not ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")):
            found.append(f"{path}.securityContext.runAsNonRoot != true (here or on the pod)")
        if ctx.get("runAsUser") == 0:
            found.append(f"{path}.securityContext.runAsUser=0")
        seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{path}.securityContext.seccompProfile.type must be RuntimeDefault or Localhost "
                         "(here or on the pod)")
        capabilities = ctx.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{path}.securityContext.capabilities.drop must include ALL")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{path}.securityContext.capabilities.add may only be NET_BIND_SERVICE")
    return found


def level_of(namespace: str, cluster: ClusterState) -> str:
    labels = cluster.namespace_labels(namespace) or {}
    level = labels.get(ENFORCE, "privileged")
    return level if level in LEVELS else "restricted"  # an unknown level fails closed, as the server does


def review(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    if str(obj.get("kind")) not in POD_KINDS:  # nothing to judge: not worth copying (a CRD is megabytes)
        return []
    obj = decoded(obj)
    namespace = str(obj.get("metadata", {}).get("namespace", ""))
    level = level_of(namespace, cluster) if namespace else "privileged"
    if level == "privileged":
        return []
    found = []
    for path, template in pod_templates(obj, cluster):
        problems = baseline(template) + (restricted(template) if level == "restricted" else [])
        if problems:
            pods = "" if obj.get("kind") == "Pod" else "its Pods would be refused: "
            found.append(Refusal(FAMILY, path, f"{pods}violates PodSecurity \"{level}:latest\" of namespace "
                                 f"{namespace}: {'; '.join(problems)}", "Forbidden"))
    return found
