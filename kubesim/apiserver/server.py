"""The HTTPS front: TLS, bearer token, body limits, chunked streams; routing lives in routes.py."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kubesim.base import errors
from kubesim.base.certs import Certificates
from kubesim.base.http import Request, Response, Stream, error_response, json_response

MAX_BODY = 3 * 1024 * 1024
MAX_DISCARD = 64 * 1024 * 1024
log = logging.getLogger("kubesim")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def _handle(self) -> None:
        try:
            self._send(self._respond())
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, TimeoutError):
            self.close_connection = True

    def _respond(self) -> Response | Stream:
        url = urlsplit(self.path)
        request = Request(self.command, url.path, dict(parse_qsl(url.query)), self.headers)
        if request.path == "/_kubesim/healthz":
            return json_response(200, {"ok": True})
        request.user = self.server.authenticate(self.headers.get("Authorization", ""))
        if request.user is None:
            self._discard_body()
            return error_response(errors.unauthorized())
        try:
            request.body = self._read_body()
            return self.server.router(request)
        except errors.ApiError as error:
            return error_response(error)
        except Exception as exc:  # a bad request must never stop the server
            log.exception("unexpected error on %s %s", self.command, self.path)
            return error_response(errors.internal(repr(exc)))

    def _content_length(self) -> int:
        try:
            return max(0, int(self.headers.get("Content-Length") or 0))
        except ValueError:
            raise errors.bad_request("invalid Content-Length") from None

    def _read_body(self) -> bytes:
        length = self._content_length()
        if length > MAX_BODY:
            self._discard_body()
            raise errors.too_large()
        return self.rfile.read(length) if length else b""

    def _discard_body(self) -> None:
        """Read and drop a body we will not use, so the client can read our answer."""
        header = self.headers.get("Content-Length", "0")
        remaining = min(int(header), MAX_DISCARD) if header.isdigit() else 0
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            if not chunk:
                break
            remaining -= len(chunk)
        if header.isdigit() and int(header) > MAX_DISCARD:
            self.close_connection = True

    def _send(self, response: Response | Stream) -> None:
        if isinstance(response, Stream):
            self._send_stream(response)
            return
        self.send_response(response.status)
        if response.content_type:  # a 204 of the log endpoint has none
            self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _send_stream(self, stream: Stream) -> None:
        self.send_response(200)
        self.send_header("Content-Type", stream.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in stream.headers:
            self.send_header(name, value)
        self.end_headers()
        try:
            for chunk in stream.chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        finally:
            close = getattr(stream.chunks, "close", None)
            if close:
                close()


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        router: Any,
        authenticate: Callable[[str], Any],
        certs: Certificates,
    ) -> None:
        """`authenticate(authorization_header)` -> the user, or None (401)."""
        self.router = router
        self.authenticate = authenticate
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, Handler)
        self.socket = _tls_context(certs).wrap_socket(
            self.socket, server_side=True, do_handshake_on_connect=False
        )

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        connection.settimeout(60)
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._open_lock:
            self._open.add(connection)
        return connection, address

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Close the listener and every kept-alive connection: a stopped server answers none."""
        super().server_close()
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake runs in the connection's own thread, so one slow or plain-HTTP
        # client never holds up the accept loop.
        try:
            request.do_handshake()
        except (OSError, ssl.SSLError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection error from %s", client_address, exc_info=True)


def _tls_context(certs: Certificates) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.NamedTemporaryFile("wb") as cert, tempfile.NamedTemporaryFile("wb") as key:
        cert.write(certs.cert_pem)
        key.write(certs.key_pem)
        cert.flush()
        key.flush()
        context.load_cert_chain(cert.name, key.name)
    context.set_alpn_protocols(["http/1.1"])
    return context


def serve_in_thread(server: ApiServer) -> threading.Thread:
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="kubesim-http", daemon=True
    )
    thread.start()
    return thread
