"""Checkers: pure functions from a history (a list of operation dicts, see history.py) to a list
of anomalies, each a dict with a "kind" and the details that show it. No broker, no clock.

The operations they read (recorded by workloads.py):
  send       invoke {topic, value} -> ok {partition, offset} | fail | info {error}
             values are "<writer>:<seq>", seq increasing per writer
  poll       ok {group, topic, partition, offset, value, isolation}: one record a consumer got
  assign     ok {group, partitions: [[topic, p, start_offset_or_null], ...]}: a consumer's
             positions were (re)set, so its offsets may start again lower
  revoke     ok {group, partitions, lost, member}: a group consumer's partitions were taken
             away (lost: its session ended without the coordinator saying so)
  stop       ok: the harness stopped a group consumer (it closes after this)
  commit     invoke {group, offsets: {"topic/p": next_offset}} -> ok | fail | info
  committed  ok {group, offsets: {"topic/p": next_offset}}: what the broker said is committed
  txn        invoke {txn, group, inputs: [[topic, p, offset, value], ...], outputs: [value, ...],
             offsets: {"topic/p": next_offset}} recorded just before commit_transaction ->
             ok (committed) | fail (aborted) | info (unknown); outputs are
             "copy(<input value>)@<txn>"
  read       ok {role, topic, isolation, records: {"p": [[offset, value], ...]}}: a final read
             of a whole topic after the faults healed; role "queue", "input" or "output"

Kinds: lost, moved, duplicate, out-of-order, unread, aborted-read, uncommitted-read,
phantom-read, lost-copy, duplicate-copy, offset-backwards, committed-backwards, skip,
broker-crash, broker-exited-on-disk-full (from the nemesis's "crash" and "fault" records),
client-crash, client-stuck (a client thread that did not stop when told, with its stack),
member-unassigned (a group consumer left without partitions while it kept polling)."""
import re

from .history import FAIL, INFO, INVOKE, OK

COPY = re.compile(r"^copy\((?P<src>.*)\)@(?P<txn>[^@()]+)$")
MAX_LISTED = 20


def tp_key(topic, partition):
    return f"{topic}/{partition}"


def split_tp(key):
    topic, p = key.rsplit("/", 1)
    return topic, int(p)


def writer_seq(value):
    """("producer-0", 17) for "producer-0:17"; None for anything else."""
    if not isinstance(value, str) or ":" not in value:
        return None
    w, s = value.rsplit(":", 1)
    return (w, int(s)) if s.isdigit() else None


def parse_copy(value):
    """(input value, txn id) for a copier output value, else None."""
    m = COPY.match(value) if isinstance(value, str) else None
    return (m["src"], m["txn"]) if m else None


def final_reads(ops):
    """{(topic, isolation): {partition: [(offset, value), ...]}} from the last read of each."""
    out = {}
    for op in ops:
        if op["f"] == "read" and op["type"] == OK:
            out[(op["topic"], op["isolation"])] = {
                int(p): [(o, v) for o, v in recs] for p, recs in op["records"].items()}
    return out


def read_for(ops, topic, reads=None):
    """The final read of `topic`, preferring read_uncommitted (everything in the log).
    `reads`: final_reads(ops) when already computed (it walks the whole history)."""
    reads = final_reads(ops) if reads is None else reads
    return reads.get((topic, "read_uncommitted")) or reads.get((topic, "read_committed"))


def read_roles(ops):
    return {op["role"]: op["topic"] for op in ops if op["f"] == "read" and op["type"] == OK}


def _completions(ops, f):
    """(invoke, completion) pairs of operation `f`; completion is None if never completed."""
    invokes, done = {}, {}
    for op in ops:
        if op["f"] != f:
            continue
        if op["type"] == INVOKE:
            invokes[op["index"]] = op
        elif "invoke_index" in op:
            done[op["invoke_index"]] = op
    return [(inv, done.get(i)) for i, inv in invokes.items()]


def _anomaly(kind, **details):
    d = {"kind": kind}
    d.update(details)
    return d


# ---- the log: lost, duplicated, reordered -------------------------------------------------

def check_lost(ops):
    """Every acknowledged send is in the final read of its topic, at the partition and offset
    the broker acknowledged."""
    found = []
    positions = {}
    reads = final_reads(ops)
    read_topics = {topic for topic, _ in reads}
    for (topic, _), parts in reads.items():
        for p, recs in parts.items():
            for o, v in recs:
                positions.setdefault((topic, v), (p, o))
    for inv, done in _completions(ops, "send"):
        if done is None or done["type"] != OK:
            continue
        topic, value = inv["topic"], inv["value"]
        if topic not in read_topics:
            continue
        at = positions.get((topic, value))
        if at is None:
            found.append(_anomaly("lost", topic=topic, value=value, partition=done["partition"],
                                  offset=done["offset"], acked_at=done["time"]))
        elif at != (done["partition"], done["offset"]):
            found.append(_anomaly("moved", topic=topic, value=value,
                                  acked=[done["partition"], done["offset"]], found=list(at)))
    return found


def check_duplicates(ops):
    """No value is in the log twice, and no consumer got one value from two positions
    (getting the same position again after a rebalance or restart is at-least-once, not a
    duplicate)."""
    found, seen_dup = [], set()
    for (topic, iso), parts in final_reads(ops).items():
        where = {}
        for p, recs in parts.items():
            for o, v in recs:
                where.setdefault(v, []).append([p, o])
        for v, pos in where.items():
            if len(pos) > 1 and (topic, v) not in seen_dup:
                seen_dup.add((topic, v))
                found.append(_anomaly("duplicate", topic=topic, value=v, positions=pos,
                                      seen_by=f"final read ({iso})"))
    polled = {}
    for op in ops:
        if op["f"] == "poll" and op["type"] == OK:
            polled.setdefault((op["topic"], op["value"]), {})[
                (op["partition"], op["offset"])] = op["process"]
    for (topic, v), pos in polled.items():
        if len(pos) > 1 and (topic, v) not in seen_dup:
            seen_dup.add((topic, v))
            found.append(_anomaly("duplicate", topic=topic, value=v,
                                  positions=[[p, o, who] for (p, o), who in sorted(pos.items())],
                                  seen_by="consumers"))
    return found


def _order_key(value):
    """The (writer, seq) a record's position must respect: a plain value's own, a copy's
    input's (the copier writes copies in the order it read its inputs)."""
    c = parse_copy(value)
    return writer_seq(c[0] if c else value)


def check_order(ops):
    """Within each partition of each final read, every writer's values are in the order it
    sent them (the idempotent producer's guarantee), copies in the order of their inputs."""
    found = []
    reads = final_reads(ops)
    for (topic, iso), parts in reads.items():
        if iso == "read_uncommitted" and (topic, "read_committed") in reads \
                and any(parse_copy(v) for recs in parts.values() for _, v in recs):
            continue  # aborted copies are out of order by design; checked read_committed
        for p, recs in parts.items():
            last = {}
            for o, v in recs:
                ws = _order_key(v)
                if ws is None:
                    continue
                w, s = ws
                if w in last and s <= last[w][1]:
                    found.append(_anomaly("out-of-order", topic=topic, partition=p, writer=w,
                                          earlier=[last[w][0], last[w][2]], later=[o, v]))
                last[w] = (o, s, v)
    return found


def check_unread(ops):
    """Every acknowledged value of the queue reached the consumer group."""
    roles = read_roles(ops)
    topic = roles.get("queue")
    if topic is None:
        return []
    polled = {op["value"] for op in ops
              if op["f"] == "poll" and op["type"] == OK and op["topic"] == topic}
    missing = [(inv["value"], done["partition"], done["offset"])
               for inv, done in _completions(ops, "send")
               if done is not None and done["type"] == OK and inv["topic"] == topic
               and inv["value"] not in polled]
    if not missing:
        return []
    return [_anomaly("unread", topic=topic, count=len(missing),
                     first=[list(m) for m in sorted(missing, key=lambda m: (m[1], m[2]))[:MAX_LISTED]])]


# ---- transactions --------------------------------------------------------------------------

def txn_outcomes(ops):
    """{txn id: (invoke op, completion op or None)}."""
    return {inv["txn"]: (inv, done) for inv, done in _completions(ops, "txn")}


def check_transactions(ops):
    """read_committed never shows an output of an aborted transaction, of one not yet asked to
    commit, or of a transaction nobody ran."""
    found = []
    txns = txn_outcomes(ops)
    if not txns:
        return found

    def judge(value, t, where, extra):
        c = parse_copy(value)
        if c is None:
            return
        inv, done = txns.get(c[1], (None, None))
        if inv is None:
            found.append(_anomaly("phantom-read", value=value, seen_by=where, **extra))
        elif done is not None and done["type"] == FAIL:
            found.append(_anomaly("aborted-read", value=value, txn=c[1], seen_by=where,
                                  aborted_at=done["time"], error=done.get("error"), **extra))
        elif t is not None and t < inv["time"]:
            found.append(_anomaly("uncommitted-read", value=value, txn=c[1], seen_by=where,
                                  read_at=t, commit_invoked_at=inv["time"], **extra))

    for op in ops:
        if op["f"] == "poll" and op["type"] == OK and op.get("isolation") == "read_committed":
            judge(op["value"], op["time"], op["process"],
                  {"partition": op["partition"], "offset": op["offset"]})
    for (topic, iso), parts in final_reads(ops).items():
        if iso != "read_committed":
            continue
        for p, recs in parts.items():
            for o, v in recs:
                judge(v, None, "final read", {"partition": p, "offset": o})
    return found


def check_exactly_once(ops):
    """Each input value has exactly one copy visible to read_committed in the output."""
    roles = read_roles(ops)
    if "input" not in roles or "output" not in roles:
        return []
    reads = final_reads(ops)
    inputs = read_for(ops, roles["input"], reads)
    outputs = reads.get((roles["output"], "read_committed"))
    if inputs is None or outputs is None:
        return []
    copies = {}
    for p, recs in outputs.items():
        for o, v in recs:
            c = parse_copy(v)
            if c:
                copies.setdefault(c[0], []).append([p, o, c[1]])
    found, lost = [], []
    for p, recs in inputs.items():
        for o, v in recs:
            n = copies.get(v, [])
            if not n:
                lost.append([p, o, v])
            elif len(n) > 1:
                found.append(_anomaly("duplicate-copy", value=v, input=[p, o], copies=n))
    if lost:
        found.append(_anomaly("lost-copy", count=len(lost), first=lost[:MAX_LISTED]))
    return found


# ---- consumer positions --------------------------------------------------------------------

def _commits(ops):
    """Acknowledged commits as (completion time, group, {"topic/p": offset}): plain commits and
    committed transactions' offsets."""
    out = []
    for f in ("commit", "txn"):
        for inv, done in _completions(ops, f):
            if done is not None and done["type"] == OK and inv.get("offsets"):
                out.append((done["time"], inv["group"], inv["offsets"]))
    return out


def check_offsets(ops):
    """A consumer's offsets only go forward between (re)assignments, and the broker never
    answers a committed offset below one it acknowledged earlier."""
    found = []
    last = {}
    for op in ops:
        if op["type"] != OK:
            continue
        if op["f"] == "assign":
            for key in [k for k in last if k[0] == op["process"]]:
                del last[key]
        elif op["f"] == "poll":
            key = (op["process"], op["topic"], op["partition"])
            if key in last and op["offset"] <= last[key]:
                found.append(_anomaly("offset-backwards", process=op["process"],
                                      topic=op["topic"], partition=op["partition"],
                                      previous=last[key], next=op["offset"], at=op["time"]))
            last[key] = op["offset"]
    commits = _commits(ops)
    for op in ops:
        if op["f"] != "committed" or op["type"] != OK:
            continue
        asked_at = op.get("invoked_at", op["time"])
        for key, offset in op["offsets"].items():
            if offset is None or offset < 0:
                offset = -1
            earlier = [(c[2][key], c[0]) for c in commits
                       if c[1] == op["group"] and key in c[2] and c[0] < asked_at]
            if earlier and offset < max(earlier)[0]:
                best = max(earlier)
                found.append(_anomaly("committed-backwards", group=op["group"], partition=key,
                                      acknowledged=best[0], acknowledged_at=best[1],
                                      answered=offset, answered_at=op["time"],
                                      process=op["process"]))
    return found


def check_skips(ops):
    """Below the highest committed offset of a group, every record in the log was delivered to
    some consumer of that group: committing past a record it never got is skipping it."""
    found = []
    high = {}
    for _, group, offsets in _commits(ops):
        for key, off in offsets.items():
            high[(group, key)] = max(high.get((group, key), 0), off)
    got = {}
    for op in ops:
        if op["type"] == OK and op["f"] == "poll" and op.get("group"):
            got.setdefault((op["group"], tp_key(op["topic"], op["partition"])), set()).add(
                op["offset"])
    reads = final_reads(ops)
    for (group, key), h in sorted(high.items()):
        topic, p = split_tp(key)
        log = read_for(ops, topic, reads)
        if log is None:
            continue
        missing = [o for o, _ in log.get(p, []) if o < h and o not in got.get((group, key), ())]
        if missing:
            found.append(_anomaly("skip", group=group, partition=key, committed=h,
                                  count=len(missing), first=missing[:MAX_LISTED]))
    return found


def check_broker(ops):
    """The broker process stayed up unless a fault killed it: no crash, and a full disk under
    one of two log dirs takes that dir offline, not the node."""
    found = []
    for op in ops:
        if op["f"] == "crash":
            found.append(_anomaly("broker-crash", at=op["time"], exit_code=op.get("exit_code"),
                                  log_tail=op.get("log_tail")))
        elif op["f"] == "client-crash":
            found.append(_anomaly("client-crash", process=op["process"], error=op.get("error")))
        elif op["f"] == "stuck":
            found.append(_anomaly("client-stuck", process=op["process"], stack=op.get("stack")))
        elif op["f"] == "fault" and op["type"] == OK and op.get("up_while_full") is False:
            found.append(_anomaly("broker-exited-on-disk-full", at=op["time"],
                                  exit_code=op.get("exit_code")))
    return found


# A queue consumer without partitions for this long (a rebalance waits at most the members'
# rebalance timeout, 60 s) has been left out of its group.
UNASSIGNED_S = 120


def check_unassigned(ops):
    """A group consumer that lost its partitions (revoke, or lost: `lost` true) and got none
    back for UNASSIGNED_S before the harness stopped it (f "stop") or the history ended: the
    member was left out of its group, by its coordinator or by its own client, while it kept
    polling; not a consumer the harness stopped, which `unread` alone cannot tell apart. Its
    member id and the client errors it saw since are in the anomaly."""
    found = []
    end = max((op["time"] for op in ops), default=0)
    revoked, stopped, errors = {}, {}, {}
    for op in ops:
        proc = op["process"]
        if proc in stopped:
            continue  # closing after the harness stopped it revokes too
        if op["f"] == "stop" and op["type"] == OK:
            stopped[proc] = op["time"]
        elif op["f"] == "assign" and op["type"] == OK:
            revoked.pop(proc, None)
        elif op["f"] == "revoke" and op["type"] == OK and op.get("group"):
            if proc not in revoked:
                revoked[proc] = op
                errors[proc] = []
        elif op["f"] in ("client-error", "consume-error") and proc in revoked:
            errors[proc].append(op.get("error"))
    for proc, op in sorted(revoked.items()):
        until = stopped.get(proc, end)
        if until - op["time"] > UNASSIGNED_S:
            errs = errors[proc]
            found.append(_anomaly("member-unassigned", process=proc, group=op["group"],
                                  since=op["time"], seconds=round(until - op["time"], 1),
                                  lost=op.get("lost"), member=op.get("member"),
                                  errors_since=len(errs), last_errors=errs[-5:]))
    return found


CHECKERS = (check_broker, check_unassigned, check_lost, check_duplicates, check_order, check_unread, check_transactions,
            check_exactly_once, check_offsets, check_skips)


def check_all(ops):
    """Every checker's anomalies, in one list."""
    out = []
    for checker in CHECKERS:
        out.extend(checker(ops))
    return out
