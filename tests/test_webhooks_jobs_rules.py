"""Kueue 0.19.2's job-framework rules on create and its Workload webhook, field by field, from the upstream source
(kubernetes-sigs/kueue v0.19.2): `pkg/controller/jobframework/validation.go` (ValidateJobOnCreate: ValidateQueueName,
validateCreateForPrebuiltWorkload with ValidatePrebuiltWorkloadName and PrebuiltWorkloadNameFor in utils.go,
validateCreateForMaxExecTime, ValidateElasticJobAnnotation, supportedPrebuiltWlJobGVKs and supportedElasticJobGVKs),
`pkg/util/webhook/validation_admissiongatedby.go` (csv.Parse trims each gate), `pkg/controller/jobs/job/
job_webhook.go` (validatePartialAdmissionCreate, validateSyncCompletionCreate, podsCount) and
`pkg/webhooks/workload_webhook.go` ValidateWorkload (the admission-gate rule only with AdmissionGatedBy on, the
elastic rule through workloadslicing.Enabled, which needs ElasticJobsViaWorkloadSlices on)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks.kueue_v0_19_jobs import (
    ELASTIC_KINDS,
    PREBUILT_KINDS,
    atoi,
    job_annotations,
    job_on_create,
)
from infra.apiserver.webhooks.kueue_v0_19_workload import workload
from tests.kueue_cluster import MANAGED, kueue_config, namespace
from tests.test_webhooks_jobset_rules import INVALID_PATH

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
ELASTIC, GATED = "kueue.x-k8s.io/elastic-job", "kueue.x-k8s.io/admission-gated-by"
MIN, EQUAL = "kueue.x-k8s.io/job-min-parallelism", "kueue.x-k8s.io/job-completions-equal-parallelism"
EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
STATE = ClusterState(MANAGED)


def gates(**on: bool) -> ClusterState:
    return ClusterState([kueue_config(gates=on), namespace("v")])


def obj(api_version: str = "batch/v1", kind: str = "Job", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "j", "namespace": "v", "labels": labels or {}, "annotations": annotations or {}},
            "spec": spec}


def lines(found: list[Any]) -> list[str]:
    return [f"{r.field}: {r.message}" for r in found]


@pytest.mark.parametrize(("value", "number"), [("0", 0), ("+7", 7), ("-7", -7), ("9223372036854775807", 2**63 - 1),
                                               ("-9223372036854775808", -(2**63))])
def test_atoi_reads_what_go_reads(value: str, number: int) -> None:
    assert atoi(value) == (number, "")


@pytest.mark.parametrize(("value", "why"), [("9223372036854775808", "value out of range"),
                                            ("-9223372036854775809", "value out of range"), ("", "invalid syntax"),
                                            ("1e3", "invalid syntax"), (" 1", "invalid syntax")])
def test_atoi_refuses_what_go_refuses(value: str, why: str) -> None:
    assert atoi(value) == (None, f'strconv.Atoi: parsing "{value}": {why}')


def test_max_exec_time_of_one_second_is_the_least_admitted() -> None:
    assert job_on_create(obj(labels={EXEC: "+1"}), STATE) == []
    assert lines(job_on_create(obj(labels={EXEC: "99999999999999999999"}), STATE)) == [
        f'metadata.labels[{EXEC}]: Invalid value: "99999999999999999999": strconv.Atoi: parsing '
        '"99999999999999999999": value out of range']
    assert job_on_create(obj(annotations={EXEC: "0"}), STATE) == []  # a label, not an annotation


@pytest.mark.parametrize("kind", sorted(PREBUILT_KINDS))
def test_every_kind_that_may_run_a_prebuilt_workload(kind: str) -> None:
    group_version, _, name = kind.partition(", Kind=")
    assert job_on_create(obj(group_version.lstrip("/"), name, labels={PREBUILT: "wl"}), STATE) == []


@pytest.mark.parametrize(("api_version", "kind"), [("apps/v1", "StatefulSet"), ("batch/v2", "Job"),
                                                   ("jobset.x-k8s.io/v1alpha1", "JobSet"), ("v1", "Service")])
def test_other_kinds_may_not_name_a_prebuilt_workload(api_version: str, kind: str) -> None:
    shown = api_version if "/" in api_version else f"/{api_version}"
    assert lines(job_on_create(obj(api_version, kind, labels={PREBUILT: "wl"}), STATE)) == [
        f'metadata.labels[{PREBUILT}]: Forbidden: Is not supported for "{shown}, Kind={kind}"']
    assert job_on_create(obj(api_version, kind), STATE) == []


def test_the_prebuilt_annotation_counts_with_its_gate_or_when_longer_than_a_label_value() -> None:
    """WorkloadIdentifierAnnotations on: the annotation is read (and checked) first; off: the label is, and the
    annotation only when longer than 63 characters (then checked as a name)."""
    deployment = ("apps/v1", "Deployment")
    assert lines(job_on_create(obj(*deployment, annotations={PREBUILT: "wl"}), STATE)) == [
        f'metadata.annotations[{PREBUILT}]: Forbidden: Is not supported for "apps/v1, Kind=Deployment"']
    off = gates(WorkloadIdentifierAnnotations=False)
    assert job_on_create(obj(*deployment, annotations={PREBUILT: "wl"}), off) == []
    assert job_on_create(obj(annotations={PREBUILT: "Bad_Name"}), off) == []  # not read, so not checked
    long_name = "w" * 64
    assert lines(job_on_create(obj(*deployment, annotations={PREBUILT: long_name}), off)) == [
        f'metadata.annotations[{PREBUILT}]: Forbidden: Is not supported for "apps/v1, Kind=Deployment"']
    assert lines(job_on_create(obj(*deployment, labels={PREBUILT: "wl"}, annotations={PREBUILT: "x" * 63}), off)) == [
        f'metadata.labels[{PREBUILT}]: Forbidden: Is not supported for "apps/v1, Kind=Deployment"']
    assert job_on_create(obj(labels={PREBUILT: "wl"}, annotations={PREBUILT: "wl-2"}), STATE) == []


def test_with_its_gate_off_a_prebuilt_annotation_of_63_characters_is_not_read() -> None:
    """PrebuiltWorkloadNameFor: len(name) > validation.LabelValueMaxLength; 63 fits a label, so it is not read."""
    off = gates(WorkloadIdentifierAnnotations=False)
    assert job_on_create(obj("apps/v1", "Deployment", annotations={PREBUILT: "w" * 63}), off) == []
    assert lines(job_on_create(obj("apps/v1", "Deployment", annotations={PREBUILT: "w" * 64}), off)) == [
        f'metadata.annotations[{PREBUILT}]: Forbidden: Is not supported for "apps/v1, Kind=Deployment"']


@pytest.mark.parametrize("kind", sorted(ELASTIC_KINDS))
def test_every_kind_that_may_be_elastic(kind: str) -> None:
    group_version, _, name = kind.partition(", Kind=")
    assert job_on_create(obj(group_version, name, annotations={ELASTIC: "true"}), STATE) == []


def test_an_elastic_trainjob_is_refused_and_true_is_the_only_word_for_it() -> None:
    trainjob = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert lines(job_on_create(obj(*trainjob, annotations={ELASTIC: "true"}), STATE)) == [
        f'metadata.annotations[{ELASTIC}]: Forbidden: elastic job is not supported for '
        '"trainer.kubeflow.org/v1alpha1, Kind=TrainJob"']
    assert job_on_create(obj(*trainjob, annotations={ELASTIC: "True"}), STATE) == []


@pytest.mark.parametrize(("value", "empty"), [("   ", 0), ("example.com/a ,  example.com/b", 0),
                                              ("example.com/a,", 1), (" , ", 2)])
def test_admission_gates_are_trimmed_and_none_is_empty(value: str, empty: int) -> None:
    """csv.Parse: a blank value is no gate at all; otherwise each comma-separated part, trimmed, must be a name."""
    assert lines(job_on_create(obj(annotations={GATED: value}), STATE)) == empty * [
        f'metadata.annotations[{GATED}]: Invalid value: "{value}": cannot contain empty gate names']


def test_a_gate_is_checked_for_its_domain_and_length_together() -> None:
    """Both IsDomainPrefixedPath and the 63-byte limit apply to one gate (the duplicate is reported once)."""
    long_gate = "Example.com/" + "g" * 52
    found = lines(job_on_create(obj(annotations={GATED: f"{long_gate},{long_gate}"}), STATE))
    assert len(found) == 3
    assert found[0].startswith(f'metadata.annotations[{GATED}]: Invalid value: "{long_gate}": a lowercase RFC 1123 '
                               "subdomain")
    assert found[1:] == [
        f"metadata.annotations[{GATED}]: Too long: may not be more than 63 bytes",
        f'metadata.annotations[{GATED}]: Invalid value: "{long_gate},{long_gate}": duplicate gate name: {long_gate}']


# --- batch Job annotations (job_webhook.go) ----------------------------------------------------------------------

def job(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return obj(annotations=annotations, **spec)


@pytest.mark.parametrize(("spec", "pods"), [({"parallelism": 5}, 5), ({"parallelism": 5, "completions": 3}, 3),
                                            ({"parallelism": 2, "completions": 9}, 2), ({}, 1)])
def test_partial_admission_minimum_lies_between_one_and_the_pod_count_less_one(spec: dict[str, Any],
                                                                               pods: int) -> None:
    """podsCount: parallelism (defaulted to 1), or completions when fewer; the minimum is in [1, podsCount-1]."""
    def refusal(minimum: int) -> list[str]:
        return [f"metadata.annotations[{MIN}]: Invalid value: {minimum}: should be between 0 and {pods - 1}"]
    if pods > 1:
        assert job_annotations(job({MIN: "1"}, **spec), STATE) == []
        assert job_annotations(job({MIN: str(pods - 1)}, **spec), STATE) == []
    assert lines(job_annotations(job({MIN: str(pods)}, **spec), STATE)) == refusal(pods)
    assert lines(job_annotations(job({MIN: "0"}, **spec), STATE)) == refusal(0)


def test_partial_admission_with_an_elastic_job_only_while_slicing_is_off() -> None:
    both = job({MIN: "x"}, parallelism=4)
    both["metadata"]["annotations"][ELASTIC] = "true"
    assert lines(job_annotations(both, STATE)) == [
        f'metadata.annotations[{MIN}]: Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax',
        f'metadata.annotations[{MIN}]: Invalid value: "x": partial admission and elastic job cannot be used together']
    assert lines(job_annotations(both, gates(ElasticJobsViaWorkloadSlices=False))) == [
        f'metadata.annotations[{MIN}]: Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax']


@pytest.mark.parametrize("word", ["1", "t", "T", "TRUE", "true", "True"])
def test_every_go_true_turns_completions_sync_on(word: str) -> None:
    assert job_annotations(job({EQUAL: word}, completionMode="Indexed", parallelism=3, completions=3), STATE) == []
    assert lines(job_annotations(job({EQUAL: word}, completionMode="NonIndexed", parallelism=3, completions=3),
                                 STATE)) == [
        f'metadata.annotations[{EQUAL}]: Invalid value: "{word}": should not be enabled for NonIndexed jobs']


@pytest.mark.parametrize("word", ["0", "f", "F", "FALSE", "false", "False"])
def test_every_go_false_leaves_any_job_alone(word: str) -> None:
    assert job_annotations(job({EQUAL: word}, parallelism=3, completions=5), STATE) == []


def test_completions_sync_compares_parallelism_with_completions_both_defaulting_to_one() -> None:
    assert job_annotations(job({EQUAL: "true"}, completionMode="Indexed"), STATE) == []
    assert lines(job_annotations(job({EQUAL: "true"}, completionMode="Indexed", parallelism=2), STATE)) == [
        f"spec.completions: Invalid value: null: should be equal to parallelism when {EQUAL} annotation is true"]
    assert lines(job_annotations(job({EQUAL: "true"}, completionMode="Indexed", completions=2), STATE)) == [
        f"spec.completions: Invalid value: 2: should be equal to parallelism when {EQUAL} annotation is true"]


# --- Workload (workload_webhook.go) ------------------------------------------------------------------------------

def _workload(min_counts: int, **annotations: str) -> dict[str, Any]:
    pod_sets = [{"name": f"p{i}", "count": 2, **({"minCount": 1} if i < min_counts else {}),
                 "template": {"spec": {"containers": [{"name": "c"}]}}} for i in range(3)]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "wl", "namespace": "v", "annotations": annotations}, "spec": {"podSets": pod_sets}}


def test_a_workload_is_elastic_only_while_slicing_is_on() -> None:
    elastic = _workload(1, **{ELASTIC: "true"})
    assert lines(workload(elastic, STATE)) == [
        "spec.podSets: Invalid value: 1: partial admission and elastic job cannot be used together"]
    assert workload(elastic, gates(ElasticJobsViaWorkloadSlices=False)) == []
    assert workload(_workload(0, **{ELASTIC: "true"}), STATE) == []
    assert lines(workload(_workload(3), STATE)) == ["spec.podSets: Invalid value: 3: at most one podSet can use "
                                                    "minCount"]


def test_a_workloads_admission_gates_are_checked_only_while_their_gate_is_on() -> None:
    gated = _workload(0, **{GATED: "nodomain"})
    assert lines(workload(gated, STATE)) == [
        f'metadata.annotations[{GATED}]: Invalid value: "nodomain": must be a domain-prefixed path (such as '
        '"acme.io/foo")']
    assert workload(gated, gates(AdmissionGatedBy=False)) == []


def test_a_gate_whose_path_has_a_character_outside_http_paths_gets_upstreams_detail() -> None:
    """IsDomainPrefixedPath's RegexError for the part after the first '/'. Upstream's field.Invalid carries that part
    as the value ("a b"), the model the whole gate: only the detail is pinned here."""
    found = lines(job_on_create(obj(annotations={GATED: "a.io/ok,a.io/a b"}), STATE))
    assert len(found) == 1 and found[0].endswith(f": {INVALID_PATH}"), found


def test_a_workloads_pod_level_limits_are_not_negative_either() -> None:
    obj = _workload(0)
    obj["spec"]["podSets"][0]["template"]["spec"]["resources"] = {"limits": {"cpu": "-1"}}
    assert lines(workload(obj, STATE)) == [
        "spec.podSets[0].template.spec.resources.limits[cpu]: Invalid value: '-1': must be greater than or equal to 0"]


def test_a_queue_name_refusal_names_the_label_and_joins_its_problems_with_commas() -> None:
    """ValidateLabelAsCRDName: IsDNS1123Subdomain's messages joined by ','."""
    name = "-" * 254
    found = lines(job_on_create(obj(labels={"kueue.x-k8s.io/queue-name": name}), STATE))
    assert len(found) == 1
    assert found[0].startswith(f'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "{name}": must be no more '
                               "than 253 characters,a lowercase RFC 1123 subdomain")


def test_a_repeated_gate_does_not_stop_the_check_of_the_next_one() -> None:
    assert lines(job_on_create(obj(annotations={GATED: "a.io/x,a.io/x,nodomain"}), STATE)) == [
        f'metadata.annotations[{GATED}]: Invalid value: "a.io/x,a.io/x,nodomain": duplicate gate name: a.io/x',
        f'metadata.annotations[{GATED}]: Invalid value: "nodomain": must be a domain-prefixed path (such as '
        '"acme.io/foo")']
    assert lines(job_on_create(obj(annotations={GATED: ",nodomain"}), STATE)) == [
        f'metadata.annotations[{GATED}]: Invalid value: ",nodomain": cannot contain empty gate names',
        f'metadata.annotations[{GATED}]: Invalid value: "nodomain": must be a domain-prefixed path (such as '
        '"acme.io/foo")']
