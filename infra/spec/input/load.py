"""Reading a stack: from a stack file (offline) or from Pulumi config (real engine), into a Platform."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from infra.spec.derive import Platform, derive
from infra.spec.hybrid.model import kubeconfig_problem, validate_hybrid
from infra.spec.input import yaml_input
from infra.spec.input.errors import SpecError, from_validation_error, rooted
from infra.spec.input.keys import (
    KUBECONFIG_KEY,
    OFFLINE_MASK,
    PLATFORM_KEY,
    PROJECT,
    SECRET_KEYS,
    is_multikueue_key,
    multikueue_key,
)
from infra.spec.input.secrets import plaintext_secret_paths
from infra.spec.platform import PlatformSpec

if TYPE_CHECKING:
    import pulumi



def stack_path(stack: str, root: Path) -> Path:
    """A stack name (stacks/Pulumi.<name>.yaml) or a path to a stack file."""
    candidate = Path(stack)
    if candidate.suffix in {".yaml", ".yml"} or "/" in stack:
        return candidate
    return root / "stacks" / f"Pulumi.{stack}.yaml"


def stack_name(path: Path) -> str:
    name = path.name
    return name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")


def stack_names(root: Path) -> list[str]:
    """Every stack of the repository (stacks/Pulumi.<name>.yaml), sorted."""
    return sorted(stack_name(path) for path in (root / "stacks").glob("Pulumi.*.yaml"))


def read_stack_config(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a stack file, with one-line errors for every way it can be broken."""
    if not path.is_file():
        raise SpecError(str(path), "no such stack file: give a stack name from stacks/ or a path")
    text = ""
    try:
        text = yaml_input.decode(path.read_bytes())
        if not text.strip():
            raise SpecError(str(path), "the stack file is empty: it needs a `config:` mapping with trainyard:platform")
        document = yaml_input.load(text)
    except yaml_input.YamlInputError as error:
        where = error.path.removeprefix("config.") if error.path.startswith("config.") else error.path
        raise SpecError(f"{path}: {where}" if where else str(path), str(error)) from None
    except OSError as error:
        raise SpecError(str(path), f"cannot read the stack file: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise SpecError(str(path), f"broken YAML{yaml_input.syntax_problem(error, text)}") from None
    if not isinstance(document, dict) or not isinstance(document.get("config"), dict):
        raise SpecError(str(path), "the stack file needs a top-level `config:` mapping")
    return document["config"]


def validate(raw: object, stack: str) -> Platform:
    """Validate the structured config and derive every fact; raises SpecError on bad input."""
    if not isinstance(raw, dict):
        raise SpecError(PLATFORM_KEY, "must be a mapping with cluster, pools and teams")
    if "clusters" in raw:
        return validate_hybrid(raw, stack, validate)
    try:
        spec = PlatformSpec.model_validate(raw)
    except ValidationError as error:
        failure = from_validation_error(error, PLATFORM_KEY, PlatformSpec)
        raise (rooted(PLATFORM_KEY, failure.message) if failure.path == PLATFORM_KEY else failure) from None
    return derive(spec, stack)


def load_file(path: Path) -> Platform:
    config = read_stack_config(path)
    if PLATFORM_KEY not in config:
        raise SpecError(str(path), f"config has no `{PLATFORM_KEY}` key")
    unknown = sorted(key for key in config if key.startswith(f"{PROJECT}:") and key not in
                     {PLATFORM_KEY, *SECRET_KEYS} and not is_multikueue_key(key))
    if unknown:
        raise SpecError(unknown[0], f"unknown config key: Trainyard reads {PLATFORM_KEY} and the secret keys "
                                    f"{', '.join(SECRET_KEYS)}")
    for key in [*SECRET_KEYS, *filter(is_multikueue_key, config)]:
        if key in config and not (isinstance(config[key], dict) and set(config[key]) == {"secure"}):
            raise SpecError(key, f"must be a secret: set it with `pulumi config set --secret {key} < file`")
    # Judged here, on the very file being planned, whatever `policy.levels` says: a secret in plaintext is
    # already in the repository's history once committed, so no stack may switch this check off.
    for where, problem in plaintext_secret_paths(config):
        raise SpecError(where, problem)
    platform_value = config[PLATFORM_KEY]
    if isinstance(platform_value, dict) and "secure" in platform_value and len(platform_value) == 1:
        raise SpecError(PLATFORM_KEY, "must not be a secret: keep secrets in their own keys "
                                      f"(e.g. {KUBECONFIG_KEY}); Pulumi returns secret objects in plaintext")
    return dataclasses.replace(validate(platform_value, stack_name(path)), source=path)


def load_pulumi() -> Platform:
    """The real engine's path: the same validation, fed by `pulumi.Config`."""
    import pulumi

    config = pulumi.Config(PROJECT)
    return validate(config.require_object("platform"), pulumi.get_stack())


def secret(key: str) -> pulumi.Output[str] | None:
    """One of SECRET_KEYS, read as a secret (never from the structured object, which Pulumi would hand
    back in plaintext). None when unset: the kubeconfig then comes from the environment, backup
    credentials from workload identity."""
    import pulumi

    if key not in SECRET_KEYS and not is_multikueue_key(key):
        raise ValueError(f"{key} is not one of Trainyard's secret keys {SECRET_KEYS}")
    return pulumi.Config(PROJECT).get_secret(key.split(":", 1)[1])


def worker_kubeconfigs(platform: Platform) -> dict[str, pulumi.Output[str] | None]:
    """Each worker's kubeconfig for the manager's Kueue (trainyard:multikueue-<worker>), refused at preview when
    Kueue would refuse it; None when unset (the worker then stays unconnected: docs/hybrid.md)."""
    kubeconfigs: dict[str, pulumi.Output[str] | None] = {}
    for worker in platform.hybrid.workers if platform.hybrid else ():
        key = multikueue_key(worker)

        def checked(text: str, key: str = key) -> str:
            problem = None if text == OFFLINE_MASK else kubeconfig_problem(text)
            if problem:
                raise SpecError(key, f"the kubeconfig {problem}")
            return text

        value = secret(key)
        kubeconfigs[worker] = value.apply(checked) if value is not None else None
    return kubeconfigs
