"""TLS and SASL listeners (issue #28) with the other client families of the suites: franz-go,
sarama and kafkajs, against kactor and Apache Kafka 4.4 with the same client configs. Each
produces N records and reads them back over SASL_SSL with SCRAM-SHA-512 and over SSL with a
client certificate (mTLS), and reports a wrong password as an authentication failure (the
broker's SASL_AUTHENTICATION_FAILED), quickly, not as a timeout.

The drivers are the ones of tests/clients (franz/, sarama/, kafkajs/driver.js) with their
security flags: --tls-ca (PEM CA; turns TLS on), --tls-cert/--tls-key (client certificate),
--sasl-mechanism, --sasl-user, --sasl-password. franz-go uses kgo.DialTLSConfig and its
sasl/scram package, sarama Net.TLS and Net.SASL with a SCRAM client over xdg-go/scram, kafkajs
its `ssl` and `sasl` options. One SecureBroker serves the module (conftest.py)."""
import base64
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harness.drivers import build_go_driver, install_kafkajs, run_driver
from harness.security import SCRAM_PASSWORD, SCRAM_USER

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
N = 120
WRONG = "not-alices-password"


@pytest.fixture(scope="module")
def drivers():
    """family -> run(scenario, bootstrap, timeout, **flags) -> the driver's JSON object."""
    franz = build_go_driver("franz-driver", CLIENTS / "franz", "franz-go")
    sarama = build_go_driver("sarama-driver", CLIENTS / "sarama", "sarama")
    modules = install_kafkajs(CLIENTS / "kafkajs", "2.2.4")

    def go(driver, log_env):
        def run(scenario, bootstrap, timeout=60, **flags):
            return run_driver(driver, scenario, None, timeout, os.environ.get(log_env, "none"),
                              flags, stderr_tail=20000, bootstrap=bootstrap)
        return run

    def kafkajs(scenario, bootstrap, timeout=60, **flags):
        cmd = ["node", str(CLIENTS / "kafkajs" / "driver.js"), scenario,
               "--bootstrap", bootstrap, "--deadline-ms", str(timeout * 1000)]
        for k, v in flags.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        env = dict(os.environ, NODE_PATH=str(modules), KAFKAJS_NO_PARTITIONER_WARNING="1")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=timeout + 30)
        print("\n".join(proc.stderr.splitlines()[-60:]))  # shown on failure
        lines = proc.stdout.strip().splitlines()
        assert lines, f"kafkajs driver printed nothing (exit {proc.returncode})"
        res = json.loads(lines[-1])
        assert res.get("error") is None and res["ok"], f"{scenario} failed: {res.get('error')}"
        return res

    return {"franz": go(franz, "FRANZ_LOG"), "sarama": go(sarama, "SARAMA_LOG"),
            "kafkajs": kafkajs}


def security_flags(b, certs, family, kind, password=SCRAM_PASSWORD):
    """(bootstrap, driver flags) for one listener: the same settings for both brokers."""
    c = Path(certs)
    if kind == "mtls":
        return f"127.0.0.1:{b.ssl_port}", {"tls_ca": c / "ca.pem", "tls_cert": c / "client.crt",
                                           "tls_key": c / "client.key"}
    # kafkajs spells its mechanisms in lower case.
    mechanism = "scram-sha-512" if family == "kafkajs" else "SCRAM-SHA-512"
    return f"127.0.0.1:{b.sasl_ssl_port}", {"tls_ca": c / "ca.pem", "sasl_mechanism": mechanism,
                                            "sasl_user": SCRAM_USER, "sasl_password": password}


def b64text(v):
    return base64.b64decode(v).decode()


def check_franz(r):
    assert len(r["produce"]) == N and [p["error"] for p in r["produce"]] == [None] * N
    assert not r["fetch_errors"]
    produced = sorted((p["partition"], p["offset"]) for p in r["produce"])
    got = sorted((m["partition"], m["offset"]) for m in r["consumed"])
    assert got == produced
    idx = sorted(int(b64text(dict(m["headers"])["idx"])) for m in r["consumed"])
    assert idx == list(range(N))


def check_sarama(r):
    produced = r["produced"]
    assert len(produced) == N and [p["error"] for p in produced] == [None] * N
    assert r["close"] is None
    msgs = []
    for part in r["consumed"].values():
        assert part["errors"] is None and "consume_error" not in part
        msgs += part["messages"]
    assert sorted((m["partition"], m["offset"]) for m in msgs) == \
        sorted((p["partition"], p["offset"]) for p in produced)
    idx = sorted(int(b64text(dict(m["headers"])["idx"])) for m in msgs)
    assert idx == list(range(N))


def check_kafkajs(r):
    assert [x["errorCode"] for x in r["results"]] == [0] * len(r["results"])
    assert r["timedOut"] is False
    # The module's first group may meet a coordinator still loading (NOT_COORDINATOR, as on a
    # fresh Kafka); kafkajs restarts its consumer then, and every record still arrives once.
    assert all(c["restart"] for c in r["crashes"]), r["crashes"]
    values = sorted(int(m["value"][1:]) for m in r["records"])
    assert values == list(range(N))
    assert len({(m["partition"], m["offset"]) for m in r["records"]}) == N


ROUND_TRIP = {
    "franz": ("produce-consume", {"partitions": 2, "count": N}, check_franz),
    "sarama": ("produce-consume", {"partitions": 2, "count": N}, check_sarama),
    "kafkajs": ("round-trip", {"partitions": 2, "count": N}, check_kafkajs),
}


@pytest.mark.parametrize("kind", ["sasl_ssl_scram512", "mtls"])
@pytest.mark.parametrize("family", ["franz", "sarama", "kafkajs"])
def test_produce_and_consume_over_secured_listener(secure, certs, drivers, family, kind):
    bootstrap, flags = security_flags(secure, certs, family, kind)
    scenario, args, check = ROUND_TRIP[family]
    topic = f"sec-{family}-{uuid.uuid4().hex[:8]}"
    if family == "kafkajs":
        args = {**args, "group": f"g-{topic}"}
    check(drivers[family](scenario, bootstrap, topic=topic, **args, **flags))


@pytest.mark.parametrize("family", ["franz", "sarama", "kafkajs"])
def test_wrong_password_is_an_authentication_failure(secure, certs, drivers, family):
    bootstrap, flags = security_flags(secure, certs, family, "sasl_ssl_scram512",
                                      password=WRONG)
    started = time.monotonic()
    r = drivers[family]("connect", bootstrap, timeout=40, **flags)
    took = time.monotonic() - started
    if family == "kafkajs":
        step = r["connect"]
        assert step["ok"] is False, step
        err = step["error"]
        assert err["name"] == "KafkaJSSASLAuthenticationError", err
        text = err["message"]
    elif family == "sarama":
        # The broker's error is inside sarama's ErrOutOfBrokers (after its metadata retries),
        # reachable with errors.Is, as a sarama user tests for it.
        err = r["metadata_error"]
        assert r["sasl_failed"] is True, r
        text = err["text"]
        assert "SASL Authentication failed" in text, text
    else:
        err = r["metadata_error"]
        assert err is not None and err["name"] == "SASL_AUTHENTICATION_FAILED", err
        assert err["code"] == 58
        text = err["text"]
    # Kafka's message for a SCRAM failure reaches the user.
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in text, text
    assert "timeout" not in text.lower() and "deadline" not in text.lower(), text
    # A refusal, not a wait: well inside the driver's 40 s deadline.
    assert took < 20, (took, r)
