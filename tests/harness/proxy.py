"""A loopback TCP proxy that can cut connections mid-flight, for idempotence/retry tests (#6):
clients bootstrap through the proxy, and `cut_after_bytes` drops each client connection once it
has forwarded that many client→broker bytes (both directions closed abruptly).

Note: the broker advertises its own address in Metadata, so clients that follow metadata reach
the broker directly after bootstrap unless the broker's advertised.listeners names the proxy —
start the broker with `advertised.listeners` overridden to the proxy's port for that."""
import socket
import struct
import threading
import time

from . import schema_codec


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
                number = self.connections
            state = {"sent": 0, "closed": False, "conn": number, "pending": {}}
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
                self._observe(state, data, upstream_bound)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src, dst, state)

    def _observe(self, state, data, upstream_bound):
        """Sees every forwarded chunk (a subclass reads the traffic)."""

    def close(self):
        self._stop.set()
        self.listener.close()
        self._thread.join(2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


FETCH = 1


class FetchSpy(CuttingProxy):
    """A proxy that forwards everything and decodes the Fetch requests passing through it,
    with their responses (`schemas/`), for tests about what followers send: each entry of
    `fetches` is a dict with `conn` (connection number), `at` (monotonic time of the answer),
    `replica` (the fetching replica id, -1 for consumers), `session_id`, `epoch`, `listed`
    (partitions named), `forgotten` ([(topic id or name, partition)]), `error` (top-level),
    `answered` (partitions in the response) and `request_bytes` / `response_bytes` (frames,
    size prefix included)."""

    def __init__(self, upstream_port, host="127.0.0.1"):
        self.schemas = schema_codec.Schemas.from_dir()
        self.fetches = []
        super().__init__(upstream_port, host=host)

    def _observe(self, state, data, upstream_bound):
        key = "up" if upstream_bound else "down"
        buf = state.setdefault(key, bytearray())
        buf += data
        while len(buf) >= 4:
            size = struct.unpack(">i", buf[:4])[0]
            if len(buf) < 4 + size:
                break
            payload = bytes(buf[4:4 + size])
            del buf[:4 + size]
            try:
                if upstream_bound:
                    self._request(state, payload)
                else:
                    self._response(state, payload)
            except schema_codec.CodecError:
                pass

    def _request(self, state, payload):
        api_key, version, corr = struct.unpack(">hhi", payload[:8])
        if api_key != FETCH:
            return
        _, _, _, _, body = schema_codec.decode_request(self.schemas, payload)
        replica = body.get("ReplicaId", -1)
        if (body.get("ReplicaState") or {}).get("ReplicaId", -1) >= 0:
            replica = body["ReplicaState"]["ReplicaId"]
        state["pending"][corr] = (version, {
            "conn": state["conn"], "replica": replica,
            "session_id": body.get("SessionId", 0), "epoch": body.get("SessionEpoch", -1),
            "listed": sum(len(t["Partitions"]) for t in body["Topics"]),
            "forgotten": [(f.get("TopicId") or f.get("Topic"), p)
                          for f in body.get("ForgottenTopicsData") or [] for p in f["Partitions"]],
            "request_bytes": 4 + len(payload),
        })

    def _response(self, state, payload):
        corr = struct.unpack(">i", payload[:4])[0]
        pending = state["pending"].pop(corr, None)
        if pending is None:
            return
        version, entry = pending
        _, body = schema_codec.decode_response(self.schemas, FETCH, version, payload)
        entry["error"] = body.get("ErrorCode", 0)
        entry["answered"] = sum(len(t["Partitions"]) for t in body["Responses"])
        entry["response_bytes"] = 4 + len(payload)
        entry["at"] = time.monotonic()
        with self._lock:
            self.fetches.append(entry)

    def replica_fetches(self, since=0.0):
        with self._lock:
            return [f for f in self.fetches if f["replica"] >= 0 and f["at"] >= since]
