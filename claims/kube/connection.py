"""The HTTP side of a gateway: credentials that follow their file, a rate limit, errors.

Credentials rotate under a long-lived process (a kubeconfig rewritten with a new token, the
projected in-cluster token file): the connection notices a changed file, and reloads before
giving up on a 401 or 403.
"""

import base64
import contextlib
import copy
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import urllib3
from kubernetes import client, config
from kubernetes.config import incluster_config, kube_config

from claims.kube.errors import (
    PermanentKubeError,
    ServerAskedToWait,
    TransientKubeError,
    error_for_response,
)
from claims.kube.ratelimit import Limiter

Obj = dict[str, Any]
RECHECK_SECONDS = 1.0  # how often the credential files are looked at (a stat each)
RETRY_AFTER_ATTEMPTS = 10  # client-go's maxRetries for responses with Retry-After
RETRY_AFTER_MAX_SECONDS = 10.0
Signature = tuple[tuple[int, int] | None, ...]
SERVICE_ACCOUNT_DIR = os.path.dirname(incluster_config.SERVICE_TOKEN_FILENAME)
# Told of every request's answer (method, URL, status; 0 when none came): the portal's
# metrics (portal/metrics.py) add themselves; a plain callback, so this layer stays plain.
call_observers: list[Callable[[str, str, int], None]] = []


def observe_call(method: str, url: str, status: int) -> None:
    for observer in call_observers:
        observer(method, url, status)


def load_configuration(
    kubeconfig_path: str | None,
    context: str | None,
    in_cluster: bool,
    *,
    kubeconfig: Obj | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> client.Configuration:
    """From in-cluster files, a kubeconfig held in memory, or a kubeconfig file."""
    configuration = client.Configuration()
    try:
        if in_cluster:
            incluster_config.InClusterConfigLoader(
                token_filename=os.path.join(service_account_dir, "token"),
                cert_filename=os.path.join(service_account_dir, "ca.crt"),
            ).load_and_set(configuration)
        elif kubeconfig is not None:
            load_from_memory(kubeconfig, context, configuration)
        else:
            config.load_kube_config(
                config_file=kubeconfig_path,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (config.ConfigException, OSError, ValueError) as e:
        raise PermanentKubeError(f"cannot load the cluster connection: {e}", 0, "Config") from e
    # Retries belong to the caller (Celery, with backoff); one quick reconnect is enough here.
    # A Retry-After is Connection._send's to honour: urllib3 would take a 429 carrying one for
    # a failure to reach the cluster.
    configuration.retries = urllib3.Retry(
        total=1, read=0, status=0, redirect=0, respect_retry_after_header=False
    )
    return configuration


def _entry(kubeconfig: Obj, section: str, name: Any) -> Obj:
    found = [
        e for e in kubeconfig.get(section) or [] if isinstance(e, dict) and e.get("name") == name
    ]
    value = found[0].get(section[:-1]) if found else None
    return value if isinstance(value, dict) else {}


def _memory_file(configuration: client.Configuration, data: bytes) -> str:
    """A path to `data` that is no file on disk (OpenSSL reads a client certificate and key
    from a path only); it ends with the configuration."""
    fd = os.memfd_create("kube-credential", os.MFD_CLOEXEC)
    os.write(fd, data)
    weakref.finalize(configuration, os.close, fd)
    return f"/proc/self/fd/{fd}"


def load_from_memory(
    kubeconfig: Obj, context: str | None, configuration: client.Configuration
) -> None:
    """Load a kubeconfig without writing it, or the credentials in it, to a file (the
    client's loader would put *-data in temporary files): the CA stays in memory."""
    kubeconfig = copy.deepcopy(kubeconfig)
    chosen = _entry(kubeconfig, "contexts", context or kubeconfig.get("current-context"))
    cluster = _entry(kubeconfig, "clusters", chosen.get("cluster"))
    user = _entry(kubeconfig, "users", chosen.get("user"))
    ca = cluster.pop("certificate-authority-data", None)
    for key in ("client-certificate", "client-key"):
        data = user.pop(f"{key}-data", None)
        if data:
            user[key] = _memory_file(configuration, base64.b64decode(data))
    config.load_kube_config_from_dict(
        kubeconfig, context=context, client_configuration=configuration, persist_config=False
    )
    if ca:
        configuration.ca_cert_data = base64.b64decode(ca).decode()


def credential_files(
    kubeconfig_path: str | None, in_cluster: bool, service_account_dir: str = SERVICE_ACCOUNT_DIR
) -> list[str]:
    if in_cluster:
        return [os.path.join(service_account_dir, "token")]
    paths = kubeconfig_path or kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    separator = kube_config.ENV_KUBECONFIG_PATH_SEPARATOR
    return [os.path.expanduser(p) for p in paths.split(separator) if p]


def signature(paths: list[str]) -> Signature:
    stats: list[tuple[int, int] | None] = []
    for path in paths:
        try:
            stat = os.stat(path)
            stats.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            stats.append(None)
    return tuple(stats)


def json_object(payload: bytes) -> Obj:
    try:
        obj = json.loads(payload)
    except ValueError as e:  # e.g. an HTML page from a proxy in front of the cluster
        raise TransientKubeError(f"unreadable answer from the cluster: {payload[:200]!r}") from e
    if not isinstance(obj, dict):
        raise TransientKubeError(f"unexpected answer from the cluster: {payload[:200]!r}")
    return obj


class Connection:
    """One cluster's ApiClient, rebuilt when its credentials change; thread-safe."""

    def __init__(
        self,
        kubeconfig_path: str | None,
        context: str | None,
        in_cluster: bool,
        *,
        timeout: tuple[float, float],
        limiter: Limiter,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        kubeconfig: Obj | None = None,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
    ) -> None:
        self._source = (kubeconfig_path, context, in_cluster)
        self._options: Obj = {"kubeconfig": kubeconfig, "service_account_dir": service_account_dir}
        in_memory = kubeconfig is not None and not in_cluster
        files = credential_files(kubeconfig_path, in_cluster, service_account_dir)
        self._files = [] if in_memory else files
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep
        self.timeout = timeout
        self.limiter = limiter
        self._signature = signature(self._files)
        self._checked_at = clock()
        self.configuration = load_configuration(*self._source, **self._options)
        # Never the global default configuration: several clusters live in one process.
        self.api_client = client.ApiClient(configuration=self.configuration)

    def close(self) -> None:
        self.api_client.close()

    def reload(self) -> bool:
        """Read the credentials again; a file that does not load (half written?) keeps the
        old ones until it changes again."""
        with self._lock:
            self._signature = signature(self._files)
            self._checked_at = self._clock()
            try:
                configuration = load_configuration(*self._source, **self._options)
            except PermanentKubeError:
                return False
            old, self.api_client = self.api_client, client.ApiClient(configuration=configuration)
            self.configuration = configuration
        old.close()
        return True

    def _reload_if_changed(self) -> None:
        with self._lock:
            now = self._clock()
            if now - self._checked_at < RECHECK_SECONDS:
                return
            self._checked_at = now
            changed = signature(self._files) != self._signature
        if changed:
            self.reload()

    def call(self, method: str, path: str, query: Obj | None = None, **kwargs: Any) -> bytes:
        """One request; a 401 or 403 is tried once more with freshly read credentials."""
        self._reload_if_changed()
        try:
            return self._send(method, path, query, **kwargs)
        except PermanentKubeError as e:
            if e.status not in (401, 403):
                raise
        self.reload()
        return self._send(method, path, query, **kwargs)

    def stream(
        self,
        path: str,
        query: Obj,
        read_timeout: float | None,
        on_open: Callable[[Callable[[], None]], None] | None = None,
        accept: str = "application/json",
    ) -> Iterator[bytes]:
        """GET a streamed body (a watch, a followed log) and yield it line by line.

        A stream that stays silent for read_timeout seconds (None: however long) raises
        TransientKubeError, so a connection that died without a FIN is noticed. on_open
        receives a function that ends the stream from another thread."""
        self._reload_if_changed()
        self.limiter.acquire()
        api_client = self.api_client
        _, url, headers, _, _ = api_client.param_serialize(
            method="GET",
            resource_path=path + "?" + urlencode(query),
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        try:
            response = api_client.rest_client.pool_manager.request(
                "GET",
                url,
                headers=headers,
                preload_content=False,
                timeout=urllib3.Timeout(connect=self.timeout[0], read=read_timeout),
            )
        except urllib3.exceptions.HTTPError as e:
            observe_call("GET", url, 0)
            raise TransientKubeError(f"cannot reach the cluster: {e}") from e
        observe_call("GET", url, response.status)
        try:
            if not 200 <= response.status <= 299:
                raise error_for_response(response.status, response.data, response.reason or "")
            if on_open is not None:

                def end_stream() -> None:
                    # It may have ended already (urllib3 released the connection).
                    with contextlib.suppress(RuntimeError, ValueError, OSError):
                        response.shutdown()

                on_open(end_stream)
            pending = b""
            for chunk in response.stream(amt=None, decode_content=False):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                yield from (line for line in lines if line.strip())
            if pending.strip():
                yield pending
        except urllib3.exceptions.HTTPError as e:
            raise TransientKubeError(f"the stream broke: {e}") from e
        finally:
            response.release_conn()

    def _send(
        self,
        method: str,
        path: str,
        query: Obj | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> bytes:
        api_client = self.api_client
        _, full_url, headers, _, _ = api_client.param_serialize(
            method=method,
            resource_path=path + ("?" + urlencode(query) if query else ""),
            header_params={"Accept": accept, "Content-Type": content_type},
            auth_settings=["BearerToken"],
        )
        # The client serialises a JSON body itself (merge patches too); others go as text.
        data = body if body is None or content_type.endswith("json") else json.dumps(body)
        # As client-go: a server that did not handle the request and said when to send it
        # again (API Priority and Fairness' 429) gets it then, up to RETRY_AFTER_ATTEMPTS
        # times; a wait longer than RETRY_AFTER_MAX_SECONDS is left to the caller's back-off.
        for attempt in range(RETRY_AFTER_ATTEMPTS + 1):
            self.limiter.acquire()
            try:
                return self._perform(api_client, method, full_url, headers, data)
            except ServerAskedToWait as wait:
                if attempt == RETRY_AFTER_ATTEMPTS or wait.seconds > RETRY_AFTER_MAX_SECONDS:
                    raise
                self._sleep(wait.seconds)
        raise AssertionError("unreachable")

    def _perform(
        self, api_client: client.ApiClient, method: str, url: str, headers: Obj, data: Any
    ) -> bytes:
        try:
            response = api_client.call_api(
                method, url, headers, body=data, _request_timeout=self.timeout
            )
            payload = response.read()
        except urllib3.exceptions.HTTPError as e:
            observe_call(method, url, 0)
            raise TransientKubeError(f"cannot reach the cluster: {e}") from e
        except client.ApiException as e:  # TLS failures surface as status 0
            observe_call(method, url, 0)
            raise TransientKubeError(f"cannot reach the cluster: {e.reason}") from e
        observe_call(method, url, response.status)
        if not 200 <= response.status <= 299:
            retry_after = response.headers.get("Retry-After")
            raise error_for_response(response.status, payload, response.reason or "", retry_after)
        return payload

    def cluster_entry(self) -> Obj:
        """This connection's server and how to trust it, as a kubeconfig `cluster`."""
        configuration = self.configuration
        cluster: Obj = {"server": configuration.host}
        if configuration.ssl_ca_cert:
            with open(configuration.ssl_ca_cert, "rb") as f:
                cluster["certificate-authority-data"] = base64.b64encode(f.read()).decode()
        elif configuration.ca_cert_data:
            ca = configuration.ca_cert_data
            ca = ca.encode() if isinstance(ca, str) else ca
            cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
        if not configuration.verify_ssl:
            cluster["insecure-skip-tls-verify"] = True
        if getattr(configuration, "tls_server_name", None):
            cluster["tls-server-name"] = configuration.tls_server_name
        return cluster
