"""A loopback TCP proxy that can cut connections mid-flight, for idempotence/retry tests (#6):
clients bootstrap through the proxy, and `cut_after_bytes` drops each client connection once it
has forwarded that many client→broker bytes (both directions closed abruptly).

Note: the broker advertises its own address in Metadata, so clients that follow metadata reach
the broker directly after bootstrap unless the broker's advertised.listeners names the proxy —
start the broker with `advertised.listeners` overridden to the proxy's port for that."""
import socket
import threading


class CuttingProxy:
    def __init__(self, upstream_port, cut_after_bytes=None, host="127.0.0.1", port=0):
        self.upstream = (host, upstream_port)
        self.cut_after_bytes = cut_after_bytes
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.cuts = 0
        self.connections = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        self.listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.connections += 1
            state = {"sent": 0, "closed": False}
            threading.Thread(target=self._pump, args=(client, server, state, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, state, False), daemon=True).start()

    def _close(self, a, b, state):
        if not state["closed"]:
            state["closed"] = True
            for s in (a, b):
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.close()
                except OSError:
                    pass

    def _pump(self, src, dst, state, upstream_bound):
        try:
            while not self._stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if upstream_bound and self.cut_after_bytes is not None:
                    room = self.cut_after_bytes - state["sent"]
                    if room <= len(data):
                        dst.sendall(data[:max(room, 0)])
                        with self._lock:
                            self.cuts += 1
                        break
                    state["sent"] += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src, dst, state)

    def close(self):
        self._stop.set()
        self.listener.close()
        self._thread.join(2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
