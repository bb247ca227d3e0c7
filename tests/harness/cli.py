"""The Kafka 4.4.0 command-line tools, run as `java -cp '.cache/kafka-libs/*' <MainClass>`.

JVM start-up dominates on 2 cores (a few seconds each), so suites batch work per invocation."""
import subprocess

from .broker import JAVA_DIR, java_cmd

# kafka-<name>.sh → main class in the 4.4.0 jars: the table scripts/kafka-cli reads too.
TOOLS_TABLE = JAVA_DIR / "kafka-tools.txt"


def _read_tools_table(path):
    table = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, main_class = line.split()
            table[name] = main_class
    return table


MAIN_CLASSES = _read_tools_table(TOOLS_TABLE)


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
