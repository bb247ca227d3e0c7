"""scripts/kafka-cli, the README quickstart's way to the Kafka 4.4.0 tools: the same steps as the
quickstart (create, describe, produce keyed records, consume them in a group, describe the
group) through the script, against the test broker.

Every run of the script is a JVM start (1.5-4 s on 2 cores): one test, few runs."""
import subprocess

from harness.broker import ROOT
from harness.cli import MAIN_CLASSES

SCRIPT = ROOT / "scripts" / "kafka-cli"


def kafka_cli(*args, input=None, check=True):
    out = subprocess.run([str(SCRIPT), *args], input=input, capture_output=True, text=True,
                         timeout=120)
    if check:
        assert out.returncode == 0, (f"scripts/kafka-cli {' '.join(args)} exited "
                                     f"{out.returncode}\nstdout:\n{out.stdout}\n"
                                     f"stderr:\n{out.stderr}")
    return out


def test_kafka_cli_names_the_tools_and_refuses_an_unknown_one():
    assert kafka_cli("--list").stdout.split() == list(MAIN_CLASSES)
    out = kafka_cli("no-such-tool", check=False)
    assert out.returncode == 2
    assert "unknown tool 'no-such-tool'" in out.stderr
    assert "consumer-groups" in out.stderr


def test_kafka_cli_runs_the_quickstart(broker, topic_name):
    bootstrap = ("--bootstrap-server", broker.bootstrap)
    group = f"{topic_name}-readers"

    out = kafka_cli("topics", *bootstrap, "--create", "--topic", topic_name,
                    "--partitions", "3").stdout
    assert f"Created topic {topic_name}." in out

    # The names of Kafka's own scripts are accepted too.
    assert topic_name in kafka_cli("kafka-topics.sh", *bootstrap, "--list").stdout.split()
    out = kafka_cli("kafka-topics", *bootstrap, "--describe", "--topic", topic_name).stdout
    assert "PartitionCount: 3\tReplicationFactor: 1" in out

    kafka_cli("console-producer", *bootstrap, "--topic", topic_name,
              "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
              input="k1:hello\nk2:world\n")

    out = kafka_cli("console-consumer", *bootstrap, "--topic", topic_name, "--group", group,
                    "--from-beginning", "--max-messages", "2", "--timeout-ms", "30000",
                    "--formatter-property", "print.key=true").stdout
    assert sorted(out.splitlines()) == ["k1\thello", "k2\tworld"]

    out = kafka_cli("consumer-groups", *bootstrap, "--describe", "--group", group).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert sorted((r[1], r[2]) for r in rows) == [(topic_name, str(p)) for p in range(3)]
    # Both records were committed: the group's offsets add up to them.
    assert sum(int(r[3]) for r in rows) == 2
