"""One broker as a differential case sees it: raw requests encoded from the schemas, responses
decoded in full, and the setup steps cases share (topics, records, groups, transactions).

A case is a function `case(c)` called once with a `Client` on kactor and once on Kafka; the
responses it passes to `c.check(...)` (or sends with `c.call(..., check=True)`) are what is
compared. Setup requests are sent with `check=False`; they must succeed on both brokers and are
bounded in time (`wait_for`)."""
import socket
import struct
import time

from harness import schema_codec as sc

SCHEMAS = sc.Schemas.from_dir()

API_NAMES = {m.api_key: m.name[:-len("Request")] for m in SCHEMAS.requests.values()}
API_KEYS = {v: k for k, v in API_NAMES.items()}

CLOSED = "<connection closed without a response>"
NO_RESPONSE = "<no response within the timeout>"


class SetupError(AssertionError):
    pass


class Client:
    def __init__(self, target, port, timeout=15.0):
        self.target = target
        self.port = port
        self.timeout = timeout
        self.sock = None
        self.corr = 0
        self.checked = []  # [(label, value)]

    # ---- transport -----------------------------------------------------------------------
    def _connect(self):
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
            self.sock.settimeout(self.timeout)
        return self.sock

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def roundtrip(self, frame, expect_response=True):
        """Sends one frame; returns the response payload, or None if the broker closed the
        connection instead of answering (the socket is then reopened on the next call)."""
        s = self._connect()
        s.settimeout(self.timeout)
        try:
            s.sendall(frame)
            if not expect_response:
                return b""
            size = struct.unpack(">i", self._recv_exact(4))[0]
            return self._recv_exact(size)
        except (ConnectionError, BrokenPipeError, ConnectionResetError):
            self.close()
            return None
        except socket.timeout:
            self.close()
            return NO_RESPONSE

    # ---- requests ------------------------------------------------------------------------
    def call(self, api, version, body=None, check=False, label=None, acks_zero=False):
        """Encodes `body` as `api` (name or key) `version`, sends it, decodes the response.
        Returns the response body dict, or CLOSED. With check=True the response is compared."""
        key = API_KEYS[api] if isinstance(api, str) else api
        self.corr += 1
        frame = sc.encode_request(SCHEMAS, key, version, body or {}, self.corr)
        payload = self.roundtrip(frame, expect_response=not acks_zero)
        if payload is None:
            resp = CLOSED
        elif payload is NO_RESPONSE:
            resp = NO_RESPONSE
        elif acks_zero:
            resp = None
        else:
            corr, resp = sc.decode_response(SCHEMAS, key, version, payload)
            if corr != self.corr:
                raise AssertionError(f"correlation id {corr} != {self.corr}")
        if check:
            self.check(label or f"{API_NAMES[key]} v{version}", resp)
        return resp

    def call_raw(self, frame, decode_as=None, check=True, label="raw"):
        """Sends a hand-made frame; decodes the answer as `decode_as` = (api key, version)."""
        payload = self.roundtrip(frame)
        if payload is None:
            resp = CLOSED
        elif payload is NO_RESPONSE:
            resp = NO_RESPONSE
        elif decode_as is None:
            resp = payload
        else:
            _, resp = sc.decode_response(SCHEMAS, decode_as[0], decode_as[1], payload)
        if check:
            self.check(label, resp)
        return resp

    def check(self, label, value):
        labels = {lbl for lbl, _ in self.checked}
        base, n = label, 2
        while label in labels:
            label = f"{base} #{n}"
            n += 1
        self.checked.append((label, value))
        return value

    # ---- setup helpers (not compared; must succeed) -------------------------------------
    def wait_for(self, what, fn, timeout=20.0, interval=0.1):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            ok, last = fn()
            if ok:
                return last
            time.sleep(interval)
        raise SetupError(f"{self.target}: {what} not reached in {timeout}s: {last}")

    def create_topic(self, name, partitions=1, configs=None, wait=True):
        resp = self.call("CreateTopics", 7, {
            "Topics": [{"Name": name, "NumPartitions": partitions, "ReplicationFactor": 1,
                        "Assignments": [], "Configs": [{"Name": k, "Value": v}
                                                       for k, v in (configs or {}).items()]}],
            "timeoutMs": 30000, "validateOnly": False})
        err = resp["Topics"][0]["ErrorCode"]
        if err not in (0, 36):
            raise SetupError(f"{self.target}: create {name}: {resp}")
        if wait:
            self.wait_topic(name, partitions)
            self.wait_served(name, partitions)
        return resp["Topics"][0]["TopicId"]

    def wait_served(self, name, partitions=1):
        """Until every partition answers ListOffsets without error: Kafka's Metadata names a
        leader a moment before its replica manager has the partition (NOT_LEADER_OR_FOLLOWER
        from Produce, Fetch, OffsetForLeaderEpoch, no log in DescribeLogDirs until then)."""
        def served():
            r = self.call("ListOffsets", 9, {
                "ReplicaId": -1, "IsolationLevel": 0,
                "Topics": [{"Name": name, "Partitions": [
                    {"PartitionIndex": p, "CurrentLeaderEpoch": -1, "Timestamp": -1}
                    for p in range(partitions)]}]})
            errs = [p["ErrorCode"] for t in r["Topics"] for p in t["Partitions"]]
            return not any(errs), r
        self.wait_for(f"topic {name} served", served)

    def wait_848_topic(self, topic):
        """Until the group coordinator's own view of the metadata has `topic`: a throwaway
        KIP-848 member heartbeats until it is assigned partitions of it, then leaves. (Kafka's
        coordinator runs on a metadata image that lags its Metadata answers: a group joined
        right after a topic is created may get an empty assignment, by timing.)"""
        g, m = f"w.{topic}", "AAAAAAAAAAAAAAAAAAAAAQ"
        self.coordinator(g)
        epoch = 0

        def assigned():
            nonlocal epoch
            r = self.call("ConsumerGroupHeartbeat", 1, {
                "GroupId": g, "MemberId": m, "MemberEpoch": epoch, "RebalanceTimeoutMs": 45000,
                "SubscribedTopicNames": [topic], "TopicPartitions": [] if epoch == 0 else None})
            if r["ErrorCode"] != 0:
                raise SetupError(f"{self.target}: warm-up heartbeat: {r}")
            epoch = r["MemberEpoch"]
            a = r.get("Assignment")
            return bool(a and any(tp["Partitions"] for tp in a["TopicPartitions"])), r
        self.wait_for(f"group coordinator sees {topic}", assigned, interval=0.2)
        self.call("ConsumerGroupHeartbeat", 1, {"GroupId": g, "MemberId": m, "MemberEpoch": -1})

    def wait_topic(self, name, partitions=1):
        def ready():
            m = self.call("Metadata", 12, {"Topics": [{"TopicId": sc.ZERO_UUID, "Name": name}],
                                           "AllowAutoTopicCreation": False})
            t = m["Topics"][0]
            ok = (t["ErrorCode"] == 0 and len(t["Partitions"]) == partitions
                  and all(p["LeaderId"] >= 0 for p in t["Partitions"]))
            return ok, t
        return self.wait_for(f"topic {name} ready", ready)["TopicId"]

    def produce(self, topic, records, partition=0, batches=1, timestamp=1_700_000_000_000,
                transactional_id=None, **batch_kw):
        """Produces `batches` batches of `records` ((key, value) tuples) with acks=-1; returns
        the base offset of the last one."""
        base = None
        for _ in range(batches):
            batch = sc.record_batch(records, timestamp=timestamp, **batch_kw)

            def attempt():
                resp = self.call("Produce", 11, {
                    "TransactionalId": transactional_id, "Acks": -1,
                    "TimeoutMs": 10000,
                    "TopicData": [{"Name": topic, "PartitionData": [
                        {"Index": partition, "Records": batch}]}]})
                p = resp["Responses"][0]["PartitionResponses"][0]
                # Kafka answers NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE for a moment
                # after a topic is created (its transaction verification has no leader yet).
                if p["ErrorCode"] in (5, 6):
                    return False, resp
                if p["ErrorCode"] != 0:
                    raise SetupError(f"{self.target}: produce to {topic}: {resp}")
                return True, p
            base = self.wait_for(f"produce to {topic}", attempt, timeout=15)["BaseOffset"]
        return base

    def coordinator(self, key, key_type=0):
        """Waits until `key`'s coordinator is found and has loaded its partition of
        __consumer_offsets / __transaction_state (Kafka answers FindCoordinator before that,
        then NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for a while)."""
        def found():
            r = self.call("FindCoordinator", 6, {"KeyType": key_type, "CoordinatorKeys": [key]})
            c = r["Coordinators"][0]
            return c["ErrorCode"] == 0, c
        out = self.wait_for(f"coordinator for {key}", found, timeout=30)
        if key:
            def loaded():
                if key_type == 0:
                    r = self.call("DescribeGroups", 5, {"Groups": [key]})
                    err = r["Groups"][0]["ErrorCode"]
                elif key_type == 2:
                    # group:topicId:partition; any well-formed key tells the shard is loaded.
                    group, topic_id, partition = key.rsplit(":", 2)
                    r = self.call("ReadShareGroupStateSummary", 1, {
                        "GroupId": group, "Topics": [{"TopicId": sc.Uuid(topic_id),
                                                      "Partitions": [{"Partition": int(partition),
                                                                      "LeaderEpoch": 0}]}]})
                    err = r["Results"][0]["Partitions"][0]["ErrorCode"]
                else:
                    r = self.call("DescribeTransactions", 0, {"TransactionalIds": [key]})
                    err = r["TransactionStates"][0]["ErrorCode"]
                return err not in (14, 15, 16), r
            self.wait_for(f"coordinator for {key} loaded", loaded, timeout=30)
        return out

    def join_classic(self, group, topics=("t",), session_ms=30000, rebalance_ms=60000,
                     instance_id=None, protocol_type="consumer", sync=True):
        """One classic member joined (and synced, assigning itself everything): returns
        (member_id, generation)."""
        self.coordinator(group)
        meta = consumer_protocol_metadata(list(topics))
        req = {"GroupId": group, "SessionTimeoutMs": session_ms,
               "RebalanceTimeoutMs": rebalance_ms, "MemberId": "",
               "GroupInstanceId": instance_id, "ProtocolType": protocol_type,
               "Protocols": [{"Name": "range", "Metadata": meta}], "Reason": None}
        r = self.call("JoinGroup", 9, req)
        if isinstance(r, str):
            raise SetupError(f"{self.target}: join {group}: {r}")
        if r["ErrorCode"] == 79:  # MEMBER_ID_REQUIRED: join again with the id given
            req["MemberId"] = r["MemberId"]
            r = self.call("JoinGroup", 9, req)
        if isinstance(r, str) or r["ErrorCode"] != 0:
            raise SetupError(f"{self.target}: join {group}: {r}")
        member, gen = r["MemberId"], r["GenerationId"]
        if sync:
            s = self.call("SyncGroup", 5, {
                "GroupId": group, "GenerationId": gen, "MemberId": member,
                "GroupInstanceId": instance_id, "ProtocolType": protocol_type,
                "ProtocolName": "range",
                "Assignments": [{"MemberId": member, "Assignment": b""}]})
            if s["ErrorCode"] != 0:
                raise SetupError(f"{self.target}: sync {group}: {s}")
        return member, gen

    def commit(self, group, topic, offsets, member="", generation=-1):
        """Simple-consumer style commit of {partition: offset}."""
        self.coordinator(group)
        r = self.call("OffsetCommit", 9, {
            "GroupId": group, "GenerationIdOrMemberEpoch": generation, "MemberId": member,
            "GroupInstanceId": None,
            "Topics": [{"Name": topic, "Partitions": [
                {"PartitionIndex": p, "CommittedOffset": o, "CommittedLeaderEpoch": -1,
                 "CommittedMetadata": ""} for p, o in offsets.items()]}]})
        errs = [p["ErrorCode"] for t in r["Topics"] for p in t["Partitions"]]
        if any(errs):
            raise SetupError(f"{self.target}: commit {group}: {r}")
        return r

    def init_producer(self, transactional_id=None, timeout_ms=60000):
        if transactional_id is not None:
            self.coordinator(transactional_id, key_type=1)

        def ready():
            r = self.call("InitProducerId", 5, {
                "TransactionalId": transactional_id, "TransactionTimeoutMs": timeout_ms,
                "ProducerId": -1, "ProducerEpoch": -1})
            return r["ErrorCode"] == 0, r
        r = self.wait_for("InitProducerId", ready, timeout=30)
        return r["ProducerId"], r["ProducerEpoch"]

    def add_partitions(self, txn, pid, epoch, topics, check=False, version=3):
        """AddPartitionsToTxn as a client sends it (v3 and below)."""
        r = self.call("AddPartitionsToTxn", version, {
            "V3AndBelowTransactionalId": txn, "V3AndBelowProducerId": pid,
            "V3AndBelowProducerEpoch": epoch,
            "V3AndBelowTopics": [{"Name": n, "Partitions": ps} for n, ps in topics.items()]},
            check=check)
        if not check:
            errs = [p["PartitionErrorCode"] for t in r["ResultsByTopicV3AndBelow"]
                    for p in t["ResultsByPartition"]]
            if any(errs):
                raise SetupError(f"{self.target}: AddPartitionsToTxn: {r}")
        return r


def consumer_protocol_metadata(topics, version=0):
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    return out + struct.pack(">i", -1)
