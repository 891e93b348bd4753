"""Long-running responses: watch streams and `pods/log` (with `follow`)."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from kubesim.apiserver import kubelet_proxy, tables
from kubesim.apiserver.listing import selected_items
from kubesim.base import errors
from kubesim.base.http import Request, Response, Stream
from kubesim.base.selectors import field_matcher, label_matcher
from kubesim.registry.admission import api_version_of, encoded, served

DEFAULT_WATCH_SECONDS = 1800
BOOKMARK_EVERY = 1.0  # how often a quiet watch wakes up to check for a due bookmark
# The watch cache's cadence: a bookmark a minute, and one 2 s before the watch times out.
BOOKMARK_FREQUENCY_SECONDS = 60.0
BOOKMARK_BEFORE_TIMEOUT_SECONDS = 2.0


def _encoded_line(event_type: str, obj_json: bytes) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + obj_json + b"}\n"


def _line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


Encoder = Callable[[str, dict[str, Any]], bytes]


def _encoder(request: Request, target: Any) -> Encoder:
    """Events as the served object, or as one-row Tables when kubectl asks for them."""
    if not tables.wanted(request):
        return lambda event_type, stored: _encoded_line(event_type, encoded(target, stored))
    first = [True]

    def encode(event_type: str, stored: dict[str, Any]) -> bytes:
        obj = served(target, stored)
        meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
        body = tables.table(target.kind.plural, [obj], request, meta, definitions=first[0])
        first[0] = False
        return _line(event_type, body)

    return encode


def _since(request: Request) -> int | None:
    """The resourceVersion to resume after; None means "send the current state first"."""
    value = request.query.get("resourceVersion", "")
    if value in ("", "0"):
        return None
    if not value.isdigit():
        raise errors.bad_request(f"invalid resource version: {value}")
    return int(value)


def watch(api: Any, request: Request, target: Any) -> Stream:
    since = _since(request)
    try:
        timeout = float(request.query.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
    except ValueError:
        raise errors.bad_request("invalid timeoutSeconds") from None
    mode = api.faults.watch_mode(request.path)
    if mode == "drop":
        return Stream(iter(()))
    if mode == "silent":
        return Stream(_silence(api, timeout))
    return Stream(_events(api, request, target, since, timeout))


def _silence(api: Any, timeout: float) -> Iterator[bytes]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not api.stopping.is_set():
        api.stopping.wait(min(1.0, max(0.0, deadline - time.monotonic())))
        yield b""


def _events(
    api: Any, request: Request, target: Any, since: int | None, timeout: float
) -> Iterator[bytes]:
    encode = _encoder(request, target)
    items, current_rv = selected_items(api, request, target)
    matching = {_key(item) for item in items}
    if since is None or request.flag("sendInitialEvents"):
        since = current_rv
        for item in items:
            yield encode("ADDED", item)
        if request.flag("sendInitialEvents") and request.flag("allowWatchBookmarks"):
            yield _line("BOOKMARK", _bookmark(target, current_rv, initial_events_end=True))
    elif since < api.store.compacted_rv:
        expired = errors.expired(since, api.store.compacted_rv)
        yield _line("ERROR", expired.status())
        return
    yield from _follow(api, request, target, since, timeout, encode, matching)


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"


def _seen_as(event_type: str, was_matching: bool, matches: bool) -> str | None:
    """The event a selector-filtered watch sends: an object leaving the selection is
    DELETED for this watcher, one entering it is ADDED (as the watch cache does)."""
    if event_type != "MODIFIED":
        return event_type if matches else None
    if matches:
        return "MODIFIED" if was_matching else "ADDED"
    return "DELETED" if was_matching else None


def _follow(
    api: Any,
    request: Request,
    target: Any,
    since: int,
    timeout: float,
    encode: Encoder,
    matching: set[str],
) -> Iterator[bytes]:
    labels = label_matcher(request.query.get("labelSelector"))
    fields = field_matcher(
        request.query.get("fieldSelector"),
        target.kind.field_selectors,
        api_version=target.kind.api_version(target.version),
        kind=target.kind.kind,
    )
    bookmarks = request.flag("allowWatchBookmarks")
    deadline = time.monotonic() + timeout
    next_bookmark = _next_bookmark(deadline)
    try:
        for event in api.store.watch(target.kind, target.namespace, since, tick=BOOKMARK_EVERY):
            now = time.monotonic()
            if now >= deadline or api.stopping.is_set():
                return
            if event is None:
                if bookmarks and next_bookmark is not None and now >= next_bookmark:
                    yield _line("BOOKMARK", _bookmark(target, api.store.resource_version))
                    next_bookmark = _next_bookmark(deadline)
                else:
                    yield b""
                continue
            key = _key(event.obj)
            matches = labels(event.obj) and fields(event.obj)
            seen_as = _seen_as(event.type, key in matching, matches)
            if matches and seen_as != "DELETED" and event.type != "DELETED":
                matching.add(key)
            else:
                matching.discard(key)
            if seen_as:
                yield encode(seen_as, event.obj)
    except errors.ApiError as error:
        yield _line("ERROR", error.status())


def _next_bookmark(deadline: float) -> float | None:
    """When the next bookmark is due (cacheWatcher.nextBookmarkTime); None: no more."""
    now = time.monotonic()
    due = min(now + BOOKMARK_FREQUENCY_SECONDS, deadline - BOOKMARK_BEFORE_TIMEOUT_SECONDS)
    return due if due >= now else None


# What an empty object of a kind encodes to besides kind, apiVersion and metadata: Go's
# encoding/json writes struct fields without omitempty (and empty structs) anyway.
_CLAIM_SPEC_ZERO = {"devices": {"requests": None}}
ZERO_OBJECT_FIELDS: dict[tuple[str, str], dict[str, Any]] = {
    ("resource.k8s.io", "ResourceClaim"): {"spec": _CLAIM_SPEC_ZERO, "status": {}},
    ("resource.k8s.io", "ResourceClaimTemplate"): {
        "spec": {"metadata": {}, "spec": _CLAIM_SPEC_ZERO}
    },
    ("resource.k8s.io", "DeviceClass"): {"spec": {}},
    ("", "Pod"): {"spec": {"containers": None}, "status": {}},
    ("", "Namespace"): {"spec": {}, "status": {}},
}


def _bookmark(target: Any, rv: int, *, initial_events_end: bool = False) -> dict[str, Any]:
    """A BOOKMARK's object: an empty object of the kind carrying only the resourceVersion
    (and, closing the initial events of sendInitialEvents, the k8s.io/initial-events-end
    annotation)."""
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    bookmark = {"kind": target.kind.kind, "apiVersion": api_version_of(target), "metadata": meta}
    zero = ZERO_OBJECT_FIELDS.get((target.kind.group, target.kind.kind), {})
    return bookmark | copy.deepcopy(zero)


WAITING_MESSAGES = {
    "ErrImagePull": "trying and failing to pull image",
    "ImagePullBackOff": "image can't be pulled",
}


def _container_name(pod: dict[str, Any], request: Request) -> str:
    names = [c["name"] for c in pod.get("spec", {}).get("containers") or []]
    name = request.query.get("container")
    pod_name = pod["metadata"]["name"]
    if not name:
        if len(names) == 1:
            return names[0]
        raise errors.bad_request(
            f"a container name must be specified for pod {pod_name}, "
            f"choose one of: [{' '.join(names)}]"
        )
    if name not in names:
        raise errors.bad_request(f"container {name} is not valid for pod {pod_name}")
    return name


def _container_state(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return status.get("state") or {}
    return {}


def _check_started(pod: dict[str, Any], container: str, request: Request) -> None:
    state = _container_state(pod, container)
    pod_name = pod["metadata"]["name"]
    if request.flag("previous"):
        raise errors.bad_request(
            f'previous terminated container "{container}" in pod "{pod_name}" not found'
        )
    if "running" in state or "terminated" in state:
        return
    reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
    raise errors.bad_request(
        f'container "{container}" in pod "{pod_name}" is waiting to start: '
        f"{WAITING_MESSAGES.get(reason, reason)}"
    )


def _cutoff(request: Request) -> datetime | None:
    """The oldest line wanted, from `sinceSeconds` or `sinceTime` (RFC 3339)."""
    since_seconds = request.query.get("sinceSeconds", "")
    if since_seconds.isdigit():
        return datetime.now(UTC) - timedelta(seconds=int(since_seconds))
    since_time = request.query.get("sinceTime")
    if not since_time:
        return None
    try:
        return datetime.fromisoformat(since_time.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise errors.bad_request(f'invalid sinceTime: "{since_time}"') from None


def _render(lines: list[tuple[datetime, str]], request: Request) -> bytes:
    cutoff = _cutoff(request)
    if cutoff is not None:
        lines = [(stamp, text) for stamp, text in lines if stamp >= cutoff]
    tail = request.query.get("tailLines", "")
    if tail.isdigit():
        lines = lines[len(lines) - int(tail) :] if int(tail) else []
    return b"".join(_log_line(stamp, text, request.flag("timestamps")) for stamp, text in lines)


def _log_line(stamp: datetime, text: str, timestamps: bool) -> bytes:
    line = text if text.endswith("\n") else text + "\n"
    if timestamps:
        moment = stamp.astimezone(UTC)
        line = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}000Z " + line
    return line.encode()


def _limited(body: bytes, request: Request) -> bytes:
    limit = request.query.get("limitBytes", "")
    return body[: int(limit)] if limit.isdigit() else body


def pod_log(api: Any, request: Request, target: Any) -> Response | Stream:
    pod = api.store.get(target.kind, target.namespace, target.name)
    container = _container_name(pod, request)
    if not pod.get("spec", {}).get("nodeName"):
        return Response(204, b"", "")  # no node yet: nothing to read (recording 07)
    # The way to the node's kubelet: a Node without addresses (recording 09) or a kubelet that
    # cannot be dialled fails here, before the kubelet could say anything.
    kubelet_proxy.log_location(api, pod, container, request)
    _check_started(pod, container, request)
    lines = api.kubelet.logs(target.namespace, target.name, container)
    if not request.flag("follow"):
        return Response(200, _limited(_render(lines, request), request), "text/plain")
    return Stream(_follow_log(api, request, target, container, lines), "text/plain")


def _follow_log(
    api: Any, request: Request, target: Any, container: str, lines: list
) -> Iterator[bytes]:
    limit = request.query.get("limitBytes", "")
    budget = int(limit) if limit.isdigit() else None
    chunk, seen = _render(lines, request), len(lines)
    node = api.store.get(target.kind, target.namespace, target.name)["spec"]["nodeName"]
    while True:
        if budget is not None:
            chunk = chunk[:budget]
            budget -= len(chunk)
        yield chunk
        done = _finished(api, target, container)
        if budget == 0 or api.stopping.is_set() or seen < 0 or _kubelet_stopped(api, node):
            return
        if not done:
            api.kubelet.wait_for_log_change(target.namespace, target.name, container, seen, 1.0)
        lines = api.kubelet.logs(target.namespace, target.name, container)
        stamps = request.flag("timestamps")
        chunk = b"".join(_log_line(stamp, text, stamps) for stamp, text in lines[seen:])
        # After the container ended, send what is left once and close the stream.
        seen = -1 if done else len(lines)


def _kubelet_stopped(api: Any, node: str) -> bool:
    """A stopped kubelet closes its streams; an unreachable one just sends nothing more."""
    return api.faults.kubelet_fault(node) == "down"


def _finished(api: Any, target: Any, container: str) -> bool:
    try:
        pod = api.store.get(target.kind, target.namespace, target.name)
    except errors.ApiError:
        return True
    return "terminated" in _container_state(pod, container)
