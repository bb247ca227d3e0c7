"""Transactional producer loop for test_broker_kill.py (a child process, killed with SIGKILL).

    txn_looper.py BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID PER_PARTITION TIMEOUT_MS

Transaction n writes PER_PARTITION records `<txn id>:<n>:<partition>:<i>` to every partition
and commits. After each transaction it prints its outcome as the client saw it: `committed n`,
`aborted n`, or `unknown n` (a fatal error after the commit was sent: it may have committed; the
producer is then recreated with the same transactional.id). Keeps going across broker restarts."""
import sys
import time

from confluent_kafka import KafkaException, Producer


def make(bootstrap, txn_id, timeout_ms):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2,
                  "transaction.timeout.ms": timeout_ms, "message.timeout.ms": timeout_ms,
                  "reconnect.backoff.max.ms": 500})
    while True:
        try:
            p.init_transactions(30)
            return p
        except KafkaException as e:
            if e.args[0].fatal():
                raise
            time.sleep(0.2)  # coordinator loading or broker down: retriable


def retry(op, timeout_s=60):
    """Run `op` until it succeeds or raises a non-retriable error (raised)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return op()
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main():
    bootstrap, topic, parts, txn_id, per, timeout_ms = sys.argv[1:7]
    parts, per, timeout_ms = int(parts), int(per), int(timeout_ms)
    p = make(bootstrap, txn_id, timeout_ms)
    n = 0
    while True:
        outcome = "unknown"
        try:
            p.begin_transaction()
            for part in range(parts):
                for i in range(per):
                    p.produce(topic, value=f"{txn_id}:{n}:{part}:{i}".encode(), partition=part)
            try:
                retry(lambda: p.commit_transaction(30))
                outcome = "committed"
            except KafkaException as e:
                if not e.args[0].txn_requires_abort():
                    raise
                retry(lambda: p.abort_transaction(30))
                outcome = "aborted"
        except KafkaException as e:
            print(f"error {n} {e.args[0]}", file=sys.stderr, flush=True)
            if e.args[0].fatal() or not e.args[0].txn_requires_abort():
                p = make(bootstrap, txn_id, timeout_ms)
            else:
                try:
                    retry(lambda: p.abort_transaction(30))
                    outcome = "aborted"
                except KafkaException:
                    p = make(bootstrap, txn_id, timeout_ms)
        print(f"{outcome} {n}", flush=True)
        n += 1
        time.sleep(0.02)


if __name__ == "__main__":
    main()
