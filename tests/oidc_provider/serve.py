"""Serve the test provider: `python -m tests.oidc_provider.serve <port>` (loopback only)."""

import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIServer, make_server

from django.core.wsgi import get_wsgi_application


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


if __name__ == "__main__":
    port = int(sys.argv[1])
    server = make_server("127.0.0.1", port, get_wsgi_application(), server_class=ThreadingServer)
    print(f"serving on {port}", flush=True)
    server.serve_forever()
