"""The test doubles' HTTP server (the fake Hub, the fake AivisHub, the Supervisor double): a test
must not leave threads behind, so stopping it waits for every request's thread. ``FileHandler``:
what the file servers share (JSON answers, Range requests, a connection cut mid-file);
``ServedDouble``: a fake served on a thread of its own while a ``with`` block runs."""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

_RANGE = re.compile(r"^bytes=(\d+)-$")


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


class ServedDouble:
    """Serves ``handler`` on a free port of ``host`` ("0.0.0.0" where a container on Docker's
    bridge must reach it too) from ``start`` to ``stop``."""

    def __init__(self, host: str, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ClosingHTTPServer((host, 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, close kept-alive connections and wait for every handler thread."""
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()  # joins the handler threads
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class FileHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler for servers that send files and JSON."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle + delayed ACK add 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def send_json(
        self, payload: Any, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def range_start(self) -> int:
        """Where a ``Range: bytes=N-`` request starts (0 without one)."""
        match = _RANGE.match(self.headers.get("Range") or "")
        return int(match[1]) if match else 0

    def reset_connection(self) -> None:
        """Let the client read what was sent, then drop the link with a TCP reset (no clean end)."""
        time.sleep(0.2)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True
        self.wfile = io.BytesIO()  # the server still flushes and closes it
