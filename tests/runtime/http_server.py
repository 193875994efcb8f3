"""The test doubles' HTTP server (the fake Hub, the Supervisor double): a test must not leave
threads behind, so stopping it waits for every request's thread."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ClosingHTTPServer(ThreadingHTTPServer):
    """Tracks open connections: clients keep them alive, and a client can read its answer while
    the request's thread is still closing the connection. ``close_connections`` then
    ``server_close`` end them all and join their threads."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.open.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.lock:
                self.open.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that went away (a test's pool closing): nothing to report
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.lock:
            for connection in self.open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
