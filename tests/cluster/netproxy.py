"""A TCP proxy between a client under test and the API server, to cut the network.

Real network faults, not a fake API: the client talks TLS to the real API
server through this proxy, and a test can

- ``partition("refuse")``: drop every open connection and close new ones at once
  (an API server restart or a firewall reset);
- ``partition("blackhole")``: keep connections open but forward nothing (a dead
  peer: only client timeouts notice);
- ``heal()``: forward again, optionally to another upstream (``set_upstream``:
  a load balancer failing over to another API server);
- ``drop_next_reply()``: forward the next request, but close its connection
  when the server starts to answer (the request took effect; the client never
  hears of it);
- ``delay``: seconds each chunk from the client waits before it is forwarded (a
  busy API server's latency; a connection carries one request at a time, so
  the delay holds that connection only).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time


class TCPProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.mode = "forward"
        self.delay = 0.0
        self.accepted = 0
        self.refused = 0
        self.dropped_replies = 0
        self._drop_reply = False
        self._lock = threading.Lock()
        self._conns: list[tuple[socket.socket, socket.socket | None]] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept_loop, name="tcpproxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def set_upstream(self, port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (host, port)

    def partition(self, mode: str = "refuse") -> None:
        if mode not in ("refuse", "blackhole"):
            raise ValueError(mode)
        with self._lock:
            self.mode = mode
            conns = list(self._conns) if mode == "refuse" else []
        for c in conns:
            self._drop(c)

    def drop_next_reply(self) -> None:
        with self._lock:
            self._drop_reply = True

    def heal(self) -> None:
        with self._lock:
            self.mode = "forward"
            conns = list(self._conns)
        # Connections held during a blackhole are stale for the client anyway.
        for c in conns:
            self._drop(c)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            self._drop(c)

    def _drop(self, pair: tuple[socket.socket, socket.socket | None]) -> None:
        for s in pair:
            if s is None:
                continue
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        with self._lock:
            if pair in self._conns:
                self._conns.remove(pair)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            with self._lock:
                mode = self.mode
            if mode == "refuse":
                with contextlib.suppress(OSError):
                    client.close()
                with self._lock:
                    self.refused += 1
                continue
            upstream = None
            if mode == "forward":
                try:
                    upstream = socket.create_connection(self.upstream, timeout=5)
                except OSError:
                    client.close()
                    continue
            pair = (client, upstream)
            with self._lock:
                self._conns.append(pair)
            threading.Thread(target=self._pump, args=(pair,), name="tcpproxy-pump", daemon=True).start()

    def _take_drop_reply(self) -> bool:
        with self._lock:
            if not self._drop_reply:
                return False
            self._drop_reply = False
            self.dropped_replies += 1
            return True

    def _pump(self, pair: tuple[socket.socket, socket.socket | None]) -> None:
        client, upstream = pair
        sel = selectors.DefaultSelector()
        try:
            sel.register(client, selectors.EVENT_READ, upstream)
            if upstream is not None:
                sel.register(upstream, selectors.EVENT_READ, client)
            while not self._closed.is_set():
                with self._lock:
                    if pair not in self._conns:
                        return
                    forwarding = self.mode == "forward" and upstream is not None
                for key, _ in sel.select(timeout=0.2):
                    src: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = src.recv(65536)
                    if not data:
                        return
                    if src is upstream and self._take_drop_reply():
                        return  # the finally drops both sides
                    if forwarding:
                        if src is client and self.delay > 0:
                            time.sleep(self.delay)
                        key.data.sendall(data)
                    # else: blackhole, swallow it
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            self._drop(pair)
