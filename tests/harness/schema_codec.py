"""A Kafka protocol codec driven by JSON message schemas (Kafka's schema shape).

It reads the project's schemas/messages/*.json (or any directory / jar of schemas in the same
shape, e.g. Kafka 4.4.0's common/message/*.json inside kafka-clients-4.4.0.jar) and encodes any
request and decodes any response of any version the schema declares:

- field presence by `versions`, nullability by `nullableVersions`, tagged fields by
  `taggedVersions` / `tag` (written only when they differ from their default, as Kafka does);
- flexible versions (`flexibleVersions`): compact strings, bytes and arrays (unsigned varint
  length + 1), a tagged-field section closing every struct;
- nested structs (inline `fields`) and `commonStructs`, arrays of structs and of scalars,
  nullable structs (an int8 presence marker), `records` kept as raw bytes (see
  `decode_record_batches` for a structured view);
- request header v1 (non-flexible) / v2 (flexible; the client id stays a non-compact string)
  and response header v0 / v1 (ApiVersions answers always use v0).

Values are plain Python: a struct is a dict keyed by the schema's field names (in schema order),
an array a list, a uuid a `Uuid` (16 bytes, shown as Kafka shows topic ids), bytes and records
`bytes`. Encoding takes the same shape; a field left out of a request dict gets its default.
Unknown tagged fields met while decoding are kept under "_unknown_tags" ({tag: bytes}).
"""
import base64
import glob
import json
import os
import struct
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA_DIR = os.path.join(ROOT, "schemas", "messages")

SCALARS = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string",
           "bytes", "records", "uuid"}


class Uuid(bytes):
    """16 raw bytes; repr/str are Kafka's URL-safe base64 without padding."""

    def __new__(cls, raw=b"\0" * 16):
        if isinstance(raw, str):
            raw = base64.urlsafe_b64decode(raw + "==")
        if len(raw) != 16:
            raise ValueError("a uuid is 16 bytes")
        return super().__new__(cls, raw)

    def __repr__(self):
        return base64.urlsafe_b64encode(bytes(self)).decode().rstrip("=")

    __str__ = __repr__

    @property
    def is_zero(self):
        return not any(self)


ZERO_UUID = Uuid()


class CodecError(ValueError):
    pass


# ---- version ranges ------------------------------------------------------------------------

class Versions:
    """A schema version range: "none", "N", "N+", "N-M"."""

    def __init__(self, text):
        text = (text or "none").strip()
        if text == "none":
            self.lo, self.hi = 1, 0
        elif text.endswith("+"):
            self.lo, self.hi = int(text[:-1]), 1 << 15
        elif "-" in text:
            lo, hi = text.split("-")
            self.lo, self.hi = int(lo), int(hi)
        else:
            self.lo = self.hi = int(text)
        self.text = text

    def __contains__(self, v):
        return self.lo <= v <= self.hi

    def __repr__(self):
        return self.text


# ---- schema model --------------------------------------------------------------------------

def _strip_comments(text):
    out = []
    for line in text.splitlines():
        in_str = False
        for i, ch in enumerate(line):
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                in_str = not in_str
            if not in_str and line[i:i + 2] == "//":
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


class Field:
    def __init__(self, spec, structs, msg_flexible):
        self.name = spec["name"]
        self.type = spec["type"]
        self.versions = Versions(spec.get("versions") or spec.get("taggedVersions"))
        self.nullable = Versions(spec.get("nullableVersions", "none"))
        self.tagged = Versions(spec.get("taggedVersions", "none"))
        self.tag = spec.get("tag")
        # A per-field override (RequestHeader.ClientId stays a plain string in v2).
        self.flexible = (Versions(spec["flexibleVersions"]) if "flexibleVersions" in spec
                         else msg_flexible)
        d = spec.get("default")
        # Kafka's own files sometimes give a default as a JSON number or boolean.
        self.default_text = str(d).lower() if isinstance(d, bool) else (
            None if d is None else str(d))
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.struct = None
        if self.elem not in SCALARS:
            if "fields" in spec:
                self.struct = Struct(self.elem, spec["fields"], structs, msg_flexible)
                structs.setdefault(self.elem, self.struct)
            else:
                self.struct = structs.get(self.elem)  # a commonStruct: resolved later

    def resolve(self, structs):
        if self.elem not in SCALARS and self.struct is None:
            if self.elem not in structs:
                raise CodecError(f"unknown struct type {self.elem}")
            self.struct = structs[self.elem]
        if self.struct is not None and self.struct is not getattr(self, "_resolved", None):
            self._resolved = self.struct
            self.struct.resolve(structs)

    def default(self, version):
        if self.is_array:
            return None if self.default_text == "null" else []
        if self.struct is not None:
            if self.default_text == "null" and version in self.nullable:
                return None
            return self.struct.defaults(version)
        d = self.default_text
        t = self.type
        if d == "null":
            return None
        if t == "bool":
            return d == "true"
        if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            if d is None or d == "":
                return 0
            return int(d, 16) if d.lower().startswith(("0x", "-0x")) else int(d)
        if t == "float64":
            return float(d) if d else 0.0
        if t == "string":
            return d or ""
        if t == "uuid":
            return ZERO_UUID
        if t in ("bytes", "records"):
            return None if t == "records" else b""
        raise CodecError(f"no default for {t}")


class Struct:
    def __init__(self, name, field_specs, structs, msg_flexible):
        self.name = name
        self.fields = [Field(f, structs, msg_flexible) for f in field_specs]
        self._resolving = False

    def resolve(self, structs):
        if self._resolving:
            return
        self._resolving = True
        for f in self.fields:
            f.resolve(structs)

    def defaults(self, version):
        return {f.name: f.default(version) for f in self.fields if version in f.versions}


class Message:
    def __init__(self, spec):
        self.name = spec["name"]
        self.api_key = spec.get("apiKey")
        self.kind = spec["type"]
        self.valid = Versions(spec.get("validVersions"))
        self.flexible_versions = Versions(spec.get("flexibleVersions", "none"))
        structs = {}
        for cs in spec.get("commonStructs", []):
            structs[cs["name"]] = Struct(cs["name"], cs["fields"], structs, self.flexible_versions)
        self.root = Struct(self.name, spec.get("fields", []), structs, self.flexible_versions)
        self.root.resolve(structs)
        for s in list(structs.values()):
            s.resolve(structs)

    def is_flexible(self, version):
        return version in self.flexible_versions


class Schemas:
    """All message schemas of one source, by name and by (api key, request|response)."""

    def __init__(self, messages):
        self.by_name = {m.name: m for m in messages}
        self.requests = {m.api_key: m for m in messages if m.kind == "request"}
        self.responses = {m.api_key: m for m in messages if m.kind == "response"}

    @classmethod
    def from_dir(cls, directory=SCHEMA_DIR):
        msgs = []
        for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
            with open(path) as f:
                msgs.append(Message(json.loads(_strip_comments(f.read()))))
        return cls(msgs)

    @classmethod
    def from_jar(cls, jar, prefix="common/message/"):
        msgs = []
        with zipfile.ZipFile(jar) as z:
            for name in z.namelist():
                if name.startswith(prefix) and name.endswith(".json"):
                    msgs.append(Message(json.loads(_strip_comments(z.read(name).decode()))))
        return cls(msgs)

    def request(self, api_key):
        return self.requests[api_key]

    def response(self, api_key):
        return self.responses[api_key]


# ---- primitive writer / reader -------------------------------------------------------------

def uvarint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v):
    return uvarint((v << 1) ^ (v >> 63))


_FMT = {"bool": ">?", "int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i",
        "uint32": ">I", "int64": ">q", "float64": ">d"}


class Reader:
    def __init__(self, data, pos=0):
        self.data = data
        self.pos = pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise CodecError(f"short data: need {n} bytes at {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(out)

    def fixed(self, t):
        fmt = _FMT[t]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise CodecError("varint too long")

    def varint(self):
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def remaining(self):
        return len(self.data) - self.pos


# ---- encoding ------------------------------------------------------------------------------

def _len_prefix(n, compact, null=False):
    """Length prefix of a string/bytes/array: compact = uvarint(n+1), 0 for null; else
    int16 for strings handled by the caller, int32 for arrays and bytes, -1 for null."""
    if compact:
        return uvarint(0 if null else n + 1)
    return struct.pack(">i", -1 if null else n)


def _encode_scalar(t, v, version, flexible, nullable, path):
    if t in _FMT:
        try:
            return struct.pack(_FMT[t], v)
        except struct.error as e:
            raise CodecError(f"{path}: {e} ({v!r})")
    if t == "uuid":
        return bytes(Uuid(v) if not isinstance(v, Uuid) else v)
    if t == "string":
        if v is None:
            if not nullable:
                raise CodecError(f"{path}: null for a non-nullable string")
            return uvarint(0) if flexible else struct.pack(">h", -1)
        b = v.encode() if isinstance(v, str) else bytes(v)
        return (uvarint(len(b) + 1) if flexible else struct.pack(">h", len(b))) + b
    if t in ("bytes", "records"):
        if v is None:
            if not nullable and t == "bytes":
                raise CodecError(f"{path}: null for non-nullable bytes")
            return _len_prefix(0, flexible, null=True)
        b = bytes(v)
        return _len_prefix(len(b), flexible) + b
    raise CodecError(f"{path}: unknown type {t}")


def _encode_value(field, v, version, flexible, path):
    nullable = version in field.nullable
    if field.is_array:
        if v is None:
            if not nullable:
                raise CodecError(f"{path}: null for a non-nullable array")
            return _len_prefix(0, flexible, null=True)
        out = [_len_prefix(len(v), flexible)]
        for i, item in enumerate(v):
            if field.struct is not None:
                out.append(encode_struct(field.struct, item, version, flexible, f"{path}[{i}]"))
            else:
                out.append(_encode_scalar(field.elem, item, version, flexible, False,
                                          f"{path}[{i}]"))
        return b"".join(out)
    if field.struct is not None:
        if nullable:
            if v is None:
                return struct.pack(">b", -1)
            return struct.pack(">b", 1) + encode_struct(field.struct, v, version, flexible, path)
        if v is None:
            raise CodecError(f"{path}: null for a non-nullable struct")
        return encode_struct(field.struct, v, version, flexible, path)
    return _encode_scalar(field.type, v, version, flexible, nullable, path)


def encode_struct(struct_, value, version, flexible, path=""):
    value = value or {}
    known = {f.name for f in struct_.fields}
    extra = set(value) - known - {"_unknown_tags"}
    if extra:
        raise CodecError(f"{path or struct_.name}: unknown field(s) {sorted(extra)}")
    out = []
    tagged = []
    for f in struct_.fields:
        if version not in f.versions:
            continue
        fflex = flexible and version in f.flexible
        p = f"{path}.{f.name}" if path else f.name
        v = value.get(f.name, f.default(version)) if f.name in value else f.default(version)
        if fflex and version in f.tagged:
            if v != f.default(version):
                tagged.append((f.tag, _encode_value(f, v, version, True, p)))
            continue
        out.append(_encode_value(f, v, version, fflex, p))
    if flexible:
        for tag, raw in (value.get("_unknown_tags") or {}).items():
            tagged.append((tag, raw))
        tagged.sort()
        out.append(uvarint(len(tagged)))
        for tag, raw in tagged:
            out.append(uvarint(tag) + uvarint(len(raw)) + raw)
    return b"".join(out)


# ---- decoding ------------------------------------------------------------------------------

def _decode_scalar(r, t, flexible, nullable):
    if t in _FMT:
        return r.fixed(t)
    if t == "uuid":
        return Uuid(r.take(16))
    if t == "string":
        if flexible:
            n = r.uvarint() - 1
        else:
            n = r.fixed("int16")
        if n < 0:
            return None
        raw = r.take(n)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return raw
    if t in ("bytes", "records"):
        n = r.uvarint() - 1 if flexible else r.fixed("int32")
        return None if n < 0 else r.take(n)
    raise CodecError(f"unknown type {t}")


def _decode_value(r, field, version, flexible):
    nullable = version in field.nullable
    if field.is_array:
        n = r.uvarint() - 1 if flexible else r.fixed("int32")
        if n < 0:
            return None
        if n > r.remaining():
            raise CodecError(f"{field.name}: array of {n} in {r.remaining()} bytes")
        if field.struct is not None:
            return [decode_struct(r, field.struct, version, flexible) for _ in range(n)]
        return [_decode_scalar(r, field.elem, flexible, False) for _ in range(n)]
    if field.struct is not None:
        if nullable:
            marker = r.fixed("int8")
            if marker < 0:
                return None
        return decode_struct(r, field.struct, version, flexible)
    return _decode_scalar(r, field.type, flexible, nullable)


def decode_struct(r, struct_, version, flexible):
    out = {}
    by_tag = {}
    for f in struct_.fields:
        if version not in f.versions:
            continue
        fflex = flexible and version in f.flexible
        if fflex and version in f.tagged:
            by_tag[f.tag] = f
            out[f.name] = f.default(version)
            continue
        try:
            out[f.name] = _decode_value(r, f, version, fflex)
        except CodecError as e:
            raise CodecError(f"{struct_.name}.{f.name}: {e}") from None
    if flexible:
        unknown = {}
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            raw = r.take(r.uvarint())
            f = by_tag.get(tag)
            if f is None:
                unknown[tag] = raw
            else:
                sub = Reader(raw)
                out[f.name] = _decode_value(sub, f, version, True)
        if unknown:
            out["_unknown_tags"] = unknown
    return out


# ---- messages and headers ------------------------------------------------------------------

API_VERSIONS_KEY = 18


def encode_request(schemas, api_key, version, body, correlation_id, client_id="kactor-diff"):
    """A whole request frame (4-byte size included): header v1 or v2, then the body."""
    msg = schemas.request(api_key)
    flexible = msg.is_flexible(version)
    cid = client_id.encode() if client_id is not None else None
    header = struct.pack(">hhi", api_key, version, correlation_id)
    header += struct.pack(">h", -1) if cid is None else struct.pack(">h", len(cid)) + cid
    if flexible:
        header += uvarint(0)
    payload = header + encode_struct(msg.root, body, version, flexible)
    return struct.pack(">i", len(payload)) + payload


def response_header_version(schemas, api_key, version):
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if schemas.response(api_key).is_flexible(version) else 0


def decode_response(schemas, api_key, version, payload):
    """(correlation_id, body dict) of a response payload (without its 4-byte size). Raises
    CodecError if the bytes do not parse or are not consumed exactly."""
    r = Reader(payload)
    corr = r.fixed("int32")
    if response_header_version(schemas, api_key, version) == 1:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.take(r.uvarint())
    msg = schemas.response(api_key)
    body = decode_struct(r, msg.root, version, msg.is_flexible(version))
    if r.remaining():
        raise CodecError(f"{msg.name} v{version}: {r.remaining()} trailing bytes")
    return corr, body


def decode_request(schemas, payload):
    """(api_key, version, correlation_id, client_id, body) of a request payload; the inverse of
    encode_request, used to check the codec on itself."""
    r = Reader(payload)
    api_key, version, corr = r.fixed("int16"), r.fixed("int16"), r.fixed("int32")
    n = r.fixed("int16")
    client = None if n < 0 else r.take(n).decode()
    msg = schemas.request(api_key)
    flexible = msg.is_flexible(version)
    if flexible:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.take(r.uvarint())
    body = decode_struct(r, msg.root, version, flexible)
    if r.remaining():
        raise CodecError(f"{msg.name} v{version}: {r.remaining()} trailing bytes")
    return api_key, version, corr, client, body


def encode_body(schemas, api_key, version, body, kind="request"):
    msg = schemas.request(api_key) if kind == "request" else schemas.response(api_key)
    return encode_struct(msg.root, body, version, msg.is_flexible(version))


def decode_body(schemas, api_key, version, raw, kind="response"):
    msg = schemas.request(api_key) if kind == "request" else schemas.response(api_key)
    r = Reader(raw)
    body = decode_struct(r, msg.root, version, msg.is_flexible(version))
    if r.remaining():
        raise CodecError(f"{msg.name} v{version}: {r.remaining()} trailing bytes")
    return body


# ---- record batches (v2) -------------------------------------------------------------------

def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def record_batch(records, base_offset=0, timestamp=1_700_000_000_000, producer_id=-1,
                 producer_epoch=-1, base_sequence=-1, transactional=False, control=False,
                 partition_leader_epoch=-1, gzip=False):
    """A v2 batch, uncompressed or (gzip=True) gzip-compressed. `records`: (key, value) or
    (key, value, headers) tuples, where headers is a list of (name str, value bytes)."""
    recs = b""
    for delta, rec in enumerate(records):
        key, value = rec[0], rec[1]
        headers = rec[2] if len(rec) > 2 else []
        body = b"\0" + varint(0) + varint(delta)
        body += varint(-1) if key is None else varint(len(key)) + key
        body += varint(-1) if value is None else varint(len(value)) + value
        body += varint(len(headers))
        for hk, hv in headers:
            hkb = hk.encode()
            body += varint(len(hkb)) + hkb
            body += varint(-1) if hv is None else varint(len(hv)) + hv
        recs += varint(len(body)) + body
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    if gzip:
        import gzip as gz
        recs = gz.compress(recs, mtime=0)
        attributes |= 1
    after_crc = struct.pack(">hiqqqhii", attributes, len(records) - 1, timestamp, timestamp,
                            producer_id, producer_epoch, base_sequence, len(records)) + recs
    head = struct.pack(">ibI", partition_leader_epoch, 2, crc32c(after_crc))
    body = head + after_crc
    return struct.pack(">qi", base_offset, len(body)) + body


def decode_record_batches(raw):
    """A structured view of a records field: a list of batches (dicts) with their header fields
    and, for uncompressed v2 batches, their records. A partial trailing batch (a fetch cut at
    max_bytes) is reported as {"partial": n_bytes}."""
    out = []
    pos = 0
    raw = bytes(raw or b"")
    while pos < len(raw):
        if len(raw) - pos < 12:
            out.append({"partial": len(raw) - pos})
            break
        base_offset, length = struct.unpack_from(">qi", raw, pos)
        if pos + 12 + length > len(raw) or length < 49:
            out.append({"partial": len(raw) - pos, "baseOffset": base_offset,
                        "batchLength": length})
            break
        b = raw[pos + 12:pos + 12 + length]
        ple, magic, crc = struct.unpack_from(">ibI", b, 0)
        (attrs, last_delta, first_ts, max_ts, pid, epoch, base_seq,
         count) = struct.unpack_from(">hiqqqhii", b, 9)
        batch = {"baseOffset": base_offset, "batchLength": length,
                 "partitionLeaderEpoch": ple, "magic": magic,
                 "crcValid": crc == crc32c(b[9:]), "attributes": attrs,
                 "lastOffsetDelta": last_delta, "firstTimestamp": first_ts,
                 "maxTimestamp": max_ts, "producerId": pid, "producerEpoch": epoch,
                 "baseSequence": base_seq, "recordCount": count}
        body_at = 9 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4
        payload = None
        if magic == 2 and attrs & 0x07 == 0:
            payload = b[body_at:]
        elif magic == 2 and attrs & 0x07 == 1:
            import gzip as gz
            payload = gz.decompress(b[body_at:])
            batch["compressedBytes"] = len(b) - body_at
        if payload is not None:
            r = Reader(payload)
            recs = []
            for _ in range(count):
                r.varint()  # record length
                r.take(1)  # attributes
                ts_delta, off_delta = r.varint(), r.varint()
                kl = r.varint()
                key = None if kl < 0 else r.take(kl)
                vl = r.varint()
                value = None if vl < 0 else r.take(vl)
                headers = []
                for _ in range(r.varint()):
                    hk = r.take(r.varint()).decode()
                    hl = r.varint()
                    headers.append([hk, None if hl < 0 else r.take(hl)])
                recs.append({"offsetDelta": off_delta, "timestampDelta": ts_delta,
                             "key": key, "value": value, "headers": headers})
            batch["records"] = recs
        out.append(batch)
        pos += 12 + length
    return out
