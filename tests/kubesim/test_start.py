"""Starting and stopping kubesim: `kubesim.start()`, the CLI, SIGTERM, `--state`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest
from kubernetes import client, config

import kubesim
from tests.fixtures.kubesim import api_client, raw_request

ROOT = Path(__file__).resolve().parents[2]


def start_cli(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    kubeconfig = tmp_path / "kubeconfig"
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    return kubesim.spawn(kubeconfig, *args, timeout=20, cwd=ROOT, **output), kubeconfig


def stop_cli(process: subprocess.Popen, how: int = signal.SIGTERM) -> str:
    process.send_signal(how)
    output, _ = process.communicate(timeout=10)
    assert process.returncode == 0, output
    return output


def test_the_cli_answers_as_soon_as_the_kubeconfig_exists_and_stops_on_sigterm(tmp_path):
    process, kubeconfig = start_cli(
        tmp_path, "--served-versions", "v1beta1", "--k8s-version", "1.33.5"
    )
    try:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        assert client.VersionApi(api).get_code().git_version == "v1.33.5"
        groups = client.ApisApi(api).get_api_versions().groups
        resource = next(group for group in groups if group.name == "resource.k8s.io")
        assert [v.version for v in resource.versions] == ["v1beta1"]
    finally:
        output = stop_cli(process)
    assert "kubesim stopped" in output


def test_the_cli_keeps_the_cluster_in_a_state_file_across_restarts(tmp_path):
    state = str(tmp_path / "state.json")
    process, kubeconfig = start_cli(tmp_path, "--state", state)
    try:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "kept"}})
    finally:
        stop_cli(process)
    process, kubeconfig = start_cli(tmp_path, "--state", state)
    try:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
        assert "kept" in names
    finally:
        stop_cli(process)


def test_it_starts_in_well_under_a_second():
    started = time.monotonic()
    handle = kubesim.start()
    try:
        assert time.monotonic() - started < 1.0
        assert raw_request(handle, "GET", "/version").status == 200
    finally:
        handle.stop()


def test_a_stopped_server_answers_nothing_even_on_kept_alive_connections():
    handle = kubesim.start()
    core = client.CoreV1Api(api_client(handle))
    core.api_client.configuration.retries = False
    assert core.list_namespace().items
    handle.stop()
    with pytest.raises(Exception) as caught:
        core.list_namespace(_request_timeout=2)
    assert not isinstance(caught.value, client.ApiException)


def test_the_cli_injects_faults_from_flags_and_stops_on_ctrl_c(tmp_path):
    process, kubeconfig = start_cli(
        tmp_path, "--latency-ms", "150", "--error-rate", "1", "--error-codes", "503"
    )
    api = config.new_client_from_config(config_file=str(kubeconfig))
    started = time.monotonic()
    with pytest.raises(client.ApiException) as caught:
        client.CoreV1Api(api).list_namespace()
    assert caught.value.status == 503
    assert time.monotonic() - started >= 0.15
    assert "kubesim stopped" in stop_cli(process, signal.SIGINT)


def test_the_cli_refuses_an_unknown_served_version():
    result = subprocess.run(
        [sys.executable, "-m", "kubesim", "serve", "--served-versions", "v2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert result.returncode == 2
    assert "choose from v1, v1beta2, v1beta1" in result.stderr


def test_the_handle_calls_any_path_and_raises_on_api_errors(kubesim_cluster):
    assert kubesim_cluster.admin("GET", "/_kubesim/healthz") == {"ok": True}
    listed = kubesim_cluster.admin("GET", "/api/v1/namespaces")
    assert listed["kind"] == "NamespaceList"
    with pytest.raises(urllib.error.HTTPError) as caught:
        kubesim_cluster.admin("GET", "/api/v1/namespaces/nope")
    assert caught.value.code == 404


def test_spawn_says_why_kubesim_did_not_start(tmp_path):
    with pytest.raises(RuntimeError, match="invalid float value"):
        start_cli(tmp_path, "--speed", "fast")
