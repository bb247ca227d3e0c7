"""Client quotas (issue #28 part 4): `kafka-configs --entity-type users|clients|ips` set and
describe them with Kafka 4.4.0's output, they survive a restart, and a producer or consumer
over its byte-rate quota is held to it and told so (throttle time).

Every test runs on a private broker (quotas stay until removed; the shared broker's tests
expect none). The throttle tests use `quota.window.num=3` (Kafka's own key) on both targets so
that the rate settles within seconds: with Kafka's 11 one-second samples the first 10 s of
quota pass unthrottled and the payback swings for tens of seconds more. Rates are measured by
the client over a bounded run after a warm-up."""
import json
import time

from confluent_kafka import Consumer, Producer

from harness.cli import KafkaCli
from harness.clients import create_topic

QUOTA = 500_000  # bytes per second
RUN_S = 30
WARMUP_S = 9


def configs(cli, *args, check=True):
    return cli.run("configs", *args, check=check)


def lines(out):
    return sorted(ln for ln in out.stdout.splitlines() if ln.strip())


def test_kafka_configs_quotas_alter_describe_and_restart(broker_factory):
    b = broker_factory()
    cli = KafkaCli(b)
    alter = ("--alter",)
    out = configs(cli, *alter, "--entity-type", "users", "--entity-name", "alice",
                  "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert out.stdout.strip() == "Completed updating config for user alice."
    configs(cli, *alter, "--entity-type", "users", "--entity-name", "alice",
            "--entity-type", "clients", "--entity-name", "app1",
            "--add-config", "request_percentage=50")
    out = configs(cli, *alter, "--entity-type", "users", "--entity-default",
                  "--add-config", "controller_mutation_rate=10")
    assert out.stdout.strip() == "Completed updating default config for users in the cluster."
    configs(cli, *alter, "--entity-type", "clients", "--entity-default",
            "--add-config", "producer_byte_rate=4096")
    out = configs(cli, *alter, "--entity-type", "clients", "--entity-name", "app2",
                  "--add-config", "consumer_byte_rate=100")
    assert out.stdout.strip() == "Completed updating config for client app2."
    out = configs(cli, *alter, "--entity-type", "ips", "--entity-name", "127.0.0.5",
                  "--add-config", "connection_creation_rate=7")
    assert out.stdout.strip() == "Completed updating config for ip 127.0.0.5."

    def describe_all():
        # Several entities come back in the admin client's hash-map order, which depends on
        # the broker's answer order for colliding entities: compared as sets of lines.
        assert lines(configs(cli, "--describe", "--entity-type", "users")) == sorted([
            "Quota configs for the default user-principal are controller_mutation_rate=10.0",
            "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, "
            "producer_byte_rate=1024.0",
        ])
        out = configs(cli, "--describe", "--entity-type", "users", "--entity-type", "clients")
        assert out.stdout.strip() == \
            "Quota configs for user-principal 'alice', client-id 'app1' are request_percentage=50.0"
        assert lines(configs(cli, "--describe", "--entity-type", "clients")) == sorted([
            "Quota configs for the default client-id are producer_byte_rate=4096.0",
            "Quota configs for client-id 'app2' are consumer_byte_rate=100.0",
        ])
        out = configs(cli, "--describe", "--entity-type", "clients", "--entity-default")
        assert out.stdout.strip() == \
            "Quota configs for the default client-id are producer_byte_rate=4096.0"
        out = configs(cli, "--describe", "--entity-type", "ips")
        assert out.stdout.strip() == \
            "Quota configs for ip '127.0.0.5' are connection_creation_rate=7.0"

    describe_all()
    # Stored in the metadata log: a restart replays them.
    b.restart()
    describe_all()

    configs(cli, *alter, "--entity-type", "users", "--entity-name", "alice",
            "--delete-config", "consumer_byte_rate")
    out = configs(cli, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert out.stdout.strip() == \
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0"

    # The broker's refusals, as Kafka words them.
    for value, message in [
        ("-5", "InvalidRequestException: Quota producer_byte_rate must be greater than 0"),
        ("1.5", "InvalidRequestException: producer_byte_rate cannot be a fractional value."),
    ]:
        out = configs(cli, *alter, "--entity-type", "users", "--entity-name", "bob",
                      "--add-config", f"producer_byte_rate={value}", check=False)
        assert out.returncode == 1
        assert message in out.stdout + out.stderr
    out = configs(cli, "--describe", "--entity-type", "users", "--entity-name", "bob")
    assert out.stdout.strip() == ""


def _throttle_max(stats):
    """The largest throttle time (ms) librdkafka saw from any broker in its statistics."""
    return max((b["throttle"]["max"] for s in stats for b in s["brokers"].values()
                if b.get("throttle")), default=0)


def test_producer_over_its_quota_is_throttled_to_it(broker_factory, topic_name):
    b = broker_factory(overrides={"quota.window.num": "3"})
    cli = KafkaCli(b)
    create_topic(b, topic_name, partitions=1)
    configs(cli, "--alter", "--entity-type", "clients", "--entity-name", "quota-producer",
            "--add-config", f"producer_byte_rate={QUOTA}")
    stats = []
    acked = []
    p = Producer({
        "bootstrap.servers": b.bootstrap, "client.id": "quota-producer",
        "linger.ms": 5, "batch.size": 16384, "queue.buffering.max.kbytes": 2048,
        "statistics.interval.ms": 1000, "stats_cb": lambda s: stats.append(json.loads(s)),
    })

    def delivered(err, msg):
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    value = b"x" * 1000
    t0 = time.monotonic()
    while time.monotonic() - t0 < RUN_S:
        try:
            p.produce(topic_name, value, callback=delivered)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(30)
    rate = sum(n for t, n in acked if t0 + WARMUP_S <= t < t0 + RUN_S) / (RUN_S - WARMUP_S)
    # Unthrottled, this producer writes tens of MB/s on loopback.
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, rate
    assert _throttle_max(stats) > 0
    if b.target == "kactor":
        metrics = _metrics(b)
        assert 'kactor_quota_throttled_responses_total{client_id="quota-producer",' \
               'quota_type="Produce",user=""}' in metrics


def _metrics(b):
    import urllib.request
    with urllib.request.urlopen(b.metrics_url, timeout=10) as r:
        return r.read().decode()


def test_consumer_over_its_quota_is_throttled_to_it(broker_factory, topic_name):
    # Fetches come in 64 kB steps (an eighth of a second of quota each): a longer run keeps
    # that granularity out of the average.
    run_s = 40
    b = broker_factory(overrides={"quota.window.num": "3"})
    cli = KafkaCli(b)
    create_topic(b, topic_name, partitions=1)
    # Enough data that the consumer never runs out within the run: 2x quota x run.
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "filler", "linger.ms": 20,
                  "batch.size": 16384})
    value = b"y" * 1000
    for _ in range(2 * QUOTA * run_s // 1000):
        while True:
            try:
                p.produce(topic_name, value)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    configs(cli, "--alter", "--entity-type", "clients", "--entity-name", "quota-consumer",
            "--add-config", f"consumer_byte_rate={QUOTA}")
    stats = []
    c = Consumer({
        "bootstrap.servers": b.bootstrap, "client.id": "quota-consumer",
        "group.id": f"g-{topic_name}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.max.bytes": 65536, "max.partition.fetch.bytes": 65536, "message.max.bytes": 65536,
        "statistics.interval.ms": 1000, "stats_cb": lambda s: stats.append(json.loads(s)),
    })
    c.subscribe([topic_name])
    got = []
    t0 = None
    try:
        deadline = time.monotonic() + run_s + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            now = time.monotonic()
            if t0 is None:
                t0 = now  # from the first record: the group join is not the broker's doing
            if now - t0 >= run_s:
                break
            got.append((now, len(msg.value())))
    finally:
        c.close()
    assert t0 is not None, "nothing consumed"
    rate = sum(n for t, n in got if t0 + WARMUP_S <= t < t0 + run_s) / (run_s - WARMUP_S)
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, rate
    assert _throttle_max(stats) > 0
