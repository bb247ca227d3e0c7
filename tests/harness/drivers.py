"""Client drivers in other languages (the Go programs under tests/clients/franz and
tests/clients/sarama): built once per source version into .cache/<name>/, run one scenario per
call, one JSON object back."""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

from harness.broker import ROOT


def _source_hash(src):
    h = hashlib.sha256()
    files = [src / "go.mod", src / "go.sum"] + sorted(src.glob("*.go"))
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_go_driver(name, src, what):
    """The `name` binary built from the Go module in `src`, rebuilt only when its sources
    change; a missing toolchain or a failed build fails the calling test (never a skip: a suite
    that ran nothing proves nothing). `what` names the suite in those messages."""
    cache = ROOT / ".cache" / name.removesuffix("-driver")
    out = cache / f"{name}-{_source_hash(src)}"
    if out.exists():
        return out
    go = shutil.which("go")
    if go is None:
        pytest.fail(f"the {what} suite needs the Go toolchain (go 1.26+) on PATH")
    cache.mkdir(parents=True, exist_ok=True)
    # Build beside the final name and rename: a concurrent session never runs a half-written
    # binary.
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    env = dict(os.environ, CGO_ENABLED="0")
    build = subprocess.run([go, "build", "-trimpath", "-o", str(tmp), "."], cwd=src,
                           env=env, capture_output=True, text=True, timeout=900)
    if build.returncode != 0:
        pytest.fail(f"go build of the {what} driver failed:\n{build.stdout}{build.stderr}")
    os.replace(tmp, out)
    # Builds of older sources are never used again.
    for stale in cache.glob(f"{name}-*"):
        if stale != out and ".tmp" not in stale.name:
            stale.unlink(missing_ok=True)
    return out


def run_driver(driver, scenario, broker, timeout, log, flags, stderr_tail=None, bootstrap=None):
    """Runs one scenario and returns its JSON. `flags` map to --name value (underscores become
    dashes; True becomes a bare --name, False --name=false: Go's flag package reads a bool
    flag's value only after '='). `log` is the driver's --log level. `bootstrap` replaces
    broker.bootstrap (another listener of the broker)."""
    cmd = [str(driver), scenario, "--bootstrap", bootstrap or broker.bootstrap,
           "--timeout", f"{timeout}s", "--log", log]
    for k, v in flags.items():
        name = "--" + k.replace("_", "-")
        if v is True:
            cmd.append(name)
        elif v is False:
            cmd.append(name + "=false")
        elif v is not None:
            cmd += [name, str(v)]
    # The driver bounds itself (deadline + watchdog); this is the last resort.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)
    if proc.stderr:
        print(proc.stderr[-stderr_tail:] if stderr_tail else proc.stderr)  # shown on failure
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{scenario}: no output (exit {proc.returncode}); stderr:\n{proc.stderr[-3000:]}"
    result = json.loads(lines[-1])
    assert "error" not in result, f"{scenario} failed: {result}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0
    return result


def _npm_ci(src, dest):
    """npm ci into a scratch dir, then rename into place: a half-done install is never `dest`."""
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(src / name, tmp / name)
    env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false",
               npm_config_audit="false")
    out = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
                         cwd=tmp, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"npm ci failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def install_kafkajs(src, version):
    """node_modules for the kafkajs driver in `src` (tests/clients/kafkajs), installed with
    `npm ci` into .cache/kafkajs/<hash of package.json + package-lock.json>/ once per lockfile
    (shared across sessions), never in the source tree. Fails the calling test without node/npm
    or when the installed kafkajs is not `version`."""
    cache = ROOT / ".cache" / "kafkajs"
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not on PATH: the kafkajs suite needs Node.js (>= 14) and npm")
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((src / name).read_bytes())
    dest = cache / digest.hexdigest()[:16]
    marker = dest / ".installed"
    cache.mkdir(parents=True, exist_ok=True)
    if not marker.exists():
        # Concurrent sessions (a kactor run and a Kafka run) share the cache: one installs.
        with open(cache / f"{dest.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.exists():
                _npm_ci(src, dest)
                marker.write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
    modules = dest / "node_modules"
    installed = json.loads((modules / "kafkajs" / "package.json").read_text())["version"]
    assert installed == version, f"{modules} holds kafkajs {installed}"
    return modules
