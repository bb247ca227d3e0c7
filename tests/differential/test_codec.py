"""The schema codec checked without a broker: every version of every message of ours round-trips,
and reads the same bytes as a codec built from Apache Kafka 4.4.0's own schemas (the JSON files
inside kafka-clients-4.4.0.jar), so a field we lack or misdeclare shows up here."""
import glob
import os

import pytest

from harness import schema_codec as sc
from harness.broker import KAFKA_LIBS

OURS = sc.Schemas.from_dir()
JAR = os.path.join(KAFKA_LIBS, "kafka-clients-4.4.0.jar")


def sample(struct_, version, depth=0):
    """A value of every field present in `version`, non-default where the type allows, so that
    tagged fields are written and every array holds one element."""
    out = {}
    for f in struct_.fields:
        if version not in f.versions:
            continue
        if f.struct is not None:
            v = sample(f.struct, version, depth + 1) if depth < 6 else None
            out[f.name] = [v] if f.is_array else v
            if v is None:
                out[f.name] = f.default(version)
            continue
        t = f.elem
        v = {"bool": True, "int8": 3, "int16": 7, "uint16": 9, "int32": 11, "uint32": 13,
             "int64": 17, "float64": 1.5, "string": "s", "bytes": b"b", "records": b"r",
             "uuid": sc.Uuid(bytes(range(16)))}[t]
        out[f.name] = [v] if f.is_array else v
    return out


def versions(msg):
    return range(msg.valid.lo, msg.valid.hi + 1)


@pytest.mark.parametrize("name", sorted(n for n, m in OURS.by_name.items()
                                         if m.kind in ("request", "response")))
def test_round_trip_every_version(name):
    msg = OURS.by_name[name]
    for v in versions(msg):
        flexible = msg.is_flexible(v)
        for value in (msg.root.defaults(v), sample(msg.root, v)):
            raw = sc.encode_struct(msg.root, value, v, flexible)
            assert sc.decode_struct(sc.Reader(raw), msg.root, v, flexible) == value, (name, v)


@pytest.mark.skipif(not os.path.exists(JAR), reason="Kafka 4.4.0 jars not installed")
def test_same_bytes_as_kafka_schemas():
    theirs = sc.Schemas.from_jar(JAR)
    checked = 0
    for name, msg in OURS.by_name.items():
        if msg.kind not in ("request", "response"):
            continue
        ref = theirs.by_name[name]
        for v in versions(msg):
            value = sample(msg.root, v)
            ours = sc.encode_struct(msg.root, value, v, msg.is_flexible(v))
            decoded = sc.decode_struct(sc.Reader(ours), ref.root, v, ref.is_flexible(v))
            again = sc.encode_struct(ref.root, decoded, v, ref.is_flexible(v))
            assert again == ours, f"{name} v{v}: our schema and Kafka's encode differently"
            checked += 1
    assert checked > 500


def test_request_frame_round_trip_and_headers():
    # v1 header (non-flexible Metadata v8) and v2 header (flexible Metadata v12).
    for version in (8, 12):
        frame = sc.encode_request(OURS, 3, version, {"Topics": None}, 77, client_id="me")
        key, ver, corr, client, body = sc.decode_request(OURS, frame[4:])
        assert (key, ver, corr, client) == (3, version, 77, "me")
        assert body["Topics"] is None


def test_api_versions_response_uses_header_v0():
    body = sc.encode_body(OURS, 18, 3, {"ErrorCode": 0, "ApiKeys": [
        {"ApiKey": 18, "MinVersion": 0, "MaxVersion": 4}]}, kind="response")
    payload = (5).to_bytes(4, "big") + body  # no tagged-field byte after the correlation id
    corr, resp = sc.decode_response(OURS, 18, 3, payload)
    assert corr == 5 and resp["ApiKeys"][0]["MaxVersion"] == 4


def test_record_batch_view():
    raw = sc.record_batch([(b"k", b"v", [("h", b"x")]), (None, b"w")], base_offset=5)
    (batch,) = sc.decode_record_batches(raw + raw[:20])[:1]
    assert batch["crcValid"] and batch["baseOffset"] == 5 and batch["recordCount"] == 2
    assert batch["records"][0] == {"offsetDelta": 0, "timestampDelta": 0, "key": b"k",
                                   "value": b"v", "headers": [["h", b"x"]]}
    assert sc.decode_record_batches(raw + raw[:20])[1] == {"partial": 20,
                                                            "baseOffset": 5,
                                                            "batchLength": len(raw) - 12}


def test_schema_files_exist():
    assert len(glob.glob(os.path.join(sc.SCHEMA_DIR, "*.json"))) > 100
