"""ML Metadata, the journal where Kubeflow Pipelines v2 records each run's artifacts, read through the front door
as the Pipelines UI reads it: gRPC-Web at `{frontDoor.url}/ml_metadata/ml_metadata.MetadataStoreService/<Method>`
(the vendored VirtualService routes /ml_metadata to metadata-envoy, which speaks gRPC to the MLMD server).

The KFP 2.16 REST API has no artifact listing (a run's task details come from the Argo workflow's nodes and carry
no outputs), so accept's `pipeline` check asks MLMD: the run's context (type `system.PipelineRun`, named by the run
id: kubeflow/pipelines@2.16.0 backend/src/v2/metadata/client.go) and the artifacts attributed to it.

Two calls, each message a few fields, hand-encoded (field numbers from ml_metadata's metadata_store.proto and
metadata_store_service.proto as vendored in kubeflow/pipelines@2.16.0 third_party/ml-metadata): no protobuf
dependency for four messages.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from infra.live.pipelines import PipelinesApi

SERVICE = "/ml_metadata/ml_metadata.MetadataStoreService"
RUN_CONTEXT_TYPE = "system.PipelineRun"
LIVE = 2  # Artifact.State.LIVE
HEADERS = {"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1", "Accept": "application/grpc-web+proto"}


class MlmdError(Exception):
    """No answer, a gRPC error, or an answer that does not decode."""


@dataclass(frozen=True)
class Artifact:
    id: int
    type_id: int
    uri: str
    state: int
    properties: dict[str, Any] = field(default_factory=dict)  # custom_properties: display_name, logged metrics


# --- protobuf wire format, the parts these messages use -------------------------------------------------------

def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf sends it
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode(fields: list[tuple[int, int | str | bytes | float]]) -> bytes:
    """A message from (field number, value): int as varint, str/bytes length-delimited, float as double."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, bool | int):
            out += _varint(number << 3) + _varint(int(value))
        elif isinstance(value, float):
            out += _varint(number << 3 | 1) + struct.pack("<d", value)
        else:
            data = value.encode() if isinstance(value, str) else value
            out += _varint(number << 3 | 2) + _varint(len(data)) + data
    return bytes(out)


def decode(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) in order: varints and fixed64 as int, length-delimited as bytes."""
    found: list[tuple[int, int | bytes]] = []
    at = 0

    def varint() -> int:
        nonlocal at
        shift = result = 0
        while True:
            if at >= len(data):
                raise MlmdError("truncated varint")
            byte = data[at]
            at += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while at < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            found.append((number, varint()))
        elif wire == 1:
            found.append((number, int.from_bytes(data[at:at + 8], "little")))
            at += 8
        elif wire == 2:
            size = varint()
            found.append((number, data[at:at + size]))
            at += size
        elif wire == 5:
            at += 4
        else:
            raise MlmdError(f"unsupported wire type {wire}")
    return found


def _value(message: bytes) -> Any:
    """ml_metadata.Value: int_value 1, double_value 2, string_value 3, bool_value 6 (structs stay bytes)."""
    for number, raw in decode(message):
        if number == 1 and isinstance(raw, int):
            return raw - (1 << 64) if raw >= 1 << 63 else raw
        if number == 2 and isinstance(raw, int):
            return struct.unpack("<d", raw.to_bytes(8, "little"))[0]
        if number == 3 and isinstance(raw, bytes):
            return raw.decode()
        if number == 6 and isinstance(raw, int):
            return bool(raw)
        return raw
    return None


def artifact(message: bytes) -> Artifact:
    """ml_metadata.Artifact: id 1, type_id 2, uri 3, custom_properties 5 (map entries: key 1, Value 2), state 6."""
    ints: dict[int, int] = {}
    uri, properties = "", {}
    for number, raw in decode(message):
        if isinstance(raw, int):
            ints[number] = raw
        elif number == 3:
            uri = raw.decode()
        elif number == 5:
            entry = dict(decode(raw))
            key, value = entry.get(1, b""), entry.get(2, b"")
            if isinstance(key, bytes) and isinstance(value, bytes):
                properties[key.decode()] = _value(value)
    return Artifact(ints.get(1, 0), ints.get(2, 0), uri, ints.get(6, 0), properties)


# --- gRPC-Web -------------------------------------------------------------------------------------------------

def frame(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


def unframe(body: bytes) -> bytes:
    """The data frame of a unary answer; MlmdError for a non-zero grpc-status in the trailer frame."""
    at, data, trailer = 0, b"", ""
    while at + 5 <= len(body):
        flag, size = body[at], int.from_bytes(body[at + 1:at + 5], "big")
        chunk = body[at + 5:at + 5 + size]
        if flag & 0x80:
            trailer = chunk.decode("utf-8", "replace")
        else:
            data = chunk
        at += 5 + size
    status = next((line.split(":", 1)[1].strip() for line in trailer.splitlines()
                   if line.lower().startswith("grpc-status:")), "0")
    if status != "0":
        message = next((line.split(":", 1)[1].strip() for line in trailer.splitlines()
                        if line.lower().startswith("grpc-message:")), "")
        raise MlmdError(f"grpc-status {status} {message}".strip())
    return data


class Mlmd:
    """MLMD's store service through the gateway, as one person (bearer token)."""

    def __init__(self, api: PipelinesApi, door_url: str, token: str) -> None:
        self.api, self.url, self.token = api, f"{door_url}{SERVICE}", token

    def _call(self, method: str, request: bytes) -> bytes:
        reply = self.api.call("POST", f"{self.url}/{method}", {**HEADERS, "Authorization": f"Bearer {self.token}"},
                              frame(request))
        if reply.status != 200 or not isinstance(reply.body, bytes):
            raise MlmdError(f"{method}: HTTP {reply.status} {reply.error}".strip())
        return unframe(reply.body)

    def run_artifacts(self, run_id: str) -> list[Artifact]:
        """The artifacts of the run's context; MlmdError when MLMD holds no context for the run."""
        answer = decode(self._call("GetContextByTypeAndName", encode([(1, RUN_CONTEXT_TYPE), (2, run_id)])))
        context = next((raw for number, raw in answer if number == 1 and isinstance(raw, bytes)), None)
        context_id = next((raw for number, raw in decode(context or b"") if number == 1 and isinstance(raw, int)),
                          None)
        if context_id is None:
            raise MlmdError(f"no {RUN_CONTEXT_TYPE} context named {run_id}")
        listed = decode(self._call("GetArtifactsByContext", encode([(1, context_id)])))
        return [artifact(raw) for number, raw in listed if number == 1 and isinstance(raw, bytes)]
