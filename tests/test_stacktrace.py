"""The offline engine's stack traces are the SDK's, frame for frame."""

from __future__ import annotations

from collections.abc import Callable

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2

from infra.offline.stacktrace import lean_stack_traces, stack_trace

Trace = Callable[[], source_pb2.StackTrace]


class _Base:
    def __init__(self, trace: Trace, out: list[source_pb2.StackTrace]) -> None:
        out.append(trace())  # where Resource.__init__ asks for the trace (via register_resource)


class _Custom(_Base):
    def __init__(self, trace: Trace, out: list[source_pb2.StackTrace]) -> None:
        super().__init__(trace, out)


class _Concrete(_Custom):
    def __init__(self, trace: Trace, out: list[source_pb2.StackTrace]) -> None:
        super().__init__(trace, out)


class _Component:
    """A user's component building the resource inside its own constructor: its frame must be kept."""

    def __init__(self, trace: Trace, out: list[source_pb2.StackTrace]) -> None:
        _Concrete(trace, out)


def _both(build: Callable[[Trace, list[source_pb2.StackTrace]], object]) -> list[source_pb2.StackTrace]:
    out: list[source_pb2.StackTrace] = []
    for trace in (sdk_resource._get_stack_trace, stack_trace):
        build(trace, out)
    return out


def test_same_frames_as_the_sdk_below_a_component() -> None:
    sdk, ours = _both(_Component)
    assert len(sdk.frames) > 3
    assert ours == sdk
    assert sdk.frames[0].pc.uri.endswith("/tests/test_stacktrace.py")  # the component's line, not the SDK's


def test_same_frames_as_the_sdk_at_top_level() -> None:
    sdk, ours = _both(_Concrete)
    assert ours == sdk and sdk.frames


def test_fewer_constructors_give_the_sdk_answer() -> None:
    out: list[source_pb2.StackTrace] = []
    for trace in (sdk_resource._get_stack_trace, stack_trace):
        _Base(trace, out)  # only two constructors below this test
    sdk, ours = out
    assert ours == sdk


def test_the_sdk_is_patched_only_while_the_engine_runs() -> None:
    original = sdk_resource._get_stack_trace
    with lean_stack_traces():
        assert sdk_resource._get_stack_trace is stack_trace
    assert sdk_resource._get_stack_trace is original
