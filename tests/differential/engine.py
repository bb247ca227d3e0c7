"""The differential engine: the case registry, running one case on both brokers, normalising
what legitimately differs, comparing field by field, matching the known differences, and the
report.

Normalisation (applied to each broker's responses of one case, in traversal order):
- server-generated identities become placeholders numbered by first appearance within the case
  ("<uuid#1>", "<member#2>", "<pid#1>", ...), so that equal ids stay equal and different ids
  stay different on each side: non-zero uuids, member ids (also JoinGroup's LeaderId), producer
  ids, fetch session ids, cluster ids, ports, log dir paths;
- wall-clock times (any integer within two days of now, read as epoch milliseconds, also as
  13 digits inside a string) become "<now>"; throttle times "<throttle>"; disk sizes of a log
  dir "<bytes>";
- per-API masks (`MASKS`) for values that depend on each broker's own metadata log (offsets,
  epochs of the metadata quorum, the finalized features epoch);
- `records` fields are decoded into batches (header fields and uncompressed records);
- arrays whose order Kafka does not define (hash-map order there) are sorted (`UNORDERED`).
"""
import fnmatch
import re
import threading
import time
import traceback
from dataclasses import dataclass, field

from harness import schema_codec as sc

from .client import API_KEYS, Client, SetupError
from .errors import ERROR_NAMES

CASES = []


@dataclass
class Case:
    name: str  # "<Api>/<what>"
    api: str
    fn: object
    doc: str = ""


def case(api, what):
    """Registers a case: `@case("OffsetCommit", "unknown-topic") def _(c): ...`."""
    def register(fn):
        name = f"{api}/{what}"
        if any(c.name == name for c in CASES):
            raise ValueError(f"duplicate case {name}")
        CASES.append(Case(name, api, fn, (fn.__doc__ or "").strip()))
        return fn
    return register


# ---- normalisation -------------------------------------------------------------------------

ID_STRING_KEYS = {"MemberId": "member", "ClusterId": "cluster", "LogDir": "logdir",
                  "Path": "logdir"}
ID_INT_KEYS = {"ProducerId": "pid", "producerId": "pid", "SessionId": "session",
               "Port": "port"}
# Per API: field names whose values come from each broker's own metadata log or disk.
MASKS = {
    "ApiVersions": {"FinalizedFeaturesEpoch"},
    "DescribeQuorum": {"HighWatermark", "LogEndOffset", "LeaderEpoch"},
    "DescribeLogDirs": {"TotalBytes", "UsableBytes"},
    "BrokerHeartbeat": set(),
}
# Per API: arrays (by field name) whose element order Kafka leaves to a hash map, sorted by
# the listed keys before comparing.
UNORDERED = {
    "DeleteGroups": {"Results": ("GroupId",)},
    "DescribeGroups": {"Groups": ("GroupId",)},
    "ConsumerGroupDescribe": {"Groups": ("GroupId",), "Members": ("MemberId",)},
    "DescribeLogDirs": {"Topics": ("Name",), "Partitions": ("PartitionIndex",)},
    "DeleteRecords": {"Topics": ("Name",)},
    "DeleteTopics": {"Responses": ("Name",)},
    "Produce": {"Responses": ("Name",)},
    # Kafka's ClientQuotasImage is a hash map whose capacity depends on its history.
    "DescribeClientQuotas": {"Entries": ("Entity",), "Values": ("Key",)},
}
# Per API: arrays (by field name) compared by an identity key instead of by position, so that
# one missing or extra element is one difference ("ApiKeys[ApiKey=17]"), not a shifted tail.
KEYED = {
    "ApiVersions": {"ApiKeys": "ApiKey", "SupportedFeatures": "Name",
                    "FinalizedFeatures": "Name"},
    "DescribeConfigs": {"Configs": "Name"},
    "CreateTopics": {"Configs": "Name"},
}

NOW_WINDOW_MS = 2 * 24 * 3600 * 1000
NOW_IN_TEXT = re.compile(r"(?<!\d)\d{13}(?!\d)")


class Normaliser:
    def __init__(self, api):
        self.api = api
        self.maps = {}
        self.now_ms = int(time.time() * 1000)

    def placeholder(self, cat, value):
        m = self.maps.setdefault(cat, {})
        if value not in m:
            m[value] = f"<{cat}#{len(m) + 1}>"
        return m[value]

    def value(self, v, key=None, api=None):
        api = api or self.api
        if key in MASKS.get(api, ()):
            return "<masked>"
        if isinstance(v, dict):
            return {k: self.value(x, k, api) for k, x in v.items()}
        if isinstance(v, list):
            order = UNORDERED.get(api, {}).get(key)
            if order:
                v = sorted(v, key=lambda e: tuple(str(e.get(k)) if isinstance(e, dict) else str(e)
                                                  for k in order))
            kf = KEYED.get(api, {}).get(key)
            if kf and v and all(isinstance(e, dict) and kf in e for e in v):
                return {f"[{kf}={e[kf]}]": self.value(e, key, api) for e in v}
            return [self.value(x, key, api) for x in v]
        if isinstance(v, sc.Uuid):
            return "<zero-uuid>" if v.is_zero else self.placeholder("uuid", bytes(v))
        if key in ("Records", "records") and isinstance(v, (bytes, bytearray)):
            batches = sc.decode_record_batches(v)
            for b in batches:
                if "compressedBytes" in b:
                    # Sizes of a compressed batch are the compressor's (zlib settings), not
                    # the protocol's: its records are compared decompressed instead.
                    b["batchLength"] = b["compressedBytes"] = "<compressed>"
            return self.value(batches, "batches", api)
        if key == "ThrottleTimeMs":
            return "<throttle>"
        if isinstance(v, str):
            cat = ID_STRING_KEYS.get(key)
            if key == "Leader" and api == "JoinGroup":
                cat = "member"
            if cat and v:
                return self.placeholder(cat, v)
            # Wall-clock times inside messages (Kafka's timestamp-range errors name the
            # broker's clock).
            return NOW_IN_TEXT.sub(lambda m: "<now>" if abs(int(m.group()) - self.now_ms)
                                   < NOW_WINDOW_MS else m.group(), v)
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            cat = ID_INT_KEYS.get(key)
            if cat and (v > 0 or (cat == "pid" and v == 0)):
                return self.placeholder(cat, v)
            if abs(v - self.now_ms) < NOW_WINDOW_MS:
                return "<now>"
            return v
        if isinstance(v, (bytes, bytearray)):
            return bytes(v)
        return v


# ---- comparison ----------------------------------------------------------------------------

ABSENT = "<absent>"


@dataclass
class Diff:
    path: str
    kactor: object
    kafka: object


@dataclass
class CaseResult:
    case: Case
    diffs: list = field(default_factory=list)
    fields_total: int = 0
    fields_same: int = 0
    errors: dict = field(default_factory=dict)
    seconds: float = 0.0
    normalised: dict = field(default_factory=dict)  # target -> {label: response}

    @property
    def identical(self):
        return not self.diffs


def compare(a, b, path, out, counts):
    if isinstance(a, dict) and isinstance(b, dict):
        keys = list(a) + [k for k in b if k not in a]
        for k in keys:
            sub = f"{path}{k}" if k.startswith("[") else f"{path}.{k}" if path else k
            compare(a.get(k, ABSENT), b.get(k, ABSENT), sub, out, counts)
        return
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            compare(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT,
                    f"{path}[{i}]", out, counts)
        return
    counts[0] += 1
    if a == b:
        counts[1] += 1
    else:
        out.append(Diff(path, a, b))


def run_side(c_fn, client):
    try:
        c_fn(client)
    except SetupError as e:
        client.check("<setup failed>", str(e).split(": ", 1)[-1][:300])
    except Exception as e:  # a decode error or a crash of the case: a difference in itself
        client.check("<error>", f"{type(e).__name__}: {e}"[:300])
        client.traceback = traceback.format_exc()
    finally:
        client.close()


def run_case(c, ports):
    """Runs case `c` on both brokers at once (one thread each); returns a CaseResult."""
    t0 = time.monotonic()
    clients = {t: Client(t, p) for t, p in ports.items()}
    for cl in clients.values():
        # Names the case creates (topics, groups) are the same on both brokers.
        cl.slug = re.sub(r"[^A-Za-z0-9.-]+", "-", c.name.replace("/", ".")).lower()
    threads = [threading.Thread(target=run_side, args=(c.fn, cl), daemon=True)
               for cl in clients.values()]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    res = CaseResult(c)
    norm = res.normalised
    for t, cl in clients.items():
        n = Normaliser(c.api)
        norm[t] = {}
        for label, value in cl.checked:
            api = label.split(" ")[0]
            norm[t][label] = n.value(value, None, api if api in API_KEYS else c.api)
        if getattr(cl, "traceback", None):
            res.errors[t] = cl.traceback
    counts = [0, 0]
    compare(norm.get("kactor", {}), norm.get("kafka", {}), "", res.diffs, counts)
    res.fields_total, res.fields_same = counts
    res.seconds = time.monotonic() - t0
    return res


# ---- known differences ---------------------------------------------------------------------

def _glob(pattern):
    return re.compile("^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$")


def match_known(results, known):
    """Splits the diffs into (listed [(result, diff, entry)], unlisted [(result, diff)]) and
    returns the entries that matched nothing (stale)."""
    pats = [(e, _glob(e["case"]), _glob(e["path"])) for e in known]
    used = set()
    listed, unlisted = [], []
    for r in results:
        for d in r.diffs:
            for i, (e, cp, pp) in enumerate(pats):
                if cp.match(r.case.name) and pp.match(d.path):
                    listed.append((r, d, e))
                    used.add(i)
                    break
            else:
                unlisted.append((r, d))
    stale = [e for i, (e, _, _) in enumerate(pats) if i not in used]
    return listed, unlisted, stale


# ---- report --------------------------------------------------------------------------------

def show(v, key=""):
    if isinstance(v, (bytes, bytearray)):
        s = "b" + repr(bytes(v))[1:]
    else:
        s = repr(v)
    if isinstance(v, int) and not isinstance(v, bool) and key.endswith("ErrorCode"):
        s = f"{v} ({ERROR_NAMES.get(v, '?')})"
    return s if len(s) <= 240 else s[:237] + "..."


def summary(results, known=None, selected_apis=None):
    """The report text, plus (listed, unlisted, stale)."""
    known = known or []
    listed, unlisted, stale = match_known(results, known)
    status = {id(d): e["status"] for _, d, e in listed}
    lines = []
    by_api = {}
    for r in results:
        by_api.setdefault(r.case.api, []).append(r)
    lines.append("Differential run: kactor vs Apache Kafka 4.4.0 (identical cases / cases, "
                 "identical fields / fields, per API)")
    for api in sorted(by_api):
        rs = by_api[api]
        same = sum(r.identical for r in rs)
        ft = sum(r.fields_total for r in rs)
        fs = sum(r.fields_same for r in rs)
        lines.append(f"  {api:34s} {same:3d}/{len(rs):<3d}  fields {fs}/{ft}")
    n = len(results)
    same = sum(r.identical for r in results)
    ft = sum(r.fields_total for r in results)
    fs = sum(r.fields_same for r in results)
    lines.append("Differences (case | path | kactor | kafka | status):")
    for r in results:
        for d in r.diffs:
            st = status.get(id(d), "UNLISTED")
            key = d.path.rsplit(".", 1)[-1]
            lines.append(f"  {r.case.name} | {d.path} | {show(d.kactor, key)} | "
                         f"{show(d.kafka, key)} | {st}")
    if stale:
        lines.append("Listed differences that no longer occur (remove them from "
                     "known_differences.py):")
        for e in stale:
            lines.append(f"  {e['case']} | {e['path']}")
    lines.append(f"Share identical: {same}/{n} cases ({100.0 * same / max(n, 1):.1f}%), "
                 f"{fs}/{ft} fields ({100.0 * fs / max(ft, 1):.1f}%); "
                 f"{len(listed)} listed differences, {len(unlisted)} unlisted, "
                 f"{len(stale)} stale entries")
    return "\n".join(lines), (listed, unlisted, stale)


def suggest(unlisted):
    """known_differences.py entries for unlisted differences (status pending), to review."""
    out = []
    for r, d in unlisted:
        key = d.path.rsplit(".", 1)[-1]
        out.append("    dict(case=%r, path=%r,\n         kactor=%r, kafka=%r,\n"
                   "         status=\"pending\", reason=\"\"),"
                   % (r.case.name, d.path, show(d.kactor, key), show(d.kafka, key)))
    return "\n".join(out)


def select(cases, patterns):
    if not patterns:
        return list(cases)
    return [c for c in cases if any(fnmatch.fnmatchcase(c.name, p) or p in c.name
                                    for p in patterns)]
