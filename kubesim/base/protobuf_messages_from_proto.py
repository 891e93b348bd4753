"""Writes protobuf_messages.json, the field numbers kubesim decodes protobuf bodies with, from
upstream's generated.proto and types.go (the Go structs say which fields JSON inlines).

    python -m kubesim.base.protobuf_messages_from_proto API_DIR APIMACHINERY_DIR

API_DIR is a checkout of k8s.io/api (kubernetes/api), APIMACHINERY_DIR of k8s.io/apimachinery.
Only the messages reachable from an object with metadata in these packages are kept (the
kinds kubesim serves, and the TokenRequest, Eviction and review bodies kubectl posts)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

API_PACKAGES = (
    "core/v1",
    "rbac/v1",
    "apps/v1",
    "batch/v1",
    "networking/v1",
    "policy/v1",
    "authentication/v1",
    "authorization/v1",
    "resource/v1",
    "resource/v1beta1",
    "resource/v1beta2",
)
MACHINERY_PACKAGES = (
    "pkg/apis/meta/v1",
    "pkg/api/resource",
    "pkg/util/intstr",
    "pkg/runtime",
    "pkg/runtime/schema",
)
FIELD = re.compile(
    r"^\s*(optional|repeated)?\s*(map<\s*\w+\s*,\s*[\w.]+\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+);"
)
EMBEDDED = re.compile(r'^\s+([A-Z]\w*)\s+`json:""\s+protobuf:"bytes,(\d+)')
OUT = Path(__file__).with_name("protobuf_messages.json")
SCALARS = {"string", "bytes", "bool", "int32", "int64", "double", "float", "uint32", "uint64"}


def _qualify(type_name: str, package: str) -> str:
    if type_name in SCALARS:
        return type_name
    return type_name.lstrip(".") if type_name.startswith(".") else f"{package}.{type_name}"


def _messages(proto: str) -> dict[str, dict[str, list]]:
    """message full name -> field number -> [json name, type, label]."""
    package = re.search(r"^package ([\w.]+);", proto, re.M).group(1)  # type: ignore[union-attr]
    found: dict[str, dict[str, list]] = {}
    current: dict[str, list] | None = None
    for line in proto.splitlines():
        if started := re.match(r"^message (\w+) \{", line):
            current = found.setdefault(f"{package}.{started.group(1)}", {})
        elif line.startswith("}"):
            current = None
        elif current is not None and (field := FIELD.match(line)):
            label, type_name, name, number = field.groups()
            if type_name.startswith("map<"):
                value = type_name[4:-1].split(",")[1].strip()
                current[number] = [name, _qualify(value, package), "map"]
            else:
                current[number] = [name, _qualify(type_name, package), label or "optional"]
    return found


def _inline_fields(types_go: str, package: str, messages: dict[str, dict[str, list]]) -> None:
    """Marks the embedded structs JSON inlines (`json:""`, e.g. Volume.volumeSource)."""
    struct = ""
    for line in types_go.splitlines():
        if started := re.match(r"^type (\w+) struct \{", line):
            struct = started.group(1)
        elif (embedded := EMBEDDED.match(line)) and f"{package}.{struct}" in messages:
            messages[f"{package}.{struct}"][embedded.group(2)][2] = "inline"


def _reachable(messages: dict[str, dict[str, list]], roots: list[str]) -> dict[str, dict]:
    kept: dict[str, dict] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in kept or name not in messages:
            continue
        kept[name] = messages[name]
        todo.extend(field[1] for field in messages[name].values())
    return dict(sorted(kept.items()))


def main(api: Path, machinery: Path) -> None:
    messages: dict[str, dict[str, list]] = {}
    for base, packages in ((api, API_PACKAGES), (machinery, MACHINERY_PACKAGES)):
        for package in packages:
            messages.update(_messages((base / package / "generated.proto").read_text()))
    for package in API_PACKAGES:
        name = "k8s.io.api." + package.replace("/", ".")
        _inline_fields((api / package / "types.go").read_text(), name, messages)
    roots = [name for name, fields in messages.items() if fields.get("1", [""])[0] == "metadata"]
    OUT.write_text(json.dumps(_reachable(messages, roots), indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
