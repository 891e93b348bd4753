"""`python -m kubesim serve ...`: run kubesim until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import kubesim


def _versions(text: str) -> tuple[str, ...]:
    versions = tuple(v.strip() for v in text.split(",") if v.strip())
    unknown = [v for v in versions if v not in ("v1", "v1beta2", "v1beta1", "v1alpha3")]
    if not versions or unknown:
        raise argparse.ArgumentTypeError("choose from v1, v1beta2, v1beta1, v1alpha3")
    return versions


def _codes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(code) for code in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("a comma-separated list of HTTP codes") from None


def _boolean(text: str) -> bool:
    """A Go flag's boolean: true/false, 1/0, t/f in any case."""
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0", "t", "f"):
        raise argparse.ArgumentTypeError("true or false")
    return value in ("true", "1", "t")


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="python -m kubesim")
    commands = main.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the simulated cluster")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=6443)
    serve.add_argument("--kubeconfig", default="kubesim.kubeconfig")
    serve.add_argument("--topology", default=None, help="YAML topology (docs/kubesim-topology.md)")
    serve.add_argument("--speed", type=float, default=1.0)
    serve.add_argument("--served-versions", type=_versions, default=("v1", "v1beta2", "v1beta1"))
    serve.add_argument("--k8s-version", default="1.34.1")
    serve.add_argument("--state", default=None, help="JSON file keeping the cluster")
    serve.add_argument("--token", default=None)
    serve.add_argument(
        "--token-auth-file", default=None, help='CSV of token,user,uid,"group1,group2"'
    )
    serve.add_argument("--latency-ms", type=float, default=0)
    serve.add_argument("--error-rate", type=float, default=0.0)
    serve.add_argument("--error-codes", type=_codes, default=(500,))
    serve.add_argument(
        "--no-kubelet",
        dest="kubelet",
        action="store_false",
        help="no simulated kubelet: Pods are scheduled but never start",
    )
    serve.add_argument(
        "--anonymous-auth",
        type=_boolean,
        default=True,
        help="true (the default, as upstream): a request without a token is system:anonymous",
    )
    serve.add_argument(
        "--dcgm-port", type=int, default=0, help="the nodes' dcgm-exporters (0 = any free port)"
    )
    serve.add_argument(
        "--dcgm-urls-file",
        default=None,
        help="write each node's dcgm-exporter URL there, one a line, once serving",
    )
    serve.add_argument("-v", "--verbose", action="store_true")
    return main


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # Whoever waits for the kubeconfig must never find the one of an earlier run.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(args.kubeconfig)
    handle = kubesim.start(
        host=args.host,
        port=args.port,
        kubeconfig=args.kubeconfig,
        topology=args.topology,
        speed=args.speed,
        served_versions=args.served_versions,
        k8s_version=args.k8s_version,
        state=args.state,
        token=args.token,
        token_auth_file=args.token_auth_file,
        anonymous_auth=args.anonymous_auth,
        latency_ms=args.latency_ms,
        error_rate=args.error_rate,
        error_codes=args.error_codes,
        kubelet=args.kubelet,
        dcgm_port=args.dcgm_port,
    )
    if args.dcgm_urls_file:
        urls = "".join(f"{url}\n" for url in handle.dcgm_exporter_urls.values())
        partial = Path(args.dcgm_urls_file + ".partial")
        partial.write_text(urls)
        partial.replace(args.dcgm_urls_file)  # whoever waits for it never reads half
    print(f"kubesim serving {handle.url}; kubeconfig: {handle.kubeconfig}", flush=True)
    print(
        f"dcgm-exporters: {handle.dcgm.url if handle.dcgm else '-'}/nodes/<node>/metrics",
        flush=True,
    )
    print(f"try: KUBECONFIG={handle.kubeconfig} kubectl get nodes", flush=True)
    while not stop.wait(0.5):
        pass
    handle.stop()
    print("kubesim stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
