"""pytest harness: brokers as fixtures, the `kactor_pending` marker, broker logs on failure.

Target: KACTOR_TEST_TARGET=kactor (default; target/release/kactor, or $KACTOR_BIN) or =kafka
(Apache Kafka 4.4.0 from .cache/kafka-libs, the reference every suite is validated against).

Fixtures:
  broker          a running single-node broker shared by the whole session (restarted if a test
                  left it dead); use unique topic names (`topic_name`).
  broker_factory  broker_factory(overrides=None, name="broker", start=True) -> Broker, a private
                  broker with its own data dir and ports, stopped at teardown; for tests that
                  kill, restart or reconfigure.
  cli             KafkaCli bound to `broker`: cli.run("topics", "--list") -> CompletedProcess.
  topic_name      a unique topic name derived from the test's name.
  target          "kactor" or "kafka".
Markers:
  kactor_pending("reason")  runs against Apache Kafka, skipped against kactor until it lands.
  kafka_only("reason")      the behaviour is checked only against the reference broker.
  kafka_defect("reason")    the test asserts what a user needs and Apache Kafka 4.4.0 gets
                            wrong: expected to fail against Kafka (strict xfail, so a Kafka
                            that passes is noticed), must pass against kactor.
KACTOR_RUN_PENDING=1 runs the kactor_pending tests against kactor too (to see what already
passes before removing a marker).
"""
import os
import re
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness.broker import TARGET, Broker, use_shared  # noqa: E402
from harness.cli import KafkaCli  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "kactor_pending(reason): kactor doesn't implement this "
                            "yet; runs against Apache Kafka only")
    config.addinivalue_line("markers", "kafka_only(reason): checked against the reference broker")
    config.addinivalue_line("markers", "kafka_defect(reason): Apache Kafka 4.4.0 fails this; "
                            "kactor must pass it")


def pytest_report_header(config):
    return f"broker target: {TARGET}"


def pytest_collection_modifyitems(config, items):
    if TARGET != "kactor":
        for item in items:
            m = item.get_closest_marker("kafka_defect")
            if m is not None:
                reason = m.args[0] if m.args else m.kwargs.get("reason", "")
                item.add_marker(pytest.mark.xfail(strict=True, reason=f"kafka_defect: {reason}"))
        return
    markers = ("kafka_only",) if os.environ.get("KACTOR_RUN_PENDING") else (
        "kactor_pending", "kafka_only")
    for item in items:
        for name in markers:
            m = item.get_closest_marker(name)
            if m is not None:
                reason = m.args[0] if m.args else m.kwargs.get("reason", "")
                item.add_marker(pytest.mark.skip(reason=f"{name}: {reason}"))
                break


@pytest.fixture(scope="session")
def target():
    return TARGET


@pytest.fixture(scope="session")
def _shared_broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("shared-broker"), name="shared")
    try:
        b.start()
        yield b
    finally:
        b.stop()


@pytest.fixture
def broker(_shared_broker, request):
    # A previous test may have crashed it: restarted on the same data, the session continues.
    return use_shared(_shared_broker, request)


@pytest.fixture
def broker_factory(tmp_path, request):
    made = []

    def make(overrides=None, name="broker", start=True):
        b = Broker(tmp_path / f"{name}-{len(made)}", overrides=overrides, name=name)
        made.append(b)
        request.node._kactor_brokers = getattr(request.node, "_kactor_brokers", []) + [b]
        if start:
            b.start()
        return b

    yield make
    for b in made:
        b.stop()


@pytest.fixture
def cli(broker):
    return KafkaCli(broker)


@pytest.fixture
def topic_name(request):
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:180]
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for b in getattr(item, "_kactor_brokers", []):
            report.sections.append((f"{b.name} log ({b.log_path})", b.log_tail(80)))
