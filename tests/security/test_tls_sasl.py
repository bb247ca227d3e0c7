"""TLS and SASL listeners (issue #28), against kactor and Apache Kafka 4.4 with the same broker
and client configs: librdkafka, kafka-python and the Java clients (Kafka's CLIs) over SSL with a
client certificate (mTLS), SASL_SSL with SCRAM-SHA-256/512 and PLAIN, and SASL_PLAINTEXT; the
SASL exchange on the wire (handshake answers, failure codes and messages, requests before
authentication, session expiry without re-authentication); and hostile peers (a TLS handshake
of garbage, a 2 GiB frame before authentication, a client that never authenticates, a burst of
wrong passwords) with the broker still serving afterwards.

The certificates are made for each run with openssl: a CA, a server certificate for 127.0.0.1
and a client certificate, all PEM, which both brokers read (ssl.keystore.type=PEM); the broker
and certificate fixtures are in conftest.py and harness/security.py."""
import socket
import ssl
import struct
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness import wire
from harness.cli import run_tool
from harness.clients import poll_values
from harness.security import SCRAM_PASSWORD, SCRAM_USER, SecureBroker


def _topic(b, name, partitions=1):
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _client_conf(b, certs, kind):
    c = Path(certs)
    if kind == "mtls":
        return {"bootstrap.servers": f"127.0.0.1:{b.ssl_port}", "security.protocol": "SSL",
                "ssl.ca.location": str(c / "ca.pem"),
                "ssl.certificate.location": str(c / "client.crt"),
                "ssl.key.location": str(c / "client.key")}
    protocol, mechanism = kind
    conf = {"security.protocol": protocol, "sasl.mechanisms": mechanism}
    if protocol == "SASL_SSL":
        conf["bootstrap.servers"] = f"127.0.0.1:{b.sasl_ssl_port}"
        conf["ssl.ca.location"] = str(c / "ca.pem")
    else:
        conf["bootstrap.servers"] = f"127.0.0.1:{b.sasl_plain_port}"
    if mechanism == "PLAIN":
        conf.update({"sasl.username": "alice", "sasl.password": "alice-plain"})
    elif mechanism == "OAUTHBEARER":
        conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": "principal=alice"})
    else:
        conf.update({"sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD})
    return conf


def _produce_consume(conf, topic, n=200):
    p = Producer({**conf, "enable.idempotence": True, "linger.ms": 5})
    errors = []
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=str(i % 7).encode(),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(60) == 0
    assert errors == []
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = poll_values(c, n, 60)
    c.close()
    # Every record once; order holds within a partition only.
    assert sorted(got, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(n)]


CLIENT_KINDS = ["mtls", ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512"),
                ("SASL_SSL", "PLAIN"), ("SASL_SSL", "OAUTHBEARER"),
                ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
                ("SASL_PLAINTEXT", "PLAIN")]


@pytest.mark.parametrize("kind", CLIENT_KINDS, ids=lambda k: k if isinstance(k, str)
                         else f"{k[0]}-{k[1]}")
def test_librdkafka_produces_and_consumes_over_each_secured_listener(secure, certs, kind):
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    _topic(secure, topic, partitions=2)
    _produce_consume(_client_conf(secure, certs, kind), topic)


def test_librdkafka_wrong_password_fails_with_kafkas_message(secure, certs):
    conf = {**_client_conf(secure, certs, ("SASL_SSL", "SCRAM-SHA-256")),
            "sasl.password": "wrong"}
    errors = []
    conf["error_cb"] = errors.append
    admin = AdminClient(conf)
    with pytest.raises(KafkaException) as raised:
        admin.list_topics(timeout=8)
    admin.poll(1)
    text = " ".join(str(e) for e in errors) + str(raised.value)
    assert ("Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism SCRAM-SHA-256") in text, text


def test_mtls_refuses_a_client_without_a_certificate(secure, certs):
    ctx = ssl.create_default_context(cafile=str(Path(certs) / "ca.pem"))
    with socket.create_connection(("127.0.0.1", secure.ssl_port), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                # TLS 1.3 finishes the client's side first; the refusal arrives on first use.
                s.sendall(wire.api_versions_request(0))
                if not s.recv(4):
                    raise ConnectionError("closed")
    # With the certificate, ApiVersions answers over TLS.
    ctx.load_cert_chain(str(Path(certs) / "client.crt"), str(Path(certs) / "client.key"))
    with socket.create_connection(("127.0.0.1", secure.ssl_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(wire.api_versions_request(0))
            _, err, apis, _ = wire.parse_api_versions_response(wire.recv_frame(s), 0)
            assert err == 0 and apis


def _java_client_props(b, certs, path, mechanism="SCRAM-SHA-512"):
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={Path(certs) / 'ca.pem'}\n")
    return f"127.0.0.1:{b.sasl_ssl_port}"


def test_java_clients_over_sasl_ssl_scram(secure, certs, tmp_path):
    props = tmp_path / "client.properties"
    bootstrap = _java_client_props(secure, certs, props)
    topic = f"java-{uuid.uuid4().hex[:10]}"
    run_tool("topics", "--bootstrap-server", bootstrap, "--command-config", str(props),
             "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    lines = [f"line-{i}" for i in range(20)]
    run_tool("console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
             "--command-config", str(props), input="\n".join(lines) + "\n")
    out = run_tool("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                   "--command-config", str(props), "--from-beginning",
                   "--max-messages", str(len(lines)), "--timeout-ms", "30000")
    assert out.stdout.split() == lines


def test_kafka_python_over_sasl_ssl_scram(secure, certs):
    from kafka import KafkaConsumer, KafkaProducer
    topic = f"kp-{uuid.uuid4().hex[:10]}"
    _topic(secure, topic)
    common = dict(bootstrap_servers=f"127.0.0.1:{secure.sasl_ssl_port}",
                  security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                  sasl_plain_username=SCRAM_USER, sasl_plain_password=SCRAM_PASSWORD,
                  ssl_cafile=str(Path(certs) / "ca.pem"))
    p = KafkaProducer(**common)
    for i in range(10):
        p.send(topic, f"kp{i}".encode())
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **common)
    got = [m.value.decode() for m in c][:10]
    c.close()
    assert got == [f"kp{i}" for i in range(10)]


# ---- the SASL exchange on the wire ----------------------------------------------------------

def _handshake(sock, mechanism, corr=1):
    body = wire.string(mechanism)
    sock.sendall(wire.frame(wire.request_header_v1(17, 1, corr) + body))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.i32() == corr
    err = r.i16()
    mechanisms = [r.string() for _ in range(r.i32())]
    return err, mechanisms


def _authenticate(sock, token, corr=2):
    """SaslAuthenticate v1: (error, message, auth bytes, session lifetime ms)."""
    body = wire.i32(len(token)) + token
    sock.sendall(wire.frame(wire.request_header_v1(36, 1, corr) + body))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.i32() == corr
    err = r.i16()
    n = r.i16()
    message = r.take(n).decode() if n >= 0 else None
    auth = r.take(r.i32())
    return err, message, auth, r.i64()


def _closed(sock, timeout=5):
    """The peer closes the connection within `timeout` (after whatever it sends last, such as
    a TLS alert)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if sock.recv(4096) == b"":
                return True
    except ConnectionError:
        return True
    except socket.timeout:
        return False
    return False


# Kafka lists the mechanisms in a Java HashMap's order, not the configured one.
MECHANISMS = ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]


def test_handshake_answers_and_plain_failure_messages_match_kafka(secure):
    with wire.connect(secure.sasl_plain_port) as s:
        err, mechanisms = _handshake(s, "SCRAM-SHA-256")
        assert (err, mechanisms) == (0, MECHANISMS)
    with wire.connect(secure.sasl_plain_port) as s:
        err, mechanisms = _handshake(s, "GSSAPI")
        assert (err, mechanisms) == (33, MECHANISMS)
        assert _closed(s)
    with wire.connect(secure.sasl_plain_port) as s:
        assert _handshake(s, "PLAIN")[0] == 0
        err, message, _, _ = _authenticate(s, b"\0alice\0not-it")
        assert (err, message) == (58, "Authentication failed: Invalid username or password")
        assert _closed(s)
    with wire.connect(secure.sasl_plain_port) as s:
        assert _handshake(s, "PLAIN")[0] == 0
        err, message, auth, lifetime = _authenticate(s, b"\0alice\0alice-plain")
        assert (err, message, auth, lifetime) == (0, "", b"", 0)
        # Authenticated: Metadata answers, and another SaslAuthenticate is ILLEGAL_SASL_STATE.
        s.sendall(wire.metadata_v1_request([]))
        corr, topics = wire.parse_metadata_v1_response(wire.recv_frame(s))
        assert corr == 3 and topics == {}
        err, message, _, _ = _authenticate(s, b"\0alice\0alice-plain", corr=9)
        assert (err, message) == (34, "SaslAuthenticate request received after successful "
                                      "authentication")


def test_failed_authentication_answer_waits_for_the_delay(secure):
    # connection.failed.authentication.delay.ms (100 ms by default) holds back the error answer
    # itself, not only the close: Kafka's Selector sends it when the delayed close fires, so a
    # password guesser waits for every verdict.
    with wire.connect(secure.sasl_plain_port) as s:
        assert _handshake(s, "PLAIN")[0] == 0
        started = time.monotonic()
        err, _, _, _ = _authenticate(s, b"\0alice\0not-it")
        took = time.monotonic() - started
        assert err == 58 and took >= 0.095, took
        assert _closed(s, timeout=2)


def _unsecured_jwt(claims):
    import base64
    import json
    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")  # noqa: E731
    return (enc(b'{"alg":"none"}') + b"." + enc(json.dumps(claims).encode()) + b".").decode()


def test_oauthbearer_expired_token_gets_the_json_error(secure):
    now = int(time.time())
    token = _unsecured_jwt({"sub": "alice", "iat": now - 120, "exp": now - 60})
    with wire.connect(secure.sasl_plain_port) as s:
        assert _handshake(s, "OAUTHBEARER")[0] == 0
        err, message, challenge, _ = _authenticate(
            s, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        assert (err, challenge) == (0, b'{"status":"invalid_token"}')
        err, message, _, _ = _authenticate(s, b"\x01", corr=3)
        assert (err, message) == (58, '{"status":"invalid_token"}')
        assert _closed(s)
    good = _unsecured_jwt({"sub": "bob", "iat": now, "exp": now + 3600})
    with wire.connect(secure.sasl_plain_port) as s:
        assert _handshake(s, "OAUTHBEARER")[0] == 0
        err, message, challenge, lifetime = _authenticate(
            s, f"n,,\x01auth=Bearer {good}\x01\x01".encode())
        # The session lasts as long as the token.
        assert err == 0 and challenge == b"" and 3_500_000 < lifetime <= 3_600_000


def test_requests_before_authentication_close_the_connection(secure):
    with wire.connect(secure.sasl_plain_port) as s:
        s.sendall(wire.metadata_v1_request([]))
        assert _closed(s)
    # The plaintext listener answers SaslHandshake with ILLEGAL_SASL_STATE, as Kafka does.
    with wire.connect(secure.port) as s:
        assert _handshake(s, "PLAIN") == (34, [])


def test_session_expires_without_reauthentication(certs, tmp_path, request):
    b = SecureBroker(tmp_path / "reauth", certs,
                     overrides={"connections.max.reauth.ms": "1500"})
    request.node._kactor_brokers = [b]
    b.start()
    try:
        with wire.connect(b.sasl_plain_port) as s:
            assert _handshake(s, "PLAIN")[0] == 0
            err, _, _, lifetime = _authenticate(s, b"\0alice\0alice-plain")
            assert (err, lifetime) == (0, 1500)
            time.sleep(2.0)
            s.sendall(wire.metadata_v1_request([]))
            assert _closed(s, timeout=10)
        # A Java client re-authenticates on its own (KIP-368) and keeps working past expiry.
        props = tmp_path / "c.properties"
        bootstrap = _java_client_props(b, certs, props, mechanism="SCRAM-SHA-256")
        b.add_scram_user(mechanisms=("SCRAM-SHA-256",))
        topic = f"re-{uuid.uuid4().hex[:8]}"
        run_tool("topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", topic,
                 "--partitions", "1", "--replication-factor", "1")
        lines = [f"r{i}" for i in range(5)]
        run_tool("console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
                 "--command-config", str(props), input="\n".join(lines) + "\n")
        # The consumer polls for 6 s: several sessions of 1.5 s on the same connections.
        out = run_tool("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                       "--command-config", str(props), "--from-beginning",
                       "--timeout-ms", "6000", check=False)
        assert out.stdout.split() == lines, out.stderr[-2000:]
    finally:
        b.stop()


# ---- hostile peers --------------------------------------------------------------------------

def _still_serves(b):
    with wire.connect(b.port) as s:
        s.sendall(wire.api_versions_request(0))
        assert wire.parse_api_versions_response(wire.recv_frame(s), 0)[1] == 0


def test_hostile_peers_leave_the_broker_serving(secure, certs):
    # Garbage where a TLS ClientHello belongs.
    for port in (secure.ssl_port, secure.sasl_ssl_port):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"\x16\x03\x01\xff\xff" + b"\xab" * 4096)
            assert _closed(s)
    # A frame claiming 2 GiB before authentication: closed without reading it.
    with wire.connect(secure.sasl_plain_port) as s:
        s.sendall(struct.pack(">i", 0x7FFFFFFF) + b"\0" * 64)
        assert _closed(s)
    # Silent clients that never authenticate, held while others are served.
    idle = [socket.create_connection(("127.0.0.1", secure.sasl_ssl_port), timeout=5)
            for _ in range(20)]
    try:
        # 200 wrong passwords in parallel bursts of 20 connections.
        for _ in range(10):
            socks = [wire.connect(secure.sasl_plain_port) for _ in range(20)]
            for s in socks:
                _handshake(s, "PLAIN")
                token = b"\0alice\0nope-x"
                s.sendall(wire.frame(wire.request_header_v1(36, 1, 2)
                                     + wire.i32(len(token)) + token))
            for s in socks:
                err = wire.Reader(wire.recv_frame(s))
                err.i32()
                assert err.i16() == 58
                s.close()
        _still_serves(secure)
        _produce_consume(_client_conf(secure, certs, ("SASL_SSL", "SCRAM-SHA-256")),
                         _fresh_topic(secure), n=20)
    finally:
        for s in idle:
            s.close()
    log = secure.log_text() if secure.target == "kactor" else ""
    assert "nope-x" not in log and SCRAM_PASSWORD not in log


def _fresh_topic(b):
    t = f"h-{uuid.uuid4().hex[:10]}"
    _topic(b, t)
    return t
