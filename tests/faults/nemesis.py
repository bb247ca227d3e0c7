"""Nemeses against the one broker process a run starts (tests/harness/broker.py, kactor or
Kafka 4.4 from the jars), on a schedule drawn from random.Random(seed):

  kill       SIGKILL, a pause, start again on the same ports and data (a crash)
  pause      SIGSTOP for a few seconds, then SIGCONT (a GC pause, a stalled VM)
  disk-full  the file system of one of the two data log dirs (a small tmpfs the run mounts;
             we run as root) filled to the last byte; writes to partitions there fail, the
             broker takes the dir offline and keeps serving the other one; after a while the
             space is freed and the broker restarted, as an operator would

Each fault is an invoke/ok pair in the history (process "nemesis", f "fault") with what it
saw: whether the broker was still up after the disk filled, which partitions were in the
full dir, how long the restart took."""
import os
import signal
import subprocess
import time
from pathlib import Path

from .history import INFO, OK

FAULTS = ("kill", "pause", "disk-full")
WEIGHTS = {"kill": 4, "pause": 3, "disk-full": 2}


class SmallDisk:
    """A tmpfs of `size` mounted at `path` for the run (unmounted by `close`)."""

    def __init__(self, path, size="128m"):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                            str(self.path)], capture_output=True, text=True)
        self.mounted = r.returncode == 0
        self.error = r.stderr.strip()

    @property
    def filler(self):
        return self.path / "filler"

    def fill(self):
        """Takes every free byte (page-size remainders too); returns the bytes written."""
        written = 0
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 4096, 512):
                chunk = b"\0" * size
                try:
                    while True:
                        written += os.write(fd, chunk)
                except OSError:
                    pass
        finally:
            os.close(fd)
        return written

    def free(self):
        try:
            self.filler.unlink()
        except FileNotFoundError:
            pass

    def close(self):
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False


class Nemesis:
    """Injects one fault at a time into `broker`, recording each in `history`."""

    def __init__(self, broker, history, rng, disk=None, faults=FAULTS):
        self.broker = broker
        self.history = history
        self.rng = rng
        self.disk = disk
        self.faults = [f for f in faults if f != "disk-full" or (disk and disk.mounted)]
        self.counts = {f: 0 for f in self.faults}
        self.restart_seconds = []

    def pick(self):
        return self.rng.choices(self.faults, [WEIGHTS[f] for f in self.faults])[0]

    def _restart(self, details):
        t = time.monotonic()
        self.broker.start(timeout=180)
        self.restart_seconds.append(time.monotonic() - t)
        details["restart_s"] = round(time.monotonic() - t, 2)

    def inject(self, fault):
        rng = self.rng
        inv = self.history.invoke("nemesis", "fault", fault=fault)
        details = {}
        try:
            if fault == "kill":
                self.broker.kill9()
                down = rng.uniform(0.2, 3.0)
                details["down_s"] = round(down, 2)
                time.sleep(down)
                self._restart(details)
            elif fault == "pause":
                stopped = rng.uniform(1.0, 8.0)
                details["paused_s"] = round(stopped, 2)
                os.kill(self.broker.pid, signal.SIGSTOP)
                try:
                    time.sleep(stopped)
                finally:
                    os.kill(self.broker.pid, signal.SIGCONT)
            elif fault == "disk-full":
                full_for = rng.uniform(3.0, 12.0)
                details["full_s"] = round(full_for, 2)
                details["filled_bytes"] = self.disk.fill()
                details["partitions_in_full_dir"] = sorted(
                    d.name for d in (self.disk.path / "logs").glob("*-*") if d.is_dir()
                    and not d.name.startswith("__"))
                time.sleep(full_for)
                details["up_while_full"] = self.broker.is_running()
                if not details["up_while_full"]:
                    details["exit_code"] = self.broker.proc.returncode
                self.disk.free()
                # The failed dir stays offline until a restart (Kafka and kactor alike).
                details["stop_code"] = self.broker.stop(timeout=60)
                self._restart(details)
            self.counts[fault] += 1
            return self.history.complete(inv, OK, **details)
        except Exception as e:  # noqa: BLE001 - recorded, then healed by the caller
            return self.history.complete(inv, INFO, error=repr(e), **details)

    def heal(self):
        """Whatever the last fault left: space freed, process resumed or started again."""
        if self.disk is not None and self.disk.mounted:
            self.disk.free()
        if self.broker.is_running():
            try:
                os.kill(self.broker.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        else:
            self.broker.start(timeout=180)

    def run(self, seconds, stop=None):
        """Faults until `seconds` have passed: a quiet spell, a fault, the next quiet spell."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            time.sleep(min(self.rng.uniform(2.0, 6.0), max(0.0, deadline - time.monotonic())))
            if time.monotonic() >= deadline:
                break
            self.check_alive()
            op = self.inject(self.pick())
            if op["type"] != OK:
                self.heal()
        self.check_alive()
        self.heal()

    def check_alive(self):
        """A broker that died when no fault asked it to is recorded (an anomaly) and started."""
        if not self.broker.is_running() and self.broker.proc is not None:
            self.history.record("nemesis", INFO, "crash", exit_code=self.broker.proc.returncode,
                                log_tail=self.broker.log_tail(30))
            self.broker.start(timeout=180)
