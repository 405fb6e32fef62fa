"""The stack trace the Pulumi SDK attaches to every registration, computed without reading source files.

The SDK (pulumi.runtime.resource._get_stack_trace) calls traceback.extract_stack(), which loads the text of
every frame's source line and stats every file on the stack, then builds a file URI per frame: about a tenth
of the offline engine's time at a thousand teams, for line texts it never sends. `stack_trace` returns the
same message (frames above the concrete resource's constructor, innermost first, a file URI and line each)
from the frame objects alone, with URIs computed once per file. The offline engine uses it while it runs a
program; the real engine is untouched.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from pathlib import Path
from types import FrameType

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2

# Resource.__init__, CustomResource/ComponentResource.__init__, then the concrete class: the SDK's walk stops
# at the third constructor and keeps the frames of whoever called it.
CONSTRUCTORS = 3


@cache
def _uri(filename: str) -> str | None:
    """A file URI, or None where the SDK has none (frozen modules and other relative names)."""
    if not filename:
        return None
    try:
        return Path(filename).as_uri()
    except ValueError:
        return None


@lru_cache(maxsize=65536)
def _frame(filename: str, line: int | None) -> source_pb2.StackFrame:
    uri = _uri(filename)
    if uri is None or line is None:
        return source_pb2.StackFrame()
    return source_pb2.StackFrame(pc=source_pb2.SourcePosition(uri=uri, line=line))


def _callers(frame: FrameType | None) -> list[FrameType]:
    """The frames outside the third constructor on the stack, innermost first; none if there is no third."""
    constructors = 0
    while frame is not None:
        if frame.f_code.co_name == "__init__":
            constructors += 1
            if constructors == CONSTRUCTORS:
                break
        frame = frame.f_back
    callers = []
    caller = frame.f_back if frame is not None else None
    while caller is not None:
        callers.append(caller)
        caller = caller.f_back
    return callers


def stack_trace() -> source_pb2.StackTrace:
    """What the SDK's _get_stack_trace returns, called from the same place."""
    frames = [_frame(f.f_code.co_filename, f.f_lineno) for f in _callers(sys._getframe(1))]
    return source_pb2.StackTrace(frames=frames)


@contextmanager
def lean_stack_traces() -> Iterator[None]:
    """While a program runs under the offline engine, registrations take their stack trace from `stack_trace`."""
    original = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = stack_trace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = original
