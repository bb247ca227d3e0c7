"""The history of one fault run: every client operation as an `invoke` followed by its outcome,
and every nemesis action, in the order they happened, saved as JSON lines.

An operation is a dict:
  index    position in the history (assigned on record)
  time     seconds since the history began (monotonic clock)
  process  who did it: "producer-0", "consumer-1", "copier-0", "nemesis", "reader"
  type     "invoke" (started), "ok" (definitely happened), "fail" (definitely did not happen),
           "info" (outcome unknown: it may or may not have taken effect)
  f        what: "send", "poll", "commit", "committed", "assign", "txn", "read", "fault", ...
and whatever the operation carries: topic, partition, offset, value, offsets, error, ...

As in Jepsen, an `info` outcome is not a failure: an idempotent produce whose delivery timed
out may still be in the log, so the checkers allow such a value to be there or not, but never
twice."""
import json
import threading
import time
from pathlib import Path

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


class History:
    """Thread-safe append-only list of operations."""

    def __init__(self, meta=None):
        self.meta = dict(meta or {})
        self.ops = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def now(self):
        return round(time.monotonic() - self._t0, 6)

    def record(self, process, type_, f, **fields):
        op = {"process": process, "type": type_, "f": f}
        op.update(fields)
        with self._lock:
            op["index"] = len(self.ops)
            op["time"] = self.now()
            self.ops.append(op)
        return op

    def invoke(self, process, f, **fields):
        return self.record(process, INVOKE, f, **fields)

    def complete(self, invoked, type_, **fields):
        """The outcome of `invoked`: its fields, overridden by `fields`."""
        base = {k: v for k, v in invoked.items() if k not in ("index", "time", "type")}
        base.update(fields)
        process, f = base.pop("process"), base.pop("f")
        return self.record(process, type_, f, invoke_index=invoked["index"], **base)

    def snapshot(self):
        with self._lock:
            return list(self.ops)

    def save(self, path):
        """JSON lines: a first line {"meta": ...}, then one operation per line."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            f.write(json.dumps({"meta": self.meta}) + "\n")
            for op in self.snapshot():
                f.write(json.dumps(op, sort_keys=True) + "\n")
        return path


def load(path):
    """(meta, ops) from a file written by `History.save`."""
    meta, ops = {}, []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if "meta" in d and "f" not in d:
                meta = d["meta"]
            else:
                ops.append(d)
    return meta, ops


def summary(ops):
    """Counts by f and outcome: {"send": {"ok": 10, "info": 1, ...}, ...}."""
    out = {}
    for op in ops:
        if op["type"] == INVOKE:
            continue
        out.setdefault(op["f"], {}).setdefault(op["type"], 0)
        out[op["f"]][op["type"]] += 1
    return out
