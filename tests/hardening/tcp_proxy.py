"""A loopback TCP forwarder that tests can cut and restore, to make a real database vanish for a moment."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class TcpProxy:
    """Listens on 127.0.0.1:<port> and forwards to `upstream`. `cut()` refuses new connections and
    drops open ones (like a database restart); `restore()` listens again on the same port."""

    def __init__(self, *, upstream_host: str, upstream_port: int, truncate_after: int | None = None) -> None:
        self._upstream = (upstream_host, upstream_port)
        # Drop a connection mid-response once it has carried this many bytes back (truncated answers).
        self._truncate_after = truncate_after
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.restore()

    def restore(self) -> None:
        """Accept connections again (on the same port after a cut)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.2)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Close the listener and every forwarded connection: the database is gone."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = set(self._open), set()
        if listener is not None:
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def close(self) -> None:
        """Stop for good."""
        self.cut()

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            with self._lock:
                if self._listener is not listener:
                    return
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        client.settimeout(None)
        server.settimeout(None)
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ, server)
        selector.register(server, selectors.EVENT_READ, client)
        returned = 0
        try:
            while True:
                for key, _ in selector.select(timeout=1.0):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    if key.fileobj is server and self._truncate_after is not None:
                        room = self._truncate_after - returned
                        returned += len(data)
                        if len(data) > room:
                            key.data.sendall(data[: max(room, 0)])
                            return  # cut mid-response: the client sees a truncated body
                    key.data.sendall(data)
                with self._lock:
                    if client not in self._open:
                        return
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            for sock in (client, server):
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._open.discard(client)
                self._open.discard(server)
