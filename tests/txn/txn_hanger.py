"""A transactional producer that opens a transaction and then hangs, for the tests that kill it
(or the broker) with the transaction open.

    txn_hanger.py BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID PER_PARTITION TIMEOUT_MS [PREFIX]

Writes PER_PARTITION records `<prefix>:<partition>:<i>` (prefix defaults to `hang`) to each of
partitions 0..PARTITIONS-1 in one transaction, waits until they are acknowledged, prints `open`
and sleeps until killed."""
import sys
import time

from confluent_kafka import Producer


def main():
    bootstrap, topic, parts, txn_id, per, timeout_ms = sys.argv[1:7]
    prefix = sys.argv[7] if len(sys.argv) > 7 else "hang"
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2,
                  "transaction.timeout.ms": int(timeout_ms), "message.timeout.ms": int(timeout_ms)})
    p.init_transactions(60)
    p.begin_transaction()
    for part in range(int(parts)):
        for i in range(int(per)):
            p.produce(topic, value=f"{prefix}:{part}:{i}".encode(), partition=part)
    assert p.flush(60) == 0
    print("open", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
