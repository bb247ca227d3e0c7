"""A real Prometheus server (Debian's `prometheus` package) for the observability tests (#8):
scrapes the given targets every second on loopback and answers instant queries."""
import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from .broker import free_port


class Prometheus:
    def __init__(self, workdir, targets, rule_files=(), scrape_interval="1s"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config_path = self.workdir / "prometheus.yml"
        self.log_path = self.workdir / "prometheus.log"
        rules = "".join(f"  - {r}\n" for r in rule_files)
        self.config_path.write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            f"  evaluation_interval: {scrape_interval}\n"
            + (f"rule_files:\n{rules}" if rule_files else "")
            + "scrape_configs:\n"
            "  - job_name: kactor\n"
            "    static_configs:\n"
            f"      - targets: {json.dumps(list(targets))}\n")
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=30):
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.config_path}",
             f"--storage.tsdb.path={self.workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError("prometheus not ready")

    def query(self, promql):
        """Instant query; returns the `result` list of the vector."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.loads(r.read())
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def wait_for(self, promql, predicate=lambda result: bool(result), timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{promql}: {result}")
            time.sleep(0.5)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
