"""The ClusterServingRuntime of the example pipeline's model (examples/serving/): model format `linear-json`, the
model.json the example's training script writes, served by infra/platform/models/linear_server.py (standard library
only) on the Python image the cpu-batch runtime pins (runtimes/cpu-batch.yaml), so serving a new version or
rolling back builds no image. None of KServe's own runtimes reads that format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.platform.models.serving_patches import SECCOMP

LINEAR_RUNTIME = "trainyard-linear"
LINEAR_FORMAT = "linear-json"
PYTHON_IMAGE = "docker.io/library/python:3.12.12-slim-bookworm"  # runtimes/cpu-batch.yaml's, by tag like it
SERVER = Path(__file__).with_name("linear_server.py")
HTTP_PORT = 8080  # KServe's default predictor port (the Service targets it)


def linear_runtime() -> dict[str, Any]:
    """PSA `restricted` on its own (the Python image would run as root: user 1000 is stated); a read-only root."""
    return {
        "supportedModelFormats": [{"name": LINEAR_FORMAT, "version": "1", "autoSelect": True, "priority": 1}],
        "protocolVersions": ["v1"],
        "containers": [{
            "name": "kserve-container", "image": PYTHON_IMAGE,
            "command": ["python3", "-c", SERVER.read_text(encoding="utf-8")],
            "args": ["--model_name={{.Name}}", "--model_dir=/mnt/models", f"--http_port={HTTP_PORT}"],
            "ports": [{"containerPort": HTTP_PORT, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": True, "runAsUser": 1000, "readOnlyRootFilesystem": True,
                                "privileged": False, **SECCOMP}}],
    }
