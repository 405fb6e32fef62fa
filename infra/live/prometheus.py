"""Reading the stack's Prometheus over its HTTP API (/api/v1/query_range): directly at a URL, or through the API
server's service proxy with a kubeconfig context (no port-forward; the caller needs `get` on services/proxy in
`monitoring`)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any, Protocol

from infra.components import MONITORING
from infra.platform.observability import PROMETHEUS_SERVICE

Series = dict[str, Any]  # {"metric": {label: value}, "values": [[unix time, "value"], ...]}
TIMEOUT = 60


class PrometheusError(Exception):
    """Prometheus cannot be reached or refused the query."""


class Prometheus(Protocol):
    def query_range(self, query: str, start: int, end: int, step: int) -> list[Series]: ...


def _matrix(payload: bytes, where: str) -> list[Series]:
    try:
        answer = json.loads(payload)
    except ValueError as error:
        raise PrometheusError(f"{where}: the answer is not JSON ({error})") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        reason = answer.get("error") if isinstance(answer, dict) else answer
        raise PrometheusError(f"{where}: the query failed: {reason}")
    data = answer.get("data", {})
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"{where}: expected a range vector, got {data.get('resultType')}")
    result: list[Series] = data.get("result", [])
    return result


def _params(query: str, start: int, end: int, step: int) -> dict[str, str]:
    return {"query": query, "start": str(start), "end": str(end), "step": f"{step}s"}


class HttpPrometheus:
    """Prometheus at `url` (e.g. http://127.0.0.1:9090 behind `kubectl port-forward`)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def query_range(self, query: str, start: int, end: int, step: int) -> list[Series]:
        address = f"{self.url}/api/v1/query_range?{urllib.parse.urlencode(_params(query, start, end, step))}"
        try:
            with urllib.request.urlopen(address, timeout=TIMEOUT) as response:
                payload = response.read()
        except OSError as error:  # URLError, HTTPError, timeouts
            raise PrometheusError(f"{self.url}: {error}") from None
        return _matrix(payload, self.url)


class ProxiedPrometheus:
    """The stack's Prometheus Service through the API server of a kubeconfig context."""

    def __init__(self, context: str | None) -> None:
        from kubernetes import client, config

        from infra.live.verify import kubeconfig_files

        self.where = f"service {MONITORING.namespace}/{PROMETHEUS_SERVICE} (context {context or 'current'})"
        try:
            config.load_kube_config(config_file=kubeconfig_files(), context=context)
        except Exception as error:  # no kubeconfig, no such context: the cluster cannot be reached
            raise PrometheusError(f"{self.where}: {error}") from None
        self._api = client.ApiClient()

    def query_range(self, query: str, start: int, end: int, step: int) -> list[Series]:
        path = (f"/api/v1/namespaces/{MONITORING.namespace}/services/{PROMETHEUS_SERVICE}:http-web/proxy"
                "/api/v1/query_range")
        try:
            method, url, headers, _, _ = self._api.param_serialize(
                "GET", path, query_params=list(_params(query, start, end, step).items()),
                auth_settings=["BearerToken"])
            response = self._api.call_api(method, url, header_params=headers, _request_timeout=TIMEOUT)
            payload = response.read()
        except Exception as error:  # ApiException, connection errors: Prometheus cannot be read either way
            raise PrometheusError(f"{self.where}: {type(error).__name__}: {error}") from None
        if response.status != 200:
            raise PrometheusError(f"{self.where}: HTTP {response.status}: {payload[:200]!r}")
        return _matrix(payload, self.where)
