"""Compressed batches whose payload does not hold what the header says are refused at produce
time, as Kafka 4.4 refuses them (it decompresses every compressed batch to validate its
records), so that no consumer ever meets them; valid compressed batches of every codec are
stored and consumed."""
import random

import pytest

from harness import wire
from harness.clients import consume_all, create_topic

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
RECORDS = [(b"k%d" % i, b"value-%d" % i * 3) for i in range(5)]


def _bad_record_length():
    recs = bytearray(wire.encode_records(RECORDS))
    # The first record's length prefix (a one-byte zigzag varint) claims 2 bytes more than the
    # record holds: every later record is read from the wrong place.
    recs[0] += 4
    return bytes(recs)


def _cases(codec):
    good = wire.compress(codec, wire.encode_records(RECORDS))
    rng = random.Random(codec)
    return {
        "garbage payload": dict(records_section=bytes(rng.randrange(256) for _ in range(300))),
        "truncated stream": dict(records_section=good[:len(good) // 2]),
        "fewer records than declared": dict(count=len(RECORDS) + 1),
        "more records than declared": dict(count=len(RECORDS) - 1),
        "bad record length": dict(records_section=wire.compress(codec, _bad_record_length())),
    }


# What Apache Kafka 4.4.0 answers for each case (read off the reference broker with this test):
# a stream its codec cannot read is an unexpected exception in its validator,
# UNKNOWN_SERVER_ERROR (-1); records that disagree with the header are INVALID_RECORD (87).
KAFKA_ANSWER = {
    "garbage payload": -1,
    "truncated stream": -1,
    "fewer records than declared": 87,
    "more records than declared": 87,
    "bad record length": 87,
}
UNCOMPRESSED_ANSWER = dict.fromkeys(KAFKA_ANSWER, 87)


def expected_answers(codec, target):
    if codec == 0:
        return UNCOMPRESSED_ANSWER
    if target == "kafka":
        # Kafka 4.4.0 walks compressed records without checking each record's length against
        # its fields, and stores this batch (its consumers then fail on it). kactor refuses it
        # as it refuses the same records uncompressed (docs/differences.md, intentional).
        return {**KAFKA_ANSWER, "bad record length": 0}
    return KAFKA_ANSWER


@pytest.mark.parametrize("codec", sorted(CODECS), ids=lambda c: CODECS[c])
def test_corrupt_compressed_batches_are_refused(broker, topic_name, codec, target):
    create_topic(broker, topic_name)
    answers = {}
    with wire.connect(broker.port) as sock:
        def produce(batch):
            # v7: zstd needs it.
            _, rows = wire.parse_produce_v3_response(wire.roundtrip(
                sock, wire.produce_v3_request(topic_name, 0, batch, acks=1, version=7)), 7)
            [(_, _, err, base)] = rows
            return err, base

        assert produce(wire.record_batch(RECORDS, codec=codec)) == (0, 0)
        for name, tweak in _cases(codec).items():
            answers[name] = produce(wire.record_batch(RECORDS, codec=codec, **tweak))[0]
        expected = expected_answers(codec, target)
        stored_bad = sum(1 for code in expected.values() if code == 0)
        assert produce(wire.record_batch(RECORDS, codec=codec)) == \
            (0, (1 + stored_bad) * len(RECORDS))
    assert answers == expected
    if stored_bad:
        return
    # Nothing of the refused batches was stored: a consumer reads the two good ones, in order.
    got = consume_all(broker, topic_name, 2 * len(RECORDS))
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (i, k, v) for i, (k, v) in enumerate(RECORDS + RECORDS)]
