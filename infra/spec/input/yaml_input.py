"""Reading a stack file's (or a manifest file's) YAML strictly: UTF-8 only, no key written twice in one mapping,
and aliases bounded.

PyYAML's safe loader lets the last of two equal keys win silently (a pool or a team declared twice loses the
first), accepts a recursive alias, and expands aliases without limit when the result is walked (a "billion
laughs" document grows memory until the process is killed). Each of these becomes a YamlInputError naming the
line, which the loader turns into the usual one-line SpecError.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

# A stack file is a few kilobytes; the biggest example is under 10 KB. These bounds leave room for any real stack
# while keeping a hostile or broken file from using more than a few megabytes.
MAX_BYTES = 1024 * 1024
MAX_NODES = 200_000  # scalars, lists and mappings after every alias is expanded


def _line(node: Node) -> int:
    return node.start_mark.line + 1


class YamlInputError(ValueError):
    """A stack file that cannot be read as a plain YAML document; `path` is the key path when one is known."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


def _check_size(root: Node) -> None:
    """Count the nodes the document has once every alias is expanded; refuse cycles and oversized documents."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise YamlInputError(f"recursive alias at line {_line(node)}: an anchor is used inside itself; "
                                 "write the value out instead")
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            total += sum(size(item) for item in node.value)
        elif isinstance(node, MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        active.discard(key)
        if total > MAX_NODES:
            raise YamlInputError(f"the document expands to more than {MAX_NODES} values (aliases at line "
                                 f"{_line(node)} repeat one another): write the values out or use fewer aliases")
        sizes[key] = total
        return total

    size(root)


# Tags that build values no stack setting takes (a Python set, bytes, ordered pairs): refused by name, as a list or
# a mapping is what the user meant.
_NOT_PLAIN = {f"tag:yaml.org,2002:{name}": form for name, form in (
    ("set", "a list"), ("omap", "a mapping"), ("pairs", "a mapping"), ("binary", "text"))}


def _check_duplicates(node: Node, path: str, seen: set[int]) -> None:
    """Refuse a key given twice in one mapping, naming its key path and both lines (merge keys `<<` excepted:
    overriding a merged key is what they are for), and a value tagged as a set, pairs or bytes."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if node.tag in _NOT_PLAIN:
        raise YamlInputError(f"!!{node.tag.rsplit(':', 1)[-1]} at line {_line(node)} is not a stack file value: "
                             f"write {_NOT_PLAIN[node.tag]}", path)
    if isinstance(node, MappingNode):
        lines: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge" or not isinstance(key.value, str):
                continue
            where = f"{path}.{key.value}" if path else key.value
            if key.value in lines:
                raise YamlInputError(f"given twice (lines {lines[key.value]} and {_line(key)}): the second would "
                                     "silently replace the first; keep one", where)
            lines[key.value] = _line(key)
            _check_duplicates(value, where, seen)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicates(item, f"{path}[{index}]", seen)


def decode(data: bytes) -> str:
    """The file's text; a byte that is not UTF-8 is named by line and offset."""
    if len(data) > MAX_BYTES:
        raise YamlInputError(f"the file has {len(data)} bytes, more than the {MAX_BYTES} a stack file may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise YamlInputError(f"byte 0x{data[error.start]:02x} at line {line} (offset {error.start}) is not "
                             "UTF-8: save the file as UTF-8") from None


def syntax_problem(error: yaml.YAMLError, text: str) -> str:
    """Where and what a YAML syntax error is, in one line: ' at line L, column C: problem' (a control character,
    which YAML forbids anywhere, is named by its code point)."""
    if isinstance(error, yaml.reader.ReaderError) and isinstance(error.character, int):
        line = text.count("\n", 0, error.position) + 1
        return (f" at line {line}: character U+{error.character:04X} is a control character, which YAML does not "
                "allow: remove it")
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{where}: {getattr(error, 'problem', None) or 'invalid YAML'}"


def _construct(loader: yaml.SafeLoader, root: Node) -> Any:
    """One document's value, after the size, recursion, duplicate-key and tag checks."""
    _check_size(root)
    _check_duplicates(root, "", set())
    return loader.construct_document(root)


def load(text: str) -> Any:
    """One YAML document, strictly (see the module docstring); yaml.YAMLError for plain syntax errors."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        return None if root is None else _construct(loader, root)
    except RecursionError:
        raise YamlInputError("the document nests too deeply: flatten it") from None
    finally:
        loader.dispose()


def load_all(text: str) -> list[Any]:
    """Every document of a multi-document file (manifests), each read as strictly as `load` reads one."""
    loader = yaml.SafeLoader(text)
    documents = []
    try:
        while loader.check_node():
            root = loader.get_node()
            if root is not None:
                documents.append(_construct(loader, root))
        return documents
    except RecursionError:
        raise YamlInputError("a document nests too deeply: flatten it") from None
    finally:
        loader.dispose()
