"""A claim's GPU use from a real Prometheus scraping kubesim's dcgm-exporters, or from the
exporters directly; "no data" with the reason when neither answers."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from kubernetes import client

from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.read import utilisation
from portal.settings import envrange
from tests.fixtures.kubesim import api_client, create_namespace, wait_until
from tests.fixtures.prometheus import free_port
from tests.kubesim.test_dcgm_exporter import TRAIN_IMAGE, hold_on_gpu, run_on_gpu

LONG_RUN = ["--steps", "1000", "--step-seconds", "100"]


def claim_row(
    owner: User, namespace: str, name: str, allocation: dict | None = None
) -> ClaimRequest:
    cluster, _ = Cluster.objects.get_or_create(name="lab")
    ns = NamespaceRequest.objects.create(owner=owner, cluster=cluster, name=namespace)
    return ClaimRequest.objects.create(
        allocation=allocation,
        allocated_at=timezone.now() - timedelta(minutes=2) if allocation else None,
        owner=owner,
        namespace_request=ns,
        name=name,
        device_class="gpu.nvidia.com",
        count=1,
        state=ClaimRequest.State.IN_USE,
        applied_at=timezone.now() - timedelta(minutes=5),
    )


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers: a Prometheus that hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def test_it_reads_a_claims_activity_from_prometheus(
    kubesim_with_prometheus, alice: User, settings
) -> None:
    handle, prometheus = kubesim_with_prometheus
    settings.PROMETHEUS_URL = prometheus.url
    namespace = create_namespace(handle)
    run_on_gpu(handle, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "0.6"])
    claim = claim_row(alice, namespace, "train")

    usage = wait_until(
        lambda: (u := utilisation.claim_usage(claim)).activity and u.has_history and u, timeout=60
    )
    assert usage.source == "prometheus" and usage.no_data == ""
    assert usage.activity == pytest.approx(0.6) and usage.gpus == 1
    assert usage.memory_used_mib and usage.memory_used_mib > 40_000  # of an H100's 80 GB
    assert usage.power_watts and 72 < usage.power_watts < 700
    assert max(value for _, value in usage.points) == pytest.approx(0.6)
    assert len(usage.points) <= utilisation.MAX_POINTS
    assert usage.idle_since is None  # busy now
    assert utilisation.utilisation_check().ok

    client.CoreV1Api(api_client(handle)).delete_namespaced_pod(
        "train", namespace, grace_period_seconds=0
    )
    after = wait_until(lambda: (u := utilisation.claim_usage(claim)).idle_since and u, timeout=60)
    assert after.activity is None and "no Pod of it runs" in after.no_data
    assert after.has_history  # what it did stays, and since when it has been idle


def test_it_says_a_claim_nothing_ran_on_is_idle_since_it_was_made(
    kubesim_with_prometheus, alice: User, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    claim = claim_row(alice, "nobody-here", "quiet")
    usage = utilisation.claim_usage(claim)
    assert usage.activity is None and "Prometheus has no metrics of this claim" in usage.no_data
    assert usage.idle_since is not None and usage.idle_since <= claim.applied_at + timedelta(
        seconds=1
    )


def test_a_claim_held_with_nothing_running_reads_idle_not_no_data(
    kubesim_with_prometheus, alice: User, settings
) -> None:
    handle, prometheus = kubesim_with_prometheus
    settings.PROMETHEUS_URL = prometheus.url
    namespace = create_namespace(handle)
    claim = claim_row(alice, namespace, "held", hold_on_gpu(handle, namespace, "held"))

    usage = wait_until(lambda: (u := utilisation.claim_usage(claim)).has_history and u, timeout=60)
    assert usage.no_data == "" and usage.source == "prometheus"
    assert usage.activity == 0 and usage.gpus == 1
    assert usage.idle_since is not None and usage.idle_since <= timezone.now()
    assert usage.start == pytest.approx(claim.allocated_at.timestamp())

    settings.PROMETHEUS_URL = ""
    settings.DCGM_EXPORTER_URLS = list(handle.dcgm_exporter_urls.values())
    now = utilisation.claim_usage(claim)
    assert now.no_data == "" and now.activity == 0 and now.gpus == 1


def test_a_held_claim_whose_gpu_has_no_series_is_no_data_with_why(
    kubesim_with_prometheus, alice: User, settings
) -> None:
    settings.PROMETHEUS_URL = kubesim_with_prometheus[1].url
    gone = "GPU-00000000-0000-0000-0000-000000000000"
    allocation = {
        "node": "gpu-node-9",
        "devices": [
            {
                "driver": "gpu.nvidia.com",
                "pool": "gpu-node-9",
                "device": "gpu-0",
                "attributes": {"uuid": gone, "type": "gpu"},
            }
        ],
    }
    claim = claim_row(alice, "elsewhere", "lost", allocation)
    usage = utilisation.claim_usage(claim)
    assert usage.activity is None and gone in usage.no_data and "gpu-node-9" in usage.no_data


def test_clusters_sharing_a_prometheus_do_not_mix_their_claims(
    kubesim_with_prometheus, alice: User, settings
) -> None:
    handle, prometheus = kubesim_with_prometheus
    settings.PROMETHEUS_URL, settings.DCGM_EXPORTER_URLS = prometheus.url, []
    namespace = create_namespace(handle)
    run_on_gpu(handle, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "0.6"])
    lab = claim_row(alice, namespace, "train")
    nodes = [{"node": f"gpu-node-{n}", "name": "gpu-0"} for n in (1, 2)]
    Cluster.objects.filter(name="lab").update(inventory={"devices": nodes})
    other = Cluster.objects.create(name="other", inventory={"devices": [{"node": "far-1"}]})
    ns = NamespaceRequest.objects.create(owner=alice, cluster=other, name=namespace)
    twin = ClaimRequest.objects.create(
        owner=alice,
        namespace_request=ns,
        name="train",
        device_class="gpu.nvidia.com",
        count=1,
        state=ClaimRequest.State.IN_USE,
        applied_at=lab.applied_at,
    )

    def read(claim: ClaimRequest) -> utilisation.Usage:
        return utilisation.claim_usage(ClaimRequest.objects.get(pk=claim.pk))

    usage = wait_until(lambda: (u := read(lab)).activity and u, timeout=60)
    assert usage.activity == pytest.approx(0.6)
    # Same namespace and name on another cluster of the same Prometheus: not these series.
    assert read(twin).activity is None and read(twin).no_data
    assert utilisation.devices_usage(other) == {}
    assert len(utilisation.devices_usage(Cluster.objects.get(name="lab"))) == 8
    # A label the admin names selects the cluster's series instead of its nodes.
    Cluster.objects.filter(pk=other.pk).update(prometheus_selector='job="dcgm-exporter"')
    assert read(twin).activity == pytest.approx(0.6)
    Cluster.objects.filter(pk=other.pk).update(prometheus_selector='job="elsewhere"')
    assert read(twin).activity is None
    # A cluster's own Prometheus, without the global setting.
    settings.PROMETHEUS_URL = ""
    Cluster.objects.filter(name="lab").update(prometheus_url=prometheus.url)
    assert read(lab).activity == pytest.approx(0.6)
    assert "no metrics source is set" in read(twin).no_data


@pytest.fixture
def counting_proxy(kubesim_with_prometheus) -> Iterator[tuple[str, list[str]]]:
    """The real Prometheus behind a proxy that notes every request it passes on."""
    target = kubesim_with_prometheus[1].url
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            try:
                with urllib.request.urlopen(target + self.path, timeout=10) as answer:
                    status, body = answer.status, answer.read()
            except urllib.error.HTTPError as error:
                status, body = error.code, error.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()
    thread.join()


def test_live_refreshes_within_the_cache_period_ask_prometheus_once(
    kubesim_with_prometheus, counting_proxy, alice: User, settings
) -> None:
    handle = kubesim_with_prometheus[0]
    url, seen = counting_proxy
    settings.PROMETHEUS_URL, settings.UTILISATION_CACHE_SECONDS = url, 0
    namespace = create_namespace(handle)
    run_on_gpu(handle, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "0.6"])
    claim = claim_row(alice, namespace, "train")
    wait_until(lambda: utilisation.claim_usage(claim).has_history, timeout=60)
    settings.UTILISATION_CACHE_SECONDS = 60
    first = utilisation.claim_usage(claim)
    asked = len(seen)
    assert first.has_history and asked
    assert utilisation.claim_usage(claim) == first and len(seen) == asked
    cluster = claim.namespace_request.cluster
    devices = utilisation.devices_usage(cluster)
    asked = len(seen)
    assert utilisation.devices_usage(cluster) == devices and len(seen) == asked

    browser = Client()
    browser.force_login(alice)
    for _ in range(3):  # the claim page and its live part, refreshed
        assert browser.get(reverse("claim", args=[claim.pk])).status_code == 200
    assert len(seen) == asked

    settings.UTILISATION_CACHE_SECONDS = 0  # off: every read asks
    utilisation.claim_usage(claim)
    assert len(seen) > asked


def test_it_reads_the_exporters_without_prometheus(kubesim_private, alice: User, settings) -> None:
    settings.PROMETHEUS_URL = ""
    settings.DCGM_EXPORTER_URLS = list(kubesim_private.dcgm_exporter_urls.values())
    namespace = create_namespace(kubesim_private)
    run_on_gpu(kubesim_private, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "0.3"])
    claim = claim_row(alice, namespace, "train")
    usage = wait_until(lambda: (u := utilisation.claim_usage(claim)).activity and u, timeout=30)
    assert usage.source == "exporters" and usage.activity == pytest.approx(0.3)
    assert not usage.has_history and usage.idle_since is None  # instant values only
    assert utilisation.utilisation_check().ok


def test_it_says_no_data_when_prometheus_is_down(alice: User, settings) -> None:
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    usage = utilisation.claim_usage(claim_row(alice, "team-a", "train"))
    assert usage.activity is None and "Prometheus is unreachable" in usage.no_data
    check = utilisation.utilisation_check()
    assert not check.ok and "unreachable" in check.message


def test_it_says_no_data_when_prometheus_does_not_answer(
    alice: User, settings, silent_server: str
) -> None:
    settings.PROMETHEUS_URL, settings.UTILISATION_TIMEOUT = silent_server, 0.3
    usage = utilisation.claim_usage(claim_row(alice, "team-a", "train"))
    assert usage.no_data == "Prometheus did not answer within 0.3 s"


def test_it_says_when_the_exporter_has_no_dra_labels(kubesim_with_prometheus, settings) -> None:
    handle = kubesim_with_prometheus[0]
    handle.admin("POST", "/_kubesim/dcgm", {"draLabels": False})
    try:
        settings.PROMETHEUS_URL = ""
        settings.DCGM_EXPORTER_URLS = list(handle.dcgm_exporter_urls.values())
        check = utilisation.utilisation_check()
        assert not check.ok and "none with DRA claim labels" in check.message
        assert "KUBERNETES_ENABLE_DRA" in check.message
    finally:
        handle.admin("POST", "/_kubesim/dcgm", {"draLabels": True})


def test_it_says_when_no_source_is_set(settings) -> None:
    settings.PROMETHEUS_URL, settings.DCGM_EXPORTER_URLS = "", []
    check = utilisation.utilisation_check()
    assert "PROMETHEUS_URL" in check.message and not check.configured


def test_the_claim_page_shows_no_data_and_why(alice: User, settings) -> None:
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    claim = claim_row(alice, "team-a", "train")
    client = Client()
    client.force_login(alice)
    response = client.get(reverse("claim", args=[claim.pk]))
    assert response.status_code == 200
    assert b'id="utilisation-no-data"' in response.content
    assert b"Prometheus is unreachable" in response.content


@pytest.mark.parametrize("text", ["-0.1", "1.5", "often", ""])
def test_it_refuses_a_threshold_out_of_range(monkeypatch, text: str) -> None:
    monkeypatch.setenv("UTILISATION_IDLE_THRESHOLD", text)
    with pytest.raises(ImproperlyConfigured, match="expected a number from 0 to 1"):
        envrange("UTILISATION_IDLE_THRESHOLD", "0.05", 0, 1)


def test_the_cluster_page_gives_the_preflight_line(alice: User, settings) -> None:
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    cluster = Cluster.objects.create(name="lab")
    client = Client()
    client.force_login(alice)
    response = client.get(reverse("cluster", args=[cluster.pk]))
    assert response.status_code == 200
    assert b'id="utilisation-check"' in response.content
    assert b"Prometheus is unreachable" in response.content


def test_it_reads_every_gpu_for_the_map(kubesim_private, alice: User, settings) -> None:
    settings.PROMETHEUS_URL = ""
    settings.DCGM_EXPORTER_URLS = list(kubesim_private.dcgm_exporter_urls.values())
    namespace = create_namespace(kubesim_private)
    run_on_gpu(kubesim_private, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "0.4"])
    kubesim_private.admin(
        "POST", "/_kubesim/dcgm/xid", {"node": "gpu-node-2", "device": "gpu-1", "xid": 48}
    )

    def busy() -> list:
        devices = utilisation.devices_usage()
        assert not isinstance(devices, str)
        return [key for key, device in devices.items() if device.activity > 0]

    (key,) = wait_until(busy, timeout=30)
    devices = utilisation.devices_usage()
    assert not isinstance(devices, str) and len(devices) == 8
    assert key[0] == "gpu-node-1" and devices[key].claims == {(namespace, "train")}
    assert devices[key].activity == pytest.approx(0.4)
    assert devices[("gpu-node-2", "gpu-1")].xid == 48
    assert devices[("gpu-node-2", "gpu-0")].activity == 0


def test_it_gives_the_map_the_reason_when_prometheus_is_down(settings) -> None:
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    assert "Prometheus is unreachable" in str(utilisation.devices_usage())
