"""Client drivers in other languages (the Go programs under tests/clients/franz and
tests/clients/sarama): built once per source version into .cache/<name>/, run one scenario per
call, one JSON object back."""
import hashlib
import json
import os
import shutil
import subprocess

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


def run_driver(driver, scenario, broker, timeout, log, flags, stderr_tail=None):
    """Runs one scenario and returns its JSON. `flags` map to --name value (underscores become
    dashes; True becomes a bare --name, False --name=false: Go's flag package reads a bool
    flag's value only after '='). `log` is the driver's --log level."""
    cmd = [str(driver), scenario, "--bootstrap", broker.bootstrap,
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
