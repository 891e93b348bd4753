"""Normalise kubesim's answers as the reference recordings were normalised, and compare.

The rules are those of ../shared/reference/apiserver-1.34/README.md ("Placeholders"): uids,
resourceVersions (numbered per file in order of first appearance), list resourceVersions
(numbered per occurrence), continue tokens, timestamps, Table ages, generated name suffixes,
the server address and the scheduler's host name.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from typing import Any

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
PLACEHOLDER = re.compile(r"^<(rv|list-rv|continue):\d+>$")
RV_MESSAGES = (
    re.compile(r"(ResourceVersion in (?:the precondition|record) \()(\d+)(\))"),
    re.compile(r"(resourceVersion: )(\d+)()"),
)
LIST_RV_MESSAGES = (
    re.compile(r"(Too large resource version: \d+, current: )(\d+)()"),
    re.compile(r"(too old resource version: \d+ \()(\d+)(\))"),
)


class Normaliser:
    """One per scenario file: the numbering of resourceVersions and continue tokens."""

    def __init__(self) -> None:
        self.rvs: dict[str, str] = {}
        self.list_rvs = 0
        self.continues: dict[str, str] = {}
        self.generated: dict[str, str] = {}  # real generated name -> "<prefix><suffix>"

    def rv(self, value: str) -> str:
        if value not in self.rvs:
            self.rvs[value] = f"<rv:{len(self.rvs) + 1}>"
        return self.rvs[value]

    def list_rv(self, value: str) -> str:
        self.list_rvs += 1
        return f"<list-rv:{self.list_rvs}>"

    def continue_token(self, value: str) -> str:
        if value not in self.continues:
            self.continues[value] = f"<continue:{len(self.continues) + 1}>"
        return self.continues[value]

    def note_generated(self, obj: Any) -> None:
        """Remember names made from generateName (anywhere in the answer)."""
        if isinstance(obj, dict):
            meta = obj.get("metadata")
            if isinstance(meta, dict) and meta.get("generateName") and meta.get("name"):
                prefix = meta["generateName"]
                if meta["name"].startswith(prefix) and meta["name"] != prefix:
                    self.generated[meta["name"]] = prefix + "<suffix>"
            # A Pod names its template claim (<pod>-<claim>-<5 random>) before the claim is read.
            for entry in obj.get("resourceClaimStatuses") or []:
                name = entry.get("resourceClaimName") if isinstance(entry, dict) else None
                if isinstance(name, str) and len(name) > 5:
                    self.generated.setdefault(name, name[:-5] + "<suffix>")
            for value in obj.values():
                self.note_generated(value)
        elif isinstance(obj, list):
            for value in obj:
                self.note_generated(value)

    def normalise(self, obj: Any) -> Any:
        self.note_generated(obj)
        result = self._walk(copy.deepcopy(obj), None)
        text = json.dumps(result)
        for real, placeholder in self.generated.items():
            text = text.replace(real, placeholder)
        text = re.sub(r"kube-api-access-[a-z0-9]{5}\b", "kube-api-access-<suffix>", text)
        text = re.sub(r"(default-scheduler-)[A-Za-z0-9.-]+", r"\1<host>", text)
        return json.loads(text)

    def _walk(self, obj: Any, parent: dict | None) -> Any:
        if isinstance(obj, list):
            return [self._walk(item, None) for item in obj]
        if isinstance(obj, str):
            return self._string(obj)
        if not isinstance(obj, dict):
            return obj
        out = {}
        for key, value in obj.items():
            out[self._string(key)] = self._field(key, value, obj)
        if "columnDefinitions" in obj:
            _ages(out)
        if obj.get("kind") == "Event":
            _event_name(out)
        if obj.get("kind") == "EventList":  # the README: Event names wherever they appear
            for item in out.get("items") or []:
                _event_name(item)
        return out

    def _field(self, key: str, value: Any, owner: dict) -> Any:
        if not isinstance(value, str):
            if key == "serverAddressByClientCIDRs" and isinstance(value, list):
                return [{**item, "serverAddress": "<server>"} for item in value]
            return self._walk(value, owner)
        if key == "uid":
            return "<uid>"
        if key == "resourceVersion" and value:
            named = "name" in owner or "namespace" in owner
            return self.rv(value) if named else self.list_rv(value)
        if key == "continue" and value:
            return self.continue_token(value)
        if key == "message":
            for pattern in RV_MESSAGES:
                value = pattern.sub(lambda m: m[1] + self.rv(m[2]) + m[3], value)
            for pattern in LIST_RV_MESSAGES:
                value = pattern.sub(lambda m: m[1] + self.list_rv(m[2]) + m[3], value)
        return self._string(value)

    @staticmethod
    def _string(value: str) -> str:
        if TIME.match(value):
            return "<time>"
        return UUID4.sub("<uid>", value)


def _ages(table: dict) -> None:
    names = [column.get("name") for column in table.get("columnDefinitions", [])]
    if "Age" not in names:
        return
    index = names.index("Age")
    for row in table.get("rows") or []:
        if len(row.get("cells", [])) > index:
            row["cells"][index] = "<age>"


def canonical(obj: Any) -> Any:
    """managedFields compare as a set; key order never matters (sort_keys)."""
    if isinstance(obj, dict):
        out = {key: canonical(value) for key, value in obj.items()}
        if isinstance(out.get("managedFields"), list):
            out["managedFields"] = sorted(out["managedFields"], key=json.dumps)
        return out
    if isinstance(obj, list):
        return [canonical(item) for item in obj]
    return obj


def swap_nodes(obj: Any) -> Any:
    """The same answer with node-1 and node-2 exchanged (the scheduler's random choice)."""
    text = json.dumps(obj)
    for a, b in (("node-1", "node-2"), ("GPU-00000001", "GPU-00000002")):
        text = text.replace(a, "\0").replace(b, a).replace("\0", b)
    return json.loads(text)


def difference(expected: Any, actual: Any) -> str | None:
    """None when equal (also with the nodes swapped), else a short unified diff."""
    want, got = canonical(expected), canonical(actual)
    if want == got or want == canonical(swap_nodes(actual)):
        return None
    lines = difflib.unified_diff(
        json.dumps(want, indent=1, sort_keys=True).splitlines(),
        json.dumps(got, indent=1, sort_keys=True).splitlines(),
        "recorded",
        "kubesim",
        lineterm="",
        n=2,
    )
    return "\n".join(list(lines)[:80])


def bind(recorded: Any, actual: Any, bindings: dict[str, str]) -> None:
    """Bind the placeholders of a recorded answer to kubesim's values at the same place."""
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key, value in recorded.items():
            if key in actual:
                bind(value, actual[key], bindings)
    elif isinstance(recorded, list) and isinstance(actual, list):
        for want, got in zip(recorded, actual, strict=False):
            bind(want, got, bindings)
    elif isinstance(recorded, str) and isinstance(actual, str):
        if PLACEHOLDER.match(recorded):
            bindings.setdefault(recorded, actual)
        elif "<suffix>" in recorded:
            pattern = re.escape(recorded).replace(re.escape("<suffix>"), "([a-z0-9]+)")
            match = re.fullmatch(pattern, actual)
            if match:
                bindings.setdefault(recorded, actual)


def _event_name(event: Any) -> None:
    if isinstance(event, dict) and isinstance(event.get("metadata"), dict):
        name = event["metadata"].get("name", "")
        event["metadata"]["name"] = re.sub(r"\.[0-9a-f]{10,}$", ".<suffix>", name)
