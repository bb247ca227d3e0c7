"""deploy/Containerfile (#8), checked statically: no container engine runs on the test machine,
so the build itself cannot run here. The file must be a multi-stage cargo build whose runtime
stage is a slim base, runs as the non-root uid the Kubernetes manifests expect, ships the
config the manifests mount over, and starts the way the StatefulSet's args assume."""
import json
import re
import tomllib

import yaml

from . import opslib

CONTAINERFILE = opslib.ROOT / "deploy" / "Containerfile"


def instructions():
    text = CONTAINERFILE.read_text()
    text = re.sub(r"\\\n", " ", text)  # line continuations
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def stages():
    result, current = [], None
    for op, rest in instructions():
        if op == "FROM":
            current = {"from": rest, "ops": []}
            result.append(current)
        elif current is not None:
            current["ops"].append((op, rest))
    return result


def test_multi_stage_cargo_build_then_slim_runtime():
    build, runtime = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    assert re.match(r"\S*rust:", build["from"]) and " AS build" in build["from"]
    runs = " ".join(r for op, r in build["ops"] if op == "RUN")
    assert "cargo build --release --locked --bin kactor" in runs
    assert (opslib.ROOT / "Cargo.lock").exists()
    assert "slim" in runtime["from"] or "distroless" in runtime["from"]
    copies = [r for op, r in runtime["ops"] if op == "COPY"]
    assert any(c.startswith("--from=build ") and c.endswith("/usr/local/bin/kactor")
               for c in copies)
    # Every file copied from the build context exists.
    for c in copies:
        if not c.startswith("--from"):
            src = c.split()[0]
            assert (opslib.ROOT / src).exists(), src


def test_runtime_is_non_root_and_matches_the_statefulset():
    runtime = stages()[-1]
    [user] = [r for op, r in runtime["ops"] if op == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric non-root uid (runAsNonRoot can verify it)"
    sts = yaml.safe_load((opslib.KUSTOMIZE / "base" / "statefulset.yaml").read_text())
    pod = sts["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    [c] = pod["containers"]
    [entry] = [r for op, r in runtime["ops"] if op == "ENTRYPOINT"]
    [cmd] = [r for op, r in runtime["ops"] if op == "CMD"]
    assert json.loads(entry) == ["/usr/local/bin/kactor"]
    # The image's default command is the one the StatefulSet spells out.
    assert json.loads(cmd) == c["args"]
    exposed = {int(p) for op, r in runtime["ops"] if op == "EXPOSE" for p in r.split()}
    assert exposed == {p["containerPort"] for p in c["ports"]}
    [stopsignal] = [r for op, r in runtime["ops"] if op == "STOPSIGNAL"]
    assert stopsignal == "SIGTERM"
    # The baked-in config is the one the manifests mount (same file, same path).
    assert any(r == "deploy/kubernetes/base/server.properties /etc/kactor/server.properties"
               for op, r in runtime["ops"] if op == "COPY")


def test_image_tag_is_the_crate_version():
    version = tomllib.loads((opslib.ROOT / "Cargo.toml").read_text())["workspace"]["package"][
        "version"]
    k = yaml.safe_load((opslib.KUSTOMIZE / "base" / "kustomization.yaml").read_text())
    [img] = k["images"]
    assert img["name"] == "kactor" and img["newTag"] == version
    assert f"kactor:{version}" in CONTAINERFILE.read_text()


def test_build_context_ignores_build_outputs():
    ignore = (opslib.ROOT / "deploy" / "Containerfile.dockerignore").read_text().split()
    for p in ["target", ".git", ".venv", ".cache"]:
        assert p in ignore
