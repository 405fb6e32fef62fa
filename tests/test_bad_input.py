"""Each class of careless stack file found by trying one defect at a time (issue 14) is refused before anything
runs: exit 2, one line naming the field path, and no traceback. The valid neighbours of each refusal (at the
limit) are accepted, so the checks cannot simply refuse everything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.commands import main
from infra.spec import SpecError, load_file, validate
from infra.spec.input.load import PLATFORM_KEY
from tests.conftest import platform_of, raw_platform, stack_file, write_stack
from tests.edits import Edit, set_at
from tests.test_bad_config import _assert_one_clean_line
from tests.test_bad_config import _delete as drop

put = set_at  # a dotted path in the platform mapping ('pools.h100.perNode')


def both(*edits: Edit) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        for one in edits:
            one(raw)
    return edit


LAB, AWS, GCP, AZURE, LOCAL, HYBRID = "onprem-lab", "aws-prod", "gcp-prod", "azure-prod", "local", "hybrid-burst"
P = "trainyard:platform."

CLUSTER_NOT_NAMED: tuple[Any, ...] = ({}, [], 5, "lab2")
# Credentials in the formats their issuers publish (the documentation's own example values where there is one).
TOKENS = [("GitHub token", "ghp_" + "a1B2" * 9), ("GitHub token", "github_pat_" + "11ABCDEFG0" * 4),
          ("Slack token", "xoxb-123456789012-abcdefghijkl"),
          ("Slack incoming-webhook URL", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"),
          ("AWS access key id", "AKIAIOSFODNN7EXAMPLE"), ("Google API key", "AIza" + "Sy" + "A1b2C3d4" * 4 + "_")]
# class -> [(case id, stack, edit, words the one line must contain)]
CLASSES: dict[str, list[tuple[str, str, Edit, tuple[str, ...]]]] = {
    "boolean or string taken as a number": [
        ("perNode true", LAB, put("pools.h100.perNode", True), (P + "pools.h100.perNode", "boolean")),
        ("quota yes", LAB, put("teams.nlp.quota.h100", True), (P + "teams.nlp.quota.h100", "boolean")),
        ("count true", AWS, put("pools.cpu.count", True), (P + "pools.cpu.count", "boolean")),
        ("backoffLimitCount true", LAB, put("queueing.waitForPodsReady.backoffLimitCount", True),
         (P + "queueing.waitForPodsReady.backoffLimitCount", "boolean")),
        ("weight true", LAB, put("teams.nlp.weight", True), (P + "teams.nlp.weight",)),
        ("timeSlicing as text", LAB, put("pools.l40s.sharing", {"timeSlicing": "2"}),
         (P + "pools.l40s.sharing.timeSlicing", "'2'", "whole number")),
        ("autoscale max as text", AWS, put("pools.l40s.autoscale.max", "6"), (P + "pools.l40s.autoscale.max",)),
        ("fairSharing as a number", LAB, put("queueing.fairSharing", 1), (P + "queueing.fairSharing",)),
    ],
    "memory without a unit": [
        ("pool memory as a number", LAB, put("pools.cpu.memory", 256), (P + "pools.cpu.memory", "256", "unit")),
        ("pool memory as bare text", LAB, put("pools.h100.memory", "1900"), (P + "pools.h100.memory", "unit")),
        ("quota memory as a number", LAB, put("teams.vision.quota.cpu", {"cpu": 32, "memory": 128}),
         (P + "teams.vision.quota.cpu.memory", "unit")),
        ("millibytes", LAB, put("pools.cpu.memory", "500m"), (P + "pools.cpu.memory", "'m'", "unit of bytes")),
        ("prometheus volume as a number", LAB, put("observability.storage", "10"),
         (P + "observability.storage", "'10'", "unit")),
        ("team volume as a number", LAB, put("storage.volumes.datasets", 100),
         (P + "storage.volumes.datasets", "unit")),
        ("namespace storage quota as a number", LAB, put("teams.nlp.namespaceQuota", {"storage": "500"}),
         (P + "teams.nlp.namespaceQuota.storage", "unit")),
    ],
    "volumes of no size": [
        ("prometheus volume 0Gi", LAB, put("observability.storage", "0Gi"), (P + "observability.storage", "above 0")),
        ("team volume 0", LAB, put("storage.teams.nlp", {"checkpoints": 0}),
         (P + "storage.teams.nlp.checkpoints", "above 0")),
    ],
    "alert grouping Alertmanager refuses": [
        ("label with a space", LAB, put("observability.alerting.groupBy", ["alertname", "bad label"]),
         (P + "observability.alerting.groupBy", "'bad label'", "label name")),
        ("label twice", LAB, put("observability.alerting.groupBy", ["node", "node"]),
         (P + "observability.alerting.groupBy", "twice")),
        ("every label beside a label", LAB, put("observability.alerting.groupBy", ["...", "node"]),
         (P + "observability.alerting.groupBy", "alone")),
        ("retention in words", LAB, put("observability.retention", "30 days"),
         (P + "observability.retention", "'30 days'", "days or weeks", "15d")),
    ],
    "GPUs per node beyond the model": [
        ("16 H100 SXM", LAB, put("pools.h100.perNode", 16), (P + "pools.h100.perNode", "at most 8")),
        ("12 L40S", LAB, put("pools.l40s.perNode", 12), (P + "pools.l40s.perNode", "at most 10")),
        ("32 T4", LOCAL, put("pools.gpu.perNode", 32), (P + "pools.gpu.perNode", "at most 20")),
        ("GPUs of the pool as perNode", LAB, put("pools.h100.perNode", 32), (P + "pools.h100.perNode", "one node")),
    ],
    "absurd node counts": [
        ("count 100000", AWS, put("pools.cpu.count", 100000), (P + "pools.cpu.count", "5000")),
        ("autoscale max 1e6", AWS, put("pools.l40s.autoscale.max", 1000000), (P + "pools.l40s.autoscale.max", "5000")),
        ("pools summing past the limit", AWS, both(put("pools.cpu.count", 3000), put("pools.l40s.autoscale.max", 3000)),
         (P + "pools.", "5000", "nodes")),
    ],
    "node cpu or memory of nothing or of a whole pool": [
        ("cpu 0", LAB, put("pools.cpu.cpu", 0), (P + "pools.cpu.cpu", "'0'", "nothing")),
        ("memory 0Gi", LAB, put("pools.cpu.memory", "0Gi"), (P + "pools.cpu.memory", "nothing")),
        ("cpu one past the bound", LAB, put("pools.h100.cpu", "4097"), (P + "pools.h100.cpu", "4096", "one node")),
        ("memory 1Mi past the bound", LAB, put("pools.h100.memory", f"{64 * 2**20 + 1}Mi"),
         (P + "pools.h100.memory", "64Ti")),
        ("memory of a pool", LAB, put("pools.h100.memory", "100Ti"), (P + "pools.h100.memory", "one node")),
    ],
    "numbers past the int32 a controller reads": [
        ("backoffLimitCount 2^31", LAB, put("queueing.waitForPodsReady.backoffLimitCount", 2**31),
         (P + "queueing.waitForPodsReady.backoffLimitCount", "2147483647")),
        ("backoffMaxSeconds 2^31", LAB, put("queueing.waitForPodsReady.backoffMaxSeconds", 2**31),
         (P + "queueing.waitForPodsReady.backoffMaxSeconds", "2147483647")),
        ("priority value 2^31", LAB, put("queueing.priorities", {"production": {"value": 2**31}}),
         (P + "queueing.priorities.production.value", "2147483647")),
    ],
    "label keys Kubernetes refuses": [
        ("topology label of 64 characters", LAB, put("pools.h100.topology", {"rack": "example.com/" + "r" * 64}),
         (P + "pools.h100.topology.rack", "63 characters")),
        ("topology level not a DNS label", LAB, put("pools.h100.topology", {"Rack": "topology.kubernetes.io/rack"}),
         (P + "pools.h100.topology.Rack", "DNS label")),
        ("topology label not text", LAB, put("pools.h100.topology", {"rack": 5}), (P + "pools.h100.topology.rack",)),
        ("pool label with a bad prefix", LAB, put("pools.cpu.labels", {"Example.com/tier": "cpu"}),
         (P + "pools.cpu.labels", "prefix")),
    ],
    "reservation of another form": [
        ("gcp name with a space", GCP, put("pools.h100.reservation", "a3 h100"),
         (P + "pools.h100.reservation", "name")),
        ("gcp name starting with a digit", GCP, put("pools.h100.reservation", "3a-h100"),
         (P + "pools.h100.reservation", "starting with a letter")),
        ("aws name", AWS, put("pools.h100", {"instanceType": "p5.48xlarge", "count": 1, "capacityType": "reserved",
                                             "zone": "us-east-1a", "fabric": "none", "reservation": "my-block"}),
         (P + "pools.h100.reservation", "cr-")),
        ("azure name", AZURE, both(put("pools.h100.capacityType", "reserved"), put("pools.h100.reservation", "crg")),
         (P + "pools.h100.reservation", "capacityReservationGroups")),
    ],
    "a section given as a scalar or a list": [
        ("hybrid teams 0", HYBRID, put("teams", 0), (P + "teams", "mapping")),
        ("hybrid burst []", HYBRID, put("teams.nlp.burst", []), (P + "teams.nlp.burst", "mapping")),
        ("hybrid burst ''", HYBRID, put("teams.nlp.burst", ""), (P + "teams.nlp.burst", "mapping")),
    ],
    "nfs server not a host": [
        (f"server {server!r}", LOCAL, put("storage.nfs.server", server), (P + "storage.nfs.server", "host name"))
        for server in ("has space", "-nfs", "nfs_server", "Ünï")
    ],
    "a hybrid pool's cluster not named": [
        (f"cluster {value!r}", HYBRID, put("pools.h100.cluster", value), (P + "pools.h100.cluster", "not a declared"))
        for value in CLUSTER_NOT_NAMED
    ],
    "a worker's view of the manager inside its own network": [
        ("link from inside the VPC", HYBRID, put("clusters.burst.link.from", "10.50.0.0/28"),
         (P + "clusters.burst.link.from", "10.50.0.0/28", "eks.network.create.cidr")),
        ("object store inside the VPC", HYBRID, put("clusters.burst.data.manager.cidr", "10.50.255.240/28"),
         (P + "clusters.burst.data.manager.cidr", "overlaps")),
        ("link around the VPC", HYBRID, put("clusters.burst.link.from", "10.0.0.0/8"),
         (P + "clusters.burst.link.from", "overlaps")),
        ("timeout on a worker", HYBRID, put("clusters.burst.workerLostTimeout", "30m"),
         (P + "clusters.burst.workerLostTimeout", "manager")),
    ],
    "groups no login of the cloud produces": [
        ("gke admins without a domain", GCP, put("identity.platformAdmins", ["platform-admins"]),
         (P + "identity.platformAdmins", "'platform-admins'", "email")),
        ("gke team group without a domain", GCP, put("teams.nlp.groups", {"engineers": "nlp-eng"}),
         (P + "teams.nlp.groups.engineers", "'nlp-eng'", "Google group")),
        ("gke with an oidc prefix", GCP, put("identity.groupPrefix", "oidc:"), (P + "identity.groupPrefix", "''")),
        ("aks group by name", AZURE, put("teams.vision.groups", {"analysts": ["vision-read"]}),
         (P + "teams.vision.groups.analysts", "'vision-read'", "object id")),
        ("aks object id in capitals", AZURE, put("identity.platformAdmins", ["3B5C9A1E-7D4F-4E2A-9C1B-2F6D8E0A4B7C"]),
         (P + "identity.platformAdmins", "lowercase")),
    ],
    "backoff and waiting times": [
        ("base above max", LAB, put("queueing.waitForPodsReady.backoffBaseSeconds", 7200),
         (P + "queueing.waitForPodsReady.backoffBaseSeconds", "7200", "3600")),
        ("base above a lowered max", LAB, put("queueing.waitForPodsReady.backoffMaxSeconds", 30),
         (P + "queueing.waitForPodsReady.backoffBaseSeconds", "60", "30")),
        ("zero timeout", LAB, put("queueing.waitForPodsReady.timeout", "0m"),
         (P + "queueing.waitForPodsReady.timeout", "zero")),
    ],
    "reserved or colliding namespace": [
        *[(f"team {name}", LAB, put(f"teams.{name}", {"quota": {"h100": 0}}), (P + f"teams.{name}", "reserved"))
          for name in ("kube-system", "default", "kueue-system", "kubeflow-system", "velero", "gpu-operator",
                       "rook-ceph", "monitoring", "drill-vision", "kube-extra")],
        ("namespaces [kube-public]", LAB, put("teams.nlp.namespaces", ["kube-public"]),
         (P + "teams.nlp.namespaces", "reserved")),
        ("namespaces [drill-speech]", LAB, put("teams.nlp.namespaces", ["drill-speech"]),
         (P + "teams.nlp.namespaces", "reserved")),
        ("another team's namespace", LAB, put("teams.nlp.namespaces", ["speech-eval"]),
         (P + "teams.speech.namespaces", "speech-eval", "nlp")),
    ],
    "storage profile of another cloud": [
        ("gcp storage on eks", AWS, put("storage.profile", "gcp"), (P + "storage.profile", "'gcp'", "aws")),
        ("azure storage on gke", GCP, put("storage.profile", "azure"), (P + "storage.profile", "'azure'", "gcp")),
        ("aws storage on aks", AZURE, put("storage.profile", "aws"), (P + "storage.profile", "'aws'", "azure")),
    ],
    "cron out of range or free text": [
        ("hour 25", LAB, put("backup.tiers", {"daily": {"schedule": "0 25 * * *", "ttl": "720h"}}),
         (P + "backup.tiers.daily.schedule", "hour 25")),
        ("free text", LAB, put("backup.tiers", {"daily": {"schedule": "every day", "ttl": "720h"}}),
         (P + "backup.tiers.daily.schedule", "five fields")),
        ("five words of text", LAB, put("backup.tiers", {"daily": {"schedule": "every day at two am", "ttl": "720h"}}),
         (P + "backup.tiers.daily.schedule", "minute")),
        ("month 13", LAB, put("backup.tiers", {"daily": {"schedule": "0 2 1 13 *", "ttl": "9000h"}}),
         (P + "backup.tiers.daily.schedule", "month 13")),
        ("drill minute 61", LAB, put("backup.drill", {"schedule": "61 5 * * 1"}), (P + "backup.drill.schedule", "61")),
        ("cleanup day 32", LAB, put("storage.cleanup", {"schedule": "0 0 32 * *"}),
         (P + "storage.cleanup.schedule", "32")),
        ("step zero", LAB, put("storage.cleanup", {"schedule": "*/0 * * * *"}), (P + "storage.cleanup.schedule",)),
        ("30 February", LAB, put("backup.tiers", {"daily": {"schedule": "0 2 30 2 *", "ttl": "9000h"}}),
         (P + "backup.tiers.daily.schedule", "never runs", "day 30")),
        ("31st of the 30-day months", LAB, put("storage.cleanup", {"schedule": "0 0 31 APR,JUN,SEP,NOV *"}),
         (P + "storage.cleanup.schedule", "never runs", "day 31")),
    ],
    "a list naming one entry twice, a range given by an address in it": [
        ("gke pods range with host bits", GCP, put("cluster.gke.network.create.pods", "10.50.0.0/14"),
         (P + "cluster.gke.network.create.pods", "10.48.0.0/14")),
        ("backup tier team twice", LAB, put("backup.tiers", {"daily": {"schedule": "0 2 * * *", "ttl": "720h",
                                                                      "teams": ["nlp", "vision", "nlp"]}}),
         (P + "backup.tiers.daily.teams", "twice")),
    ],
    "zero or too-short TTLs and backup ages": [
        ("ttl 0h", LAB, put("backup.tiers", {"daily": {"schedule": "0 2 * * *", "ttl": "0h"}}),
         (P + "backup.tiers.daily.ttl", "0h")),
        ("daily ttl 12h", LAB, put("backup.tiers", {"daily": {"schedule": "0 2 * * *", "ttl": "12h"}}),
         (P + "backup.tiers.daily.ttl", "24h")),
        ("drill age 0h", LAB, put("backup.drill", {"maxBackupAge": "0h"}), (P + "backup.drill.maxBackupAge",)),
        ("drill age above the ttl", LAB, put("backup.drill", {"maxBackupAge": "1000h"}),
         (P + "backup.drill.maxBackupAge", "720h", "expired")),
        ("drilled tier expires first", LAB, put("backup.tiers", {"daily": {"schedule": "0 2 * * *", "ttl": "24h"}}),
         (P + "backup.tiers.daily.ttl", "expired")),
        ("finished jobs kept 0h", LAB, put("storage.cleanup", {"finishedTrainJobs": "0h"}),
         (P + "storage.cleanup.finishedTrainJobs", "0h")),
    ],
    "regions, zones and locations that do not exist": [
        ("aws region", AWS, put("cluster.eks.region", "us-east-9"), (P + "cluster.eks.region", "us-east-9")),
        ("aws zone of another region", AWS,
         put("cluster.eks.network", {"create": {"cidr": "10.40.0.0/16", "zones": ["us-east-1a", "us-west-2b"]}}),
         (P + "cluster.eks.network.create.zones", "us-west-2b", "us-east-1")),
        ("aws zone letter", AWS,
         put("cluster.eks.network", {"create": {"cidr": "10.40.0.0/16", "zones": ["us-east-1a", "us-east-1z"]}}),
         (P + "cluster.eks.network.create.zones", "us-east-1z")),
        ("gcp region", GCP, put("cluster.gke.region", "us-central9"), (P + "cluster.gke.region", "us-central9")),
        ("gcp zone", GCP, put("cluster.gke.zones", ["us-central1-a", "us-central1-z"]),
         (P + "cluster.gke.zones", "us-central1-z")),
        ("azure location", AZURE, put("cluster.aks.location", "westeuropa"),
         (P + "cluster.aks.location", "westeuropa", "westeurope")),
        ("storage region", AWS, put("storage.region", "eu-wast-1"), (P + "storage.region", "eu-wast-1")),
    ],
    "duplicate taints": [
        ("same key and effect", LAB, put("pools.h100.taints", [{"key": "gpu", "effect": "NoSchedule"},
                                                                {"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
         (P + "pools.h100.taints", "gpu:NoSchedule", "twice")),
        ("default effect twice", LAB, put("pools.l40s.taints", [{"key": "a"}, {"key": "a"}]),
         (P + "pools.l40s.taints", "twice")),
    ],
    "fabric of another environment": [
        ("efa on-prem", LAB, put("pools.l40s.fabric", "efa"), (P + "pools.l40s.fabric", "EFA")),
        ("infiniband on eks", AWS, put("pools.spot.fabric", "infiniband"), (P + "pools.spot.fabric",)),
        ("efa on gke", GCP, put("pools.l4.fabric", "efa"), (P + "pools.l4.fabric",)),
    ],
    "count on an existing cluster": [
        ("cpu pool by count", LAB, both(drop("pools.cpu.nodes"), put("pools.cpu.count", 3)),
         (P + "pools.cpu.count", "nodes")),
        ("gpu pool by count", LOCAL, both(drop("pools.gpu.nodes"), put("pools.gpu.count", 1)),
         (P + "pools.gpu.count", "nodes")),
    ],
    "GPU resources excluded from quota": [
        (f"prefix {prefix!r}", LAB, put("queueing.excludeResourcePrefixes", ["example.com/", prefix]),
         (P + "queueing.excludeResourcePrefixes[1]", "quota"))
        for prefix in ("nvidia.com/", "nvidia.com/gpu", "nvidia.com/mig-", "cpu", "")
    ],
    "secrets in the planned file": [
        ("password inside the platform", LAB, put("storage.nfs", {"server": "nfs", "share": "/x", "password": "p"}),
         (P + "storage.nfs.password", "secret")),
        ("credentials inside a URL", LAB, put("backup.location", {"s3Url": "https://admin:hunter2@s3.lab:443"}),
         (P + "backup.location.s3Url", "password inside a URL")),
        ("private key in a value", LAB, put("identity.groupPrefix", "-----BEGIN RSA PRIVATE KEY-----"),
         (P + "identity.groupPrefix", "private key")),
        *[(f"{what} in a value", LAB, put("teams.nlp.groups.analysts", token),
           (P + "teams.nlp.groups.analysts", what, "--secret")) for what, token in TOKENS],
        ("secret rule disabled", LAB, put("policy.levels", {"no-plaintext-secrets": "disabled"}),
         (P + "policy.levels", "no-plaintext-secrets", "always mandatory")),
        ("secret rule advisory", LAB, put("policy.levels", {"no-plaintext-secrets": "advisory"}),
         (P + "policy.levels", "always mandatory")),
    ],
}
CASES = [(cls, *case) for cls, cases in CLASSES.items() for case in cases]


@pytest.mark.parametrize(("stack", "edit", "words"), [c[2:] for c in CASES], ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_each_class_is_refused_with_its_field_path(stack: str, edit: Edit, words: tuple[str, ...], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform(stack)
    edit(raw)
    _assert_one_clean_line(capsys, main(["plan", str(write_stack(tmp_path, raw, stack))]), words)


# The valid neighbours: each at the limit its refusal names.
ACCEPTED: list[tuple[str, str, Edit]] = [
    ("8 H100 per node", LAB, put("pools.h100.perNode", 8)),
    ("10 L40S per node", LAB, put("pools.l40s.perNode", 10)),
    ("5000 nodes", AWS, both(put("pools.cpu.count", 4980), put("pools.l40s.autoscale.max", 6))),
    ("backoff base equal to max", LAB, put("queueing.waitForPodsReady.backoffBaseSeconds", 3600)),
    ("4096 cores and 64Ti per node", LAB, both(put("pools.h100.cpu", "4096"), put("pools.h100.memory", "64Ti"))),
    ("backoffLimitCount at int32's maximum", LAB, put("queueing.waitForPodsReady.backoffLimitCount", 2**31 - 1)),
    ("gcp reservation shared from another project", GCP,
     put("pools.h100.reservation", "projects/shared-capacity/reservations/a3-h100")),
    ("aws capacity reservation id", AWS, put("pools.h100", {"instanceType": "p5.48xlarge", "count": 1,
                                                            "capacityType": "reserved", "zone": "us-east-1a",
                                                            "fabric": "none", "reservation": "cr-0123456789abcdef0"})),
    ("azure capacity reservation group", AZURE, both(put("pools.h100.capacityType", "reserved"), put(
        "pools.h100.reservation", "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/"
                                  "capacityReservationGroups/h100"))),
    ("nfs server by address", LOCAL, put("storage.nfs.server", "10.0.0.5")),
    ("nfs server in capitals", LOCAL, put("storage.nfs.server", "NFS.lab.example")),
    ("hybrid burst left empty", HYBRID, put("teams.nlp.burst", None)),
    ("topology label of 63 characters", LAB, put("pools.h100.topology", {"rack": "example.com/" + "r" * 63})),
    ("daily ttl 30h, the drill's default age", LAB,
     put("backup.tiers", {"daily": {"schedule": "0 2 * * *", "ttl": "30h"}})),
    ("drill age equal to the ttl", LAB, put("backup.drill", {"maxBackupAge": "720h"})),
    ("named months and weekdays", LAB, put("storage.cleanup", {"schedule": "0 0 * JAN-MAR MON-FRI"})),
    # The addresses next to the worker's VPC (10.50.0.0/16) on either side.
    ("link just below the VPC", HYBRID, put("clusters.burst.link.from", "10.49.255.240/28")),
    ("object store just above the VPC", HYBRID, put("clusters.burst.data.manager.cidr", "10.51.0.0/28")),
    ("gke ci group by email", GCP, put("teams.nlp.groups", {"engineers": "nlp-eng@example.com",
                                                         "ci": ["ci-bots@ml.example.co.uk"]})),
    ("aks ci group by object id", AZURE, put("teams.vision.groups", {"ci": "0f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b"})),
    ("any group name on eks and on-prem", AWS, put("identity.platformAdmins", ["Admins"])),
    ("no storage quota as a bare 0", LAB, put("teams.nlp.namespaceQuota", {"storage": 0})),
    ("the smallest volume", LAB, both(put("observability.storage", "1Ki"), put("storage.volumes.datasets", "1k"))),
    ("group by every label", LAB, put("observability.alerting.groupBy", ["..."])),
    ("group by nothing", LAB, put("observability.alerting.groupBy", [])),
    ("group by labels with underscores", LAB, put("observability.alerting.groupBy", ["_x", "cluster_name", "a1"])),
    # A day some listed month has; a weekday field makes cron run on either (30 February or any Monday).
    ("29 February", LAB, put("storage.cleanup", {"schedule": "0 0 29 2 *"})),
    ("31st when one listed month has it", LAB, put("storage.cleanup", {"schedule": "0 0 31 APR,JUL *"})),
    ("30 February or Mondays", LAB, put("storage.cleanup", {"schedule": "0 0 30 2 MON"})),
    ("other resources excluded", LAB, put("queueing.excludeResourcePrefixes", ["example.com/"])),
    ("same taint key, other effect", LAB, put("pools.h100.taints", [{"key": "gpu", "effect": "NoSchedule"},
                                                                     {"key": "gpu", "effect": "NoExecute"}])),
    ("team named like a platform prefix", LAB, put("teams.kubeflow-users", {"quota": {"h100": 0}})),
    ("URL with a user and no password", LAB, put("backup.location", {"s3Url": "https://admin@s3.lab"})),
    ("secret rule kept mandatory", LAB, put("policy.levels", {"no-plaintext-secrets": "mandatory"})),
    # Near misses of the token formats: too short, another prefix, a Slack URL that is not a webhook.
    *[(f"group {name!r}", LAB, put("teams.nlp.groups.analysts", name))
      for name in ("ghp_team", "xoxb-", "AKIA-readers", "AIza-team", "slack-hooks.slack.com-readers")],
    ("aws zone d", AWS, put("cluster.eks.network", {"create": {"cidr": "10.40.0.0/16",
                                                             "zones": ["us-east-1a", "us-east-1d"]}})),
]


@pytest.mark.parametrize(("stack", "edit"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_the_limit_itself_is_accepted(stack: str, edit: Edit, tmp_path: Path) -> None:
    raw = raw_platform(stack)
    edit(raw)
    load_file(write_stack(tmp_path, raw, stack))  # as `plan` reads it: the file's secret check included


LAB_TEXT = stack_file(LAB).read_text(encoding="utf-8")

YAML_CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("pool declared twice", LAB_TEXT.replace("      cpu:\n        cpu: \"64\"", "      l40s:\n        cpu: \"64\""),
     (P + "pools.l40s", "given twice", "line")),
    ("team declared twice", LAB_TEXT.replace("      speech:\n", "      nlp:\n"), (P + "teams.nlp", "given twice")),
    ("key twice inside a pool", LAB_TEXT.replace("        perNode: 8\n", "        perNode: 8\n        perNode: 4\n"),
     (P + "pools.h100.perNode", "given twice")),
    ("config key twice", LAB_TEXT + "  trainyard:platform: {}\n", ("trainyard:platform", "given twice")),
    ("a control character", LAB_TEXT.replace("context: lab-admin", "context: lab\x00admin", 1),
     ("line 8", "U+0000 is a control character", "remove it")),
    ("yes as a quota", LAB_TEXT.replace("quota: {h100: 12, l40s: 8}", "quota: {h100: yes, l40s: 8}"),
     (P + "teams.nlp.quota.h100", "boolean", "yes")),
    # A set would print in hash order (a message that changes from run to run); bytes and pairs are no setting's type.
    ("a set for a quota", LAB_TEXT.replace("quota: {h100: 12, l40s: 8}", "quota: !!set {h100, l40s}"),
     (P + "teams.nlp.quota", "!!set", "write a list")),
    ("bytes for a quota", LAB_TEXT.replace("quota: {h100: 12, l40s: 8}", "quota: !!binary aDEwMA=="),
     (P + "teams.nlp.quota", "!!binary", "write text")),
    ("pairs for a quota", LAB_TEXT.replace("quota: {h100: 12, l40s: 8}", "quota: !!pairs [{h100: 12}]"),
     (P + "teams.nlp.quota", "!!pairs", "write a mapping")),
]


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in YAML_CASES], ids=[c[0] for c in YAML_CASES])
def test_yaml_mistakes_are_refused(text: str, words: tuple[str, ...], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.onprem-lab.yaml"
    path.write_text(text, encoding="utf-8")
    assert text != LAB_TEXT
    _assert_one_clean_line(capsys, main(["plan", str(path)]), words)


BOMB = "".join([
    "x:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    *(f"  {chr(97 + i)}: &{chr(97 + i)} [{', '.join(['*' + chr(96 + i)] * 10)}]\n" for i in range(1, 9)),
    "config:\n  trainyard:platform: {cluster: *i}\n",
])


@pytest.mark.parametrize(("content", "words"), [
    (b"config:\n  trainyard:platform: {cluster: \xff}\n", ("line 2", "UTF-8")),
    (b"config:\n  trainyard:platform: &p\n    pools: *p\n", ("recursive alias", "line")),
    (BOMB.encode(), ("expands to more than",)),
    (b"config:\n" + b"  #" * 600_000, ("bytes",)),
], ids=["non-UTF-8 byte", "recursive alias", "alias bomb", "oversized file"])
def test_unreadable_files_are_bad_input_not_bugs(content: bytes, words: tuple[str, ...], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_bytes(content)
    _assert_one_clean_line(capsys, main(["plan", str(path)]), (str(path), *words))


def test_a_secret_in_a_file_named_like_a_repository_stack_is_judged_in_that_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`plan some/Pulumi.onprem-lab.yaml` judges that file, not stacks/Pulumi.onprem-lab.yaml (which is clean)."""
    config = {PLATFORM_KEY: raw_platform(LAB), "other:apiToken": "plain"}
    path = tmp_path / "Pulumi.onprem-lab.yaml"
    path.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    _assert_one_clean_line(capsys, main(["plan", str(path)]), ("other:apiToken", "plaintext"))


def test_out_pointing_at_a_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "taken"
    target.write_text("x", encoding="utf-8")
    _assert_one_clean_line(capsys, main(["render", LOCAL, "--out", str(target)]), ("--out", str(target), "a file"))
    assert target.read_text(encoding="utf-8") == "x"


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_a_missing_crds_directory_is_one_line(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _assert_one_clean_line(capsys, main([command, LOCAL, "--crds", str(tmp_path / "missing")]),
                           ("--crds", "missing", "not a directory"))


def test_verify_without_a_reachable_cluster_names_kubeconfig_and_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    _assert_one_clean_line(capsys, main(["verify", LAB]), (str(kubeconfig), "lab-admin", "cannot connect"))
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab-admin",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "lab-admin", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}), encoding="utf-8")
    monkeypatch.setattr("urllib3.util.retry.Retry.DEFAULT", __import__("urllib3").util.retry.Retry(0))
    line = _assert_one_clean_line(capsys, main(["verify", LAB]), (str(kubeconfig), "lab-admin", "cannot connect"))
    assert "refused" in line.lower() or "connection" in line.lower()
    _assert_one_clean_line(capsys, main(["verify", LAB, "--context", "nope"]), ("context nope",))


MESSAGES: list[tuple[str, Edit, tuple[str, ...]]] = [
    ("misspelt pool key", put("pools.h100.perNod", 8), (P + "pools.h100.perNod", "unknown key", "`perNode`")),
    ("misspelt key of a required field", put("cluster", {"existing": {"contxt": "lab-admin"}}),
     (P + "cluster.existing.contxt", "unknown key", "`context`")),
    ("misspelt quota key", put("teams.nlp.quota.h100", {"gpu": 4}), (P + "teams.nlp.quota.h100.gpu", "`gpus`")),
    ("too-long team name", put("teams." + "r" * 50, {"quota": {"h100": 0}}),
     (P + "teams." + "r" * 50, "at most", "team name")),
    ("pattern in words", put("queueing.waitForPodsReady.timeout", "10 minutes"),
     (P + "queueing.waitForPodsReady.timeout", "a whole number of seconds, minutes or hours")),
]


@pytest.mark.parametrize(("edit", "words"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_messages_name_what_the_user_wrote_in_words(edit: Edit, words: tuple[str, ...], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform(LAB)
    edit(raw)
    line = _assert_one_clean_line(capsys, main(["plan", str(write_stack(tmp_path, raw, LAB))]), words)
    assert "storage.bucketPrefix:" not in line and "pattern" not in line and "^" not in line


def test_every_pattern_of_the_schema_is_explained_in_words() -> None:
    """A pattern without words would show the user a generic hint: every pattern of every stack-file model (read
    from the models' JSON schemas, wherever the pattern is defined) needs an entry."""
    import importlib
    import pkgutil

    import infra.spec
    from infra.spec.base import Strict
    from infra.spec.input.errors import PATTERN_WORDS

    for module in pkgutil.iter_modules(infra.spec.__path__):
        importlib.import_module(f"infra.spec.{module.name}")

    def subclasses(model: type[Strict]) -> list[type[Strict]]:
        return [model, *(sub for child in model.__subclasses__() for sub in subclasses(child))]

    def patterns(node: Any) -> set[str]:
        if isinstance(node, dict):
            return {node["pattern"]} if isinstance(node.get("pattern"), str) else \
                set().union(*(patterns(value) for value in node.values()))
        return set().union(*(patterns(value) for value in node)) if isinstance(node, list) else set()

    models = subclasses(Strict)[1:]
    found = set().union(*(patterns(model.model_json_schema(by_alias=True)) for model in models))
    assert len(models) > 20 and len(found) > 20
    assert found <= set(PATTERN_WORDS), sorted(found - set(PATTERN_WORDS))


def test_every_namespace_the_platform_installs_into_is_reserved() -> None:
    """A component that adds a namespace must reserve it, or a team of that name would take it over."""
    import infra.platform as components
    from infra.spec.namespaces import RESERVED_NAMESPACES

    installed = {module.NAMESPACE for module in (
        __import__(f"infra.platform.{name}", fromlist=["NAMESPACE"])
        for name in ("backup", "fabric", "gpu", "kueue", "trainer"))}
    assert components and installed <= RESERVED_NAMESPACES, installed - RESERVED_NAMESPACES
    raw = raw_platform(LAB)
    raw["storage"] = {"rookCeph": {"namespace": "ceph"}}
    validate(raw, LAB)
    raw["teams"]["ceph"] = {"quota": {"h100": 0}}  # the site's own Rook namespace is reserved too
    with pytest.raises(SpecError, match=r"teams\.ceph: namespace 'ceph' is reserved"):
        validate(raw, LAB)


@pytest.mark.parametrize(("stack", "kind", "keys"), [
    (AWS, "eks", ("cidr",)), (GCP, "gke", ("nodes", "pods", "services")), (AZURE, "aks", ("cidr",)), (LAB, "", ())])
def test_a_clusters_own_networks_are_the_ranges_its_stack_file_creates(stack: str, kind: str,
                                                                        keys: tuple[str, ...]) -> None:
    """What the worker-side overlap check compares with: every range the file's `network.create` gives (AKS adds
    its fixed service range), nothing for an existing cluster."""
    raw = raw_platform(stack)
    created = raw["cluster"][kind]["network"]["create"] if kind else {}
    own = {key: str(network) for key, network in platform_of(stack).spec.cluster.own_networks().items()}
    expected = {f"network.create.{key}": created[key] for key in keys}
    assert {key: value for key, value in own.items() if key != "services" or kind != "aks"} == expected
    assert ("services" in own) == (kind == "aks")
