"""A group member run as a subprocess (so tests can SIGKILL it): a confluent-kafka consumer
subscribed to one topic that prints one JSON line per event on stdout.

    python member.py BOOTSTRAP GROUP TOPIC PROTOCOL [JSON-extra-config]

Events: {"ev": "assigned" | "revoked" | "lost", "delta": [[topic, p], ...], "tps": [...]} on
every assignment change (`tps` is the whole assignment after it), {"ev": "msg", "p": P, "o": O} per
record (each record's offset+1 is committed synchronously before the next poll)."""
import json
import signal
import sys

from confluent_kafka import Consumer, TopicPartition


def out(**ev):
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


def main():
    bootstrap, group, topic, protocol = sys.argv[1:5]
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    # Stop consuming (pause, keep heartbeating) after this many records.
    limit = extra.pop("max.msgs", None)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    conf.update(extra)
    c = Consumer(conf)
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))

    # Eager revocation hands over the whole assignment and incremental (cooperative, KIP-848)
    # only the change; "remove the revoked, add the assigned" tracks both.
    owned = set()

    def on_assign(consumer, parts):
        owned.update((t.topic, t.partition) for t in parts)
        out(ev="assigned", delta=[[t.topic, t.partition] for t in parts], tps=sorted(owned))

    def on_revoke(consumer, parts):
        owned.difference_update((t.topic, t.partition) for t in parts)
        out(ev="revoked", delta=[[t.topic, t.partition] for t in parts], tps=sorted(owned))

    def on_lost(consumer, parts):
        owned.difference_update((t.topic, t.partition) for t in parts)
        out(ev="lost", delta=[[t.topic, t.partition] for t in parts], tps=sorted(owned))

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    consumed = 0
    try:
        while running[0]:
            if limit is not None and consumed >= limit:
                c.pause(c.assignment())
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                out(ev="error", error=str(m.error()))
                continue
            c.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1)],
                     asynchronous=False)
            out(ev="msg", p=m.partition(), o=m.offset())
            consumed += 1
    finally:
        c.close()
        out(ev="closed")


if __name__ == "__main__":
    main()
