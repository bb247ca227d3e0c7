"""The Kafka 4.4.0 command-line tools, run as `java -cp '.cache/kafka-libs/*' <MainClass>`.

JVM start-up dominates on 2 cores (a few seconds each), so suites batch work per invocation."""
import subprocess

from .broker import java_cmd

# kafka-<name>.sh → main class in the 4.4.0 jars
MAIN_CLASSES = {
    "topics": "org.apache.kafka.tools.TopicCommand",
    "configs": "org.apache.kafka.tools.ConfigCommand",
    "acls": "org.apache.kafka.tools.AclCommand",
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "features": "org.apache.kafka.tools.FeatureCommand",
    "cluster": "org.apache.kafka.tools.ClusterTool",
    "leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "storage": "kafka.tools.StorageTool",
}


class CliError(AssertionError):
    pass


def run_tool(tool, *args, input=None, timeout=120, check=True):
    """Run kafka-<tool> with `args`; returns CompletedProcess (text). Raises CliError on a
    non-zero exit when `check`, with the command, stdout and stderr in the message."""
    cmd = java_cmd(MAIN_CLASSES.get(tool, tool), args)
    try:
        out = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise CliError(f"kafka-{tool} timed out after {timeout}s\n$ {' '.join(cmd)}\n"
                       f"stdout:\n{e.stdout}\nstderr:\n{e.stderr}") from None
    if check and out.returncode != 0:
        raise CliError(f"kafka-{tool} exited {out.returncode}\n$ {' '.join(cmd)}\n"
                       f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}")
    return out


class KafkaCli:
    """Kafka tools bound to one broker: `cli.run("topics", "--list")` adds
    `--bootstrap-server <broker>` for the tools that take it."""

    NO_BOOTSTRAP = {"dump-log", "storage", "producer-perf-test", "consumer-perf-test"}
    # Tools that take --bootstrap-server after their subcommand.
    BOOTSTRAP_AFTER_SUBCOMMAND = {"cluster"}

    def __init__(self, broker):
        self.broker = broker

    def run(self, tool, *args, input=None, timeout=120, check=True):
        bootstrap = ("--bootstrap-server", self.broker.bootstrap)
        if tool in self.BOOTSTRAP_AFTER_SUBCOMMAND:
            args = args[:1] + bootstrap + args[1:]
        elif tool not in self.NO_BOOTSTRAP:
            args = bootstrap + args
        return run_tool(tool, *args, input=input, timeout=timeout, check=check)
