"""The register step of the train-eval pipeline, standard library only: the model that passed the quality gate becomes
a version in the team's own Model Registry, with its lineage, through the registry's REST API (Model Registry 0.3.7,
`/api/model_registry/v1alpha3`, api/openapi/model-registry.yaml of that release).

    registered model <model_name>              created once, found by name afterwards
      model version <KFP run id>               lineage as custom properties: the run id, every pipeline parameter
                                               (param_<name>), the dataset and its version, the git commit, the
                                               sources' hash, the training image digests, the quality check's metrics
        model artifact <model_name>-<run id>   uri: the run's own Model artifact, where KFP's launcher wrote it:
                                               inside the team bucket (the pipeline root of the team's runs) on
                                               stacks with team buckets, where its InferenceServices may read it

The version is named after the run, so a retried step or a retried run finds what it registered and creates nothing
twice. Everything the step records comes from its executor input (`{{$}}`): its input parameters (the pipeline's
parameters, the run id, the dataset version) and its input artifacts' URIs and metadata (the model's, with the digests
the train step recorded; the metrics'). Any answer of the registry other than the ones below fails the step with the
registry's own message.
"""

from __future__ import annotations

import json
import pathlib
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

API = "/api/model_registry/v1alpha3"
PIPELINE = "train-eval"
# The step's inputs that are not pipeline parameters: what the run produced (every other input parameter is one).
RUN_INPUTS = ("run_id", "dataset_version")
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TIMEOUT_SECONDS = 30


class RegistryError(Exception):
    """The registry answered what registration cannot go on from, or could not be reached."""


class Registry:
    """The few calls of the v1alpha3 REST API that registration needs, as JSON over plain HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             query: dict[str, str] | None = None, found: tuple[int, ...] = (200, 201)) -> dict[str, Any] | None:
        """The answer's JSON for a status in `found`, None for 404 (nothing of that name), RegistryError otherwise."""
        target = self.url + API + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(target, method=method, data=json.dumps(body).encode() if body else None,
                                         headers={"Accept": "application/json", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise RegistryError(f"model registry {self.url} unreachable ({reason}): is the team's registry up, and "
                                "is registry_url the team's TeamModels.registry_url?") from None
        if status == 404:
            return None
        if status not in found:
            try:
                message = json.loads(text).get("message", "")
            except (ValueError, AttributeError):
                message = text.decode(errors="replace")[:300]
            raise RegistryError(f"model registry {self.url}: {method} {API}{path} answered {status}: "
                                f"{message or '(no message)'}")
        answer: dict[str, Any] = json.loads(text)
        return answer

    def found_or_created(self, find: tuple[str, dict[str, str]], create: tuple[str, dict[str, Any]]) \
            -> tuple[dict[str, Any], bool]:
        """(entity, created): found by name, else created; a create that loses a race to another (409) finds it."""
        existing = self.call("GET", find[0], query=find[1])
        if existing is not None:
            return existing, False
        made = self.call("POST", create[0], create[1], found=(201, 409))
        if made is not None and "id" in made:
            return made, True
        again = self.call("GET", find[0], query=find[1])
        if again is None:
            raise RegistryError(f"model registry {self.url}: POST {API}{create[0]} conflicted, yet "
                                f"GET {API}{find[0]} finds nothing")
        return again, False


def metadata_value(value: object) -> dict[str, Any]:
    """A custom property value (MetadataValue): bool, int64 (a string in JSON), double or string; anything else
    as its JSON text."""
    if isinstance(value, bool):
        return {"metadataType": "MetadataBoolValue", "bool_value": value}
    if isinstance(value, int):
        return {"metadataType": "MetadataIntValue", "int_value": str(value)}
    if isinstance(value, float):
        return {"metadataType": "MetadataDoubleValue", "double_value": value}
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return {"metadataType": "MetadataStringValue", "string_value": text}


def joined(value: object) -> str:
    """A list the train step recorded, as the next step reads it: ML Metadata keeps a list as the struct
    {"list": [...]} (KFP 2.16.0 metadata/converter.go StructValueToMLMDValue), which comes back as such."""
    if isinstance(value, dict) and set(value) == {"list"}:
        value = value["list"]
    return ",".join(str(item) for item in value) if isinstance(value, list) else str(value or "")


def artifact_of(executor_input: dict[str, Any], name: str) -> dict[str, Any]:
    found = executor_input.get("inputs", {}).get("artifacts", {}).get(name, {}).get("artifacts", [])
    if not found:
        raise SystemExit(f"register: the step has no input artifact '{name}' (compile the pipeline again)")
    artifact: dict[str, Any] = found[0]
    return artifact


def lineage(executor_input: dict[str, Any]) -> dict[str, object]:
    """The version's custom properties: the run, the pipeline's parameters, the data, the code and the quality."""
    values: dict[str, Any] = executor_input.get("inputs", {}).get("parameterValues", {})
    missing = [name for name in (*RUN_INPUTS, "dataset", "git_commit", "model_name") if not values.get(name)]
    if missing:
        raise SystemExit(f"register: input parameter '{missing[0]}' is missing or empty")
    model, metrics = artifact_of(executor_input, "model"), artifact_of(executor_input, "metrics")
    trained = model.get("metadata", {})
    record: dict[str, object] = {
        "kfp_run_id": values["run_id"], "pipeline": PIPELINE, "dataset": values["dataset"],
        "dataset_version": values["dataset_version"], "git_commit": values["git_commit"],
        "source_sha256": trained.get("source_sha256", ""), "trainjob": trained.get("trainjob", ""),
        "training_images": joined(trained.get("training_images")), "step_images": joined(trained.get("step_images")),
        "model_source_uri": model.get("uri", ""),
    }
    record |= {f"metric_{name}": value for name, value in sorted(metrics.get("metadata", {}).items())}
    record |= {f"param_{name}": value for name, value in sorted(values.items()) if name not in RUN_INPUTS}
    return record


def namespace() -> str:
    path = pathlib.Path(SERVICE_ACCOUNT, "namespace")
    return path.read_text(encoding="utf-8").strip() if path.exists() else ""


def register(executor_input: dict[str, Any]) -> dict[str, str]:
    """Register (or find, on a rerun) the model version of this run; the ids and the URI registered."""
    values = executor_input.get("inputs", {}).get("parameterValues", {})
    properties = lineage(executor_input)
    name, version = str(values["model_name"]), str(values["run_id"])
    uri = str(properties["model_source_uri"])
    if not uri:
        raise SystemExit("register: the model artifact has no URI to register (compile the pipeline again)")
    registry = Registry(str(values.get("registry_url", "")))
    model, model_new = registry.found_or_created(
        ("/registered_model", {"name": name}),
        ("/registered_models", {"name": name, "description": f"Trained by the {PIPELINE} pipeline."}))
    entry, version_new = registry.found_or_created(
        ("/model_version", {"name": version, "parentResourceId": model["id"]}),
        ("/model_versions", {"name": version, "registeredModelId": model["id"], "author": f"kfp:{PIPELINE}",
                             "description": f"{PIPELINE} run {version}",
                             "customProperties": {k: metadata_value(v) for k, v in properties.items()}}))
    artifact_name = f"{name}-{version}"
    listed = registry.call("GET", f"/model_versions/{entry['id']}/artifacts",
                           query={"name": artifact_name, "artifactType": "model-artifact"}) or {}
    artifact = next((a for a in listed.get("items", []) if a.get("name") == artifact_name), None)
    if artifact is not None and artifact.get("uri") != uri:
        raise SystemExit(f"register: version {version} of {name} already has artifact {artifact_name} at "
                         f"{artifact.get('uri')}, not {uri}: archive that version first")
    if artifact is None:
        artifact = registry.call("POST", f"/model_versions/{entry['id']}/artifacts", {
            "artifactType": "model-artifact", "name": artifact_name, "uri": uri,
            "description": f"the model of {PIPELINE} run {version}",
            "modelSourceKind": "kfp", "modelSourceClass": "pipelinerun", "modelSourceGroup": namespace(),
            "modelSourceId": version, "modelSourceName": PIPELINE}) or {}
    print(f"registered model {name} ({model['id']}, {'created' if model_new else 'found'}), version {version} "
          f"({entry['id']}, {'created' if version_new else 'found: nothing registered twice'}), "
          f"artifact {artifact.get('id')} at {uri}")
    return {"registered_model_id": str(model["id"]), "model_version_id": str(entry["id"]),
            "model_artifact_id": str(artifact.get("id", "")), "model_name": name, "model_version": version,
            "uri": uri}


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] != "--executor-input":
        raise SystemExit("usage: register.py --executor-input '<the KFP executor input JSON>'")
    executor_input = json.loads(argv[1])
    registered: dict[str, str] = {}
    if not executor_input.get("inputs", {}).get("parameterValues", {}).get("registry_url"):
        print("register: registry_url is empty (a stack without `models`): nothing registered")
    else:
        try:
            registered = register(executor_input)
        except RegistryError as error:
            raise SystemExit(f"register: {error}") from None
    output = executor_input.get("outputs", {}).get("outputFile")
    if output:  # the registration's ids in the run's journal: what an InferenceService labels itself with
        pathlib.Path(output).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(output).write_text(json.dumps(
            {"artifacts": {"registration": {"artifacts": [{"metadata": registered}]}}}), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
