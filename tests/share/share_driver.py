"""Share-group consumers (KIP-932) as processes: tests/share/ShareDriver.java, Apache Kafka
4.4.0's KafkaShareConsumer, compiled once per session and run one JVM per consumer. Each
process prints one JSON event per line (see the Java file's header); `ShareConsumerProc` reads
them on a thread so a test can run several consumers at once, wait on what they report and
kill them."""
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from harness.broker import KAFKA_LIBS, java_cmd

SOURCE = Path(__file__).resolve().parent / "ShareDriver.java"


def compile_driver(out_dir):
    """javac ShareDriver.java against the 4.4.0 jars into `out_dir`; returns `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["javac", "-Xlint:all", "-Werror", "-d", str(out_dir),
                          "-cp", f"{KAFKA_LIBS}/*", str(SOURCE)],
                         capture_output=True, text=True, timeout=180)
    if res.returncode != 0:
        raise RuntimeError(f"javac ShareDriver.java failed:\n{res.stdout}{res.stderr}")
    return out_dir


class ShareConsumerProc:
    """One ShareDriver process. `events` grows as the process reports; lines that are not JSON
    (there should be none: the tools' log4j config sends logging to stderr) are kept as
    {"event": "raw", "line": ...}."""

    def __init__(self, classes_dir, workdir, name, args):
        self.name = name
        self.args = dict(args)
        self.workdir = Path(workdir)
        self.stop_file = self.workdir / f"{name}.stop"
        self.stop_file.unlink(missing_ok=True)
        self.args.setdefault("stop_file", str(self.stop_file))
        self.args.setdefault("client_id", name)
        cmd = java_cmd("ShareDriver", ["consume", json.dumps(self.args)], heap="256m")
        cp = cmd.index("-cp")
        cmd[cp + 1] = f"{classes_dir}{os.pathsep}{cmd[cp + 1]}"
        self.stderr_path = self.workdir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "w")
        self.events = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "raw", "line": line}
            ev["consumer"] = self.name
            with self._cond:
                self.events.append(ev)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "eof", "consumer": self.name})
            self._cond.notify_all()

    # ---- views -------------------------------------------------------------------------
    def of(self, kind):
        with self._cond:
            return [e for e in self.events if e["event"] == kind]

    def records(self):
        return self.of("record")

    def errors(self):
        return self.of("error") + self.of("raw")

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    # ---- waiting -----------------------------------------------------------------------
    def wait_for(self, predicate, timeout, what="condition"):
        """Waits until predicate(self) is true; fails with what the process reported if it
        isn't within `timeout` s or the process ends first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(self):
                    return
                left = deadline - time.monotonic()
                if left <= 0 or any(e["event"] == "eof" for e in self.events):
                    break
                self._cond.wait(min(left, 0.5))
        raise AssertionError(f"{self.name}: {what} not reached in {timeout}s; events:\n"
                             f"{self.describe()}\nstderr tail:\n{self.stderr()[-3000:]}")

    def describe(self):
        with self._cond:
            return "\n".join(json.dumps(e) for e in self.events[-60:])

    # ---- ending ------------------------------------------------------------------------
    def stop(self, timeout=60):
        """Asks the process to close() and exit (the stop file); returns its exit code."""
        self.stop_file.touch()
        return self.wait_exit(timeout)

    def wait_exit(self, timeout=60):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not exit within {timeout}s; events:\n"
                                 f"{self.describe()}\nstderr tail:\n{self.stderr()[-3000:]}")
        self._reader.join(10)
        self._stderr.close()
        return self.proc.returncode

    def kill(self):
        """SIGKILL: the consumer vanishes with whatever it had acquired."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._reader.join(10)
        self._stderr.close()

    def alive(self):
        return self.proc.poll() is None
