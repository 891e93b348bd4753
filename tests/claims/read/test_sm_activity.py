"""DCGM_FI_PROF_SM_ACTIVE: kubesim publishes it when its topology's counters enable it (as an
operator's counters CSV does; dcgm-exporter's default-counters.csv has it commented out), and
the portal reads it where a GPU publishes no DCGM_FI_PROF_GR_ENGINE_ACTIVE, preferring the
latter where both are there. A real Prometheus scrapes a kubesim whose exporters publish
SM_ACTIVE and not GR_ENGINE_ACTIVE."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from prometheus_client.parser import text_string_to_metric_families

import kubesim
from claims.kube.gpu_metrics import Sample
from claims.read import utilisation
from kubesim.cluster.topology import TopologyError, from_dict
from kubesim.kubelet.gpu_metrics import DEFAULT_COUNTERS
from tests.claims.read.test_utilisation import LONG_RUN, claim_row
from tests.fixtures.kubesim import QUIET_TOPOLOGY, create_namespace, wait_until
from tests.fixtures.prometheus import PrometheusServer, start_prometheus
from tests.kubesim.test_dcgm_exporter import TRAIN_IMAGE, run_on_gpu, scrape

SM = "DCGM_FI_PROF_SM_ACTIVE"
GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


def topology_with(counters: list[str]) -> str:
    data = yaml.safe_load(Path(QUIET_TOPOLOGY).read_text()) | {"dcgmCounters": counters}
    path = Path(tempfile.mkdtemp(prefix="kubesim-sm-")) / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.fixture(scope="module")
def sm_only() -> Iterator[tuple[kubesim.Handle, PrometheusServer]]:
    counters = [field for field in DEFAULT_COUNTERS if field != GR] + [SM]
    handle = kubesim.start(speed=20, topology=topology_with(counters))
    directory = Path(tempfile.mkdtemp(prefix="prometheus-"))
    server = start_prometheus(handle.dcgm_exporter_urls, directory)
    yield handle, server
    server.stop()
    handle.stop()
    shutil.rmtree(directory, ignore_errors=True)


def names(text: str) -> list[str]:
    return [family.name for family in text_string_to_metric_families(text)]


def test_kubesim_publishes_sm_active_only_when_its_counters_enable_it(
    kubesim_private, sm_only
) -> None:
    default = scrape(kubesim_private)
    assert SM not in names(default) and GR in names(default)
    text = scrape(sm_only[0])
    assert SM in names(text) and GR not in names(text)
    assert f"# HELP {SM} The ratio of cycles an SM has at least 1 warp assigned.\n" in text
    assert f"# TYPE {SM} gauge\n" in text


@pytest.mark.parametrize("counters", [[], "all", ["DCGM_FI_DEV_NO_SUCH_FIELD"]])
def test_a_topology_names_only_counters_kubesim_fills(counters: object) -> None:
    data = yaml.safe_load(Path(QUIET_TOPOLOGY).read_text()) | {"dcgmCounters": counters}
    with pytest.raises(TopologyError, match="dcgmCounters"):
        from_dict(data)


def test_the_portal_reads_sm_active_where_gr_engine_active_is_missing(
    sm_only, alice: User, settings
) -> None:
    handle, prometheus = sm_only
    settings.PROMETHEUS_URL, settings.UTILISATION_CACHE_SECONDS = prometheus.url, 0
    namespace = create_namespace(handle)
    run_on_gpu(handle, namespace, "train", TRAIN_IMAGE, [*LONG_RUN, "--load", "0.6"])
    claim = claim_row(alice, namespace, "train")
    usage = wait_until(
        lambda: (u := utilisation.claim_usage(claim)).activity and u.has_history and u, timeout=60
    )
    assert usage.no_data == "" and usage.gpus == 1
    assert usage.activity == pytest.approx(0.54)  # kubesim: SM activity is 0.9 of the engine's
    assert max(value for _, value in usage.points) == pytest.approx(0.54)
    devices = utilisation.devices_usage()
    assert not isinstance(devices, str)
    busy = [device for device in devices.values() if device.activity]
    assert [device.measured_by for device in busy] == [SM]
    check = utilisation.utilisation_check()
    assert check.ok and check.message.startswith("8 GPU series")


def test_gr_engine_active_wins_where_both_are_published() -> None:
    labels = {"UUID": "GPU-1", "gpu": "0", "hostname": "n"}
    usage = utilisation._current(
        [
            Sample(SM, labels, 0.2),
            Sample(GR, labels, 0.5),
            Sample(SM, labels | {"UUID": "G2"}, 0.1),
        ],
        "exporters",
    )
    assert usage.gpus == 2 and usage.activity == pytest.approx((0.5 + 0.1) / 2)
