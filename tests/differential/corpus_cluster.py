"""Cases: ApiVersions, unsupported versions, DescribeCluster, DescribeQuorum, UpdateFeatures,
ACLs, client quotas, SCRAM credentials."""
import struct

from harness import schema_codec as sc

from .corpus_topics import topic
from .engine import case

# ---- ApiVersions ---------------------------------------------------------------------------


@case("ApiVersions", "v4")
def _(c):
    c.call("ApiVersions", 4, {"ClientSoftwareName": "kactor-diff",
                              "ClientSoftwareVersion": "1.0"}, check=True)


@case("ApiVersions", "v0")
def _(c):
    c.call("ApiVersions", 0, {}, check=True)


@case("ApiVersions", "v3-invalid-software-name")
def _(c):
    """A client software name with characters outside [a-zA-Z0-9.-]: INVALID_REQUEST (KIP-511)."""
    c.call("ApiVersions", 3, {"ClientSoftwareName": "bad name!",
                              "ClientSoftwareVersion": "1.0"}, check=True)


@case("ApiVersions", "v5-cluster-id-mismatch")
def _(c):
    """v5 names the cluster and node the client means to reach; a wrong cluster id."""
    c.call("ApiVersions", 5, {"ClientSoftwareName": "kactor-diff",
                              "ClientSoftwareVersion": "1.0",
                              "ClusterId": "AAAAAAAAAAAAAAAAAAAAAA", "NodeId": 1}, check=True)


@case("ApiVersions", "unsupported-version-fallback")
def _(c):
    """ApiVersions v99: answered as v0 with UNSUPPORTED_VERSION and the version table."""
    body = sc.uvarint(0)
    hdr = struct.pack(">hhih", 18, 99, 7, 4) + b"diff" + sc.uvarint(0)
    frame = struct.pack(">i", len(hdr) + len(body)) + hdr + body
    c.call_raw(frame, decode_as=(18, 0), label="ApiVersions v99 answered as v0")


# ---- versions outside the served range: Kafka closes the connection -------------------------

def _versioned_probe(c, api_key, version, label):
    body = b"\0" * 16
    hdr = struct.pack(">hhih", api_key, version, 9, 4) + b"diff" + sc.uvarint(0)
    frame = struct.pack(">i", len(hdr) + len(body)) + hdr + body
    c.call_raw(frame, decode_as=None, label=label)


@case("Produce", "version-above-max")
def _(c):
    _versioned_probe(c, 0, 14, "Produce v14")


@case("Fetch", "version-below-min")
def _(c):
    _versioned_probe(c, 1, 3, "Fetch v3")


@case("Metadata", "version-above-max")
def _(c):
    _versioned_probe(c, 3, 14, "Metadata v14")


@case("ApiVersions", "unknown-api-key")
def _(c):
    """A request for an api key nobody serves (999)."""
    _versioned_probe(c, 999, 0, "api key 999")


@case("SaslHandshake", "plaintext-listener-raw")
def _(c):
    """SaslHandshake v1 on a PLAINTEXT listener: ILLEGAL_SASL_STATE, no mechanisms."""
    hdr = struct.pack(">hhih", 17, 1, 9, 4) + b"diff"
    body = struct.pack(">h", 5) + b"PLAIN"
    frame = struct.pack(">i", len(hdr) + len(body)) + hdr + body
    c.call_raw(frame, decode_as=None, label="SaslHandshake v1")


@case("SaslHandshake", "v0-v1-plaintext-listener")
def _(c):
    """Outside a SASL listener both versions answer ILLEGAL_SASL_STATE (KafkaApis)."""
    for v in (0, 1):
        c.call("SaslHandshake", v, {"Mechanism": "SCRAM-SHA-256"})


@case("SaslAuthenticate", "v0-v2-plaintext-listener")
def _(c):
    """SaslAuthenticate on a PLAINTEXT listener: ILLEGAL_SASL_STATE with Kafka's message."""
    for v in (0, 1, 2):
        c.call("SaslAuthenticate", v, {"AuthBytes": b"\0alice\0secret"})


# ---- DescribeCluster -----------------------------------------------------------------------

@case("DescribeCluster", "v2")
def _(c):
    c.call("DescribeCluster", 2, {"IncludeClusterAuthorizedOperations": False,
                                  "EndpointType": 1, "IncludeFencedBrokers": True}, check=True)


@case("DescribeCluster", "v0")
def _(c):
    c.call("DescribeCluster", 0, {"IncludeClusterAuthorizedOperations": False}, check=True)


@case("DescribeCluster", "authorized-operations")
def _(c):
    c.call("DescribeCluster", 1, {"IncludeClusterAuthorizedOperations": True,
                                  "EndpointType": 1}, check=True)


@case("DescribeCluster", "endpoint-type-controller")
def _(c):
    """EndpointType 2 (controllers) sent to a broker listener."""
    c.call("DescribeCluster", 1, {"IncludeClusterAuthorizedOperations": False,
                                  "EndpointType": 2}, check=True)


@case("DescribeCluster", "endpoint-type-unknown")
def _(c):
    c.call("DescribeCluster", 1, {"IncludeClusterAuthorizedOperations": False,
                                  "EndpointType": 9}, check=True)


# ---- DescribeQuorum ------------------------------------------------------------------------

@case("DescribeQuorum", "v2")
def _(c):
    c.call("DescribeQuorum", 2, {"Topics": [{"TopicName": "__cluster_metadata",
                                             "Partitions": [{"PartitionIndex": 0}]}]},
           check=True)


@case("DescribeQuorum", "v0")
def _(c):
    c.call("DescribeQuorum", 0, {"Topics": [{"TopicName": "__cluster_metadata",
                                             "Partitions": [{"PartitionIndex": 0}]}]},
           check=True)


@case("DescribeQuorum", "unknown-topic")
def _(c):
    c.call("DescribeQuorum", 2, {"Topics": [{"TopicName": "not-the-metadata-topic",
                                             "Partitions": [{"PartitionIndex": 0}]}]},
           check=True)


@case("DescribeQuorum", "unknown-partition")
def _(c):
    c.call("DescribeQuorum", 2, {"Topics": [{"TopicName": "__cluster_metadata",
                                             "Partitions": [{"PartitionIndex": 3}]}]},
           check=True)


# ---- UpdateFeatures ------------------------------------------------------------------------

@case("UpdateFeatures", "validate-only-same-level")
def _(c):
    c.call("UpdateFeatures", 1, {"timeoutMs": 30000, "ValidateOnly": True, "FeatureUpdates": [
        {"Feature": "group.version", "MaxVersionLevel": 1, "UpgradeType": 1}]}, check=True)


@case("UpdateFeatures", "unknown-feature")
def _(c):
    c.call("UpdateFeatures", 1, {"timeoutMs": 30000, "ValidateOnly": True, "FeatureUpdates": [
        {"Feature": "no.such.feature", "MaxVersionLevel": 1, "UpgradeType": 1}]}, check=True)


@case("UpdateFeatures", "level-too-high")
def _(c):
    c.call("UpdateFeatures", 1, {"timeoutMs": 30000, "ValidateOnly": True, "FeatureUpdates": [
        {"Feature": "transaction.version", "MaxVersionLevel": 99, "UpgradeType": 1}]},
        check=True)


@case("UpdateFeatures", "downgrade-without-flag")
def _(c):
    """Lowering a level with UpgradeType UPGRADE (1)."""
    c.call("UpdateFeatures", 1, {"timeoutMs": 30000, "ValidateOnly": True, "FeatureUpdates": [
        {"Feature": "group.version", "MaxVersionLevel": 0, "UpgradeType": 1}]}, check=True)


@case("UpdateFeatures", "duplicate-feature")
def _(c):
    c.call("UpdateFeatures", 1, {"timeoutMs": 30000, "ValidateOnly": True, "FeatureUpdates": [
        {"Feature": "group.version", "MaxVersionLevel": 1, "UpgradeType": 1},
        {"Feature": "group.version", "MaxVersionLevel": 1, "UpgradeType": 1}]}, check=True)


@case("UpdateFeatures", "v0-empty")
def _(c):
    c.call("UpdateFeatures", 0, {"timeoutMs": 30000, "FeatureUpdates": []}, check=True)


# ---- ACLs (no authorizer configured on either broker) --------------------------------------

ACL_ANY = {"ResourceTypeFilter": 1, "ResourceNameFilter": None, "PatternTypeFilter": 1,
           "PrincipalFilter": None, "HostFilter": None, "Operation": 1, "PermissionType": 1}


@case("DescribeAcls", "any-no-authorizer")
def _(c):
    c.call("DescribeAcls", 3, ACL_ANY, check=True)


@case("DescribeAcls", "v1-no-authorizer")
def _(c):
    c.call("DescribeAcls", 1, ACL_ANY, check=True)


@case("DescribeAcls", "invalid-filter")
def _(c):
    """ResourceTypeFilter UNKNOWN (0)."""
    c.call("DescribeAcls", 3, dict(ACL_ANY, ResourceTypeFilter=0), check=True)


@case("CreateAcls", "no-authorizer")
def _(c):
    c.call("CreateAcls", 3, {"Creations": [
        {"ResourceType": 2, "ResourceName": "t", "ResourcePatternType": 3,
         "Principal": "User:alice", "Host": "*", "Operation": 3, "PermissionType": 3}]},
        check=True)


@case("CreateAcls", "empty")
def _(c):
    c.call("CreateAcls", 3, {"Creations": []}, check=True)


@case("DeleteAcls", "no-authorizer")
def _(c):
    c.call("DeleteAcls", 3, {"Filters": [ACL_ANY]}, check=True)


# ---- client quotas -------------------------------------------------------------------------

@case("DescribeClientQuotas", "all-empty")
def _(c):
    c.call("DescribeClientQuotas", 1, {"Components": [], "Strict": False}, check=True)


@case("DescribeClientQuotas", "user-exact-v0")
def _(c):
    c.call("DescribeClientQuotas", 0, {"Components": [
        {"EntityType": "user", "MatchType": 0, "Match": "alice"}], "Strict": True},
        check=True)


@case("DescribeClientQuotas", "unknown-entity-type")
def _(c):
    c.call("DescribeClientQuotas", 1, {"Components": [
        {"EntityType": "no-such-type", "MatchType": 1, "Match": None}], "Strict": False},
        check=True)


@case("DescribeClientQuotas", "invalid-match-type")
def _(c):
    c.call("DescribeClientQuotas", 1, {"Components": [
        {"EntityType": "user", "MatchType": 7, "Match": None}], "Strict": False}, check=True)


@case("DescribeClientQuotas", "duplicate-entity-type")
def _(c):
    c.call("DescribeClientQuotas", 1, {"Components": [
        {"EntityType": "user", "MatchType": 1, "Match": None},
        {"EntityType": "user", "MatchType": 1, "Match": None}], "Strict": False}, check=True)


def _alter(c, entries, validate_only=False, version=1, label=None):
    """AlterClientQuotas: entries as (entity [(type, name)], ops [(key, value or None)])."""
    body = {"Entries": [
        {"Entity": [{"EntityType": t, "EntityName": n} for t, n in entity],
         "Ops": [{"Key": k, "Value": 0.0 if v is None else v, "Remove": v is None}
                 for k, v in ops]}
        for entity, ops in entries], "ValidateOnly": validate_only}
    return c.call("AlterClientQuotas", version, body, check=True, label=label)


def _describe_exact(c, pairs, strict=True, label=None):
    comps = [{"EntityType": t, "MatchType": 0 if n is not None else 1, "Match": n}
             for t, n in pairs]
    return c.call("DescribeClientQuotas", 1, {"Components": comps, "Strict": strict},
                  check=True, label=label)


def _wait_entities(c, pairs, n):
    """Waits until a non-strict describe of `pairs` lists `n` entities: Kafka's broker answers
    from its metadata image, which follows the controller's commit a moment later."""
    comps = [{"EntityType": t, "MatchType": 0, "Match": v} for t, v in pairs]

    def seen():
        r = c.call("DescribeClientQuotas", 1, {"Components": comps, "Strict": False})
        got = len(r.get("Entries") or []) if isinstance(r, dict) else None
        return got == n, got
    c.wait_for(f"{n} quota entities for {pairs}", seen)


@case("AlterClientQuotas", "set-describe-remove")
def _(c):
    """Set user, (user, client-id) and default quotas, describe each exactly, then remove."""
    user = f"u-{topic(c)}"
    _alter(c, [([("user", user)], [("producer_byte_rate", 1024.0),
                                   ("consumer_byte_rate", 2048.0)]),
               ([("user", user), ("client-id", "app")], [("request_percentage", 12.5)])])
    _wait_entities(c, [("user", user)], 2)
    _describe_exact(c, [("user", user)], label="describe user")
    _describe_exact(c, [("user", user), ("client-id", "app")], label="describe user+client")
    _describe_exact(c, [("user", user)], strict=False, label="describe user, not strict")
    c.call("DescribeClientQuotas", 1, {"Components": [
        {"EntityType": "user", "MatchType": 0, "Match": user},
        {"EntityType": "client-id", "MatchType": 2, "Match": None}], "Strict": True},
        check=True, label="describe user, any client")
    _alter(c, [([("user", user)], [("producer_byte_rate", None), ("consumer_byte_rate", None)]),
               ([("user", user), ("client-id", "app")], [("request_percentage", None)])],
           label="remove")
    _wait_entities(c, [("user", user)], 0)
    _describe_exact(c, [("user", user)], strict=False, label="describe after remove")


@case("AlterClientQuotas", "validate-only-v0")
def _(c):
    user = f"u-{topic(c)}"
    _alter(c, [([("user", user)], [("producer_byte_rate", 1024.0)])], validate_only=True,
           version=0)
    # A real change after it, awaited, shows the validate-only one wrote nothing.
    _alter(c, [([("user", user), ("client-id", "x")], [("producer_byte_rate", 1.0)])],
           label="real change")
    _wait_entities(c, [("user", user)], 1)
    _describe_exact(c, [("user", user)])


@case("AlterClientQuotas", "invalid-entities")
def _(c):
    """Empty entity, unknown type, empty name, ip with user, an unresolvable ip host."""
    for label, entity in [("empty", []), ("unknown type", [("group", "g")]),
                          ("empty user", [("user", "")]),
                          ("ip with user", [("ip", "127.0.0.1"), ("user", "u")]),
                          ("ip with default client", [("ip", None), ("client-id", None)]),
                          ("bad ip host", [("ip", "no-such-host.invalid")])]:
        _alter(c, [(entity, [("producer_byte_rate", 10.0)])], label=label)


@case("AlterClientQuotas", "invalid-values")
def _(c):
    user = f"u-{topic(c)}"
    for label, ops in [("unknown key", [("no_such_quota", 1.0)]),
                       ("ip key on user", [("connection_creation_rate", 5.0)]),
                       ("zero", [("producer_byte_rate", 0.0)]),
                       ("negative", [("request_percentage", -1.0)]),
                       ("fractional long", [("consumer_byte_rate", 10.5)]),
                       ("too large", [("producer_byte_rate", 1e19)]),
                       ("duplicate key", [("producer_byte_rate", 1.0),
                                          ("producer_byte_rate", 2.0)]),
                       ("one bad of two", [("producer_byte_rate", 5.0),
                                           ("no_such_quota", 1.0)])]:
        _alter(c, [([("user", user)], ops)], label=label)
    _alter(c, [([("ip", "127.0.0.9")], [("connection_creation_rate", 3e9)])],
           label="ip too large")
    _alter(c, [([("ip", "127.0.0.9")], [("producer_byte_rate", 5.0)])], label="user key on ip")
    _describe_exact(c, [("user", user)], strict=False)


@case("AlterClientQuotas", "duplicate-entity-and-several")
def _(c):
    """The same entity twice, and several entities answered in Kafka's map order."""
    user = f"u-{topic(c)}"
    _alter(c, [([("user", user)], [("producer_byte_rate", 100.0)]),
               ([("user", user)], [("consumer_byte_rate", 100.0)])], label="same entity twice")
    _alter(c, [([("user", user), ("client-id", "a")], [("producer_byte_rate", 100.0)]),
               ([("client-id", f"c-{user}")], [("consumer_byte_rate", 100.0)]),
               ([("user", f"v-{user}")], [("no_such_quota", 1.0)]),
               ([("ip", "127.0.0.10")], [("connection_creation_rate", 4.0)])],
           label="four entities")
    _alter(c, [], label="no entries")
    _wait_entities(c, [("user", user)], 2)
    _wait_entities(c, [("ip", "127.0.0.10")], 1)
    _describe_exact(c, [("user", user)], strict=False)
    _describe_exact(c, [("ip", "127.0.0.10")])
    _alter(c, [([("ip", "127.0.0.10")], [("connection_creation_rate", None)])],
           label="remove ip")
    # Removing what is not set is no error.
    _alter(c, [([("client-id", f"never-{user}")], [("producer_byte_rate", None)])],
           label="remove unset")


# ---- SCRAM credentials ---------------------------------------------------------------------

@case("DescribeUserScramCredentials", "all-none")
def _(c):
    c.call("DescribeUserScramCredentials", 0, {"Users": None}, check=True)


@case("DescribeUserScramCredentials", "unknown-user")
def _(c):
    c.call("DescribeUserScramCredentials", 0, {"Users": [{"Name": "nobody"}]}, check=True)


@case("DescribeUserScramCredentials", "duplicate-user")
def _(c):
    c.call("DescribeUserScramCredentials", 0, {"Users": [{"Name": "x"}, {"Name": "x"}]},
           check=True)


@case("AlterUserScramCredentials", "upsert-describe-delete")
def _(c):
    up = {"Name": "diff-user", "Mechanism": 1, "Iterations": 8192, "Salt": b"s" * 16,
          "SaltedPassword": b"p" * 32}
    c.call("AlterUserScramCredentials", 0, {"Deletions": [], "Upsertions": [up]}, check=True)

    def visible():  # Kafka applies it through its metadata log, a moment after answering
        r = c.call("DescribeUserScramCredentials", 0, {"Users": [{"Name": "diff-user"}]})
        return r["Results"][0]["ErrorCode"] == 0, r
    c.check("DescribeUserScramCredentials v0", c.wait_for("credential visible", visible))
    c.call("AlterUserScramCredentials", 0, {"Deletions": [{"Name": "diff-user",
                                                           "Mechanism": 1}],
                                            "Upsertions": []}, check=True)


@case("AlterUserScramCredentials", "iterations-too-low")
def _(c):
    up = {"Name": "diff-low", "Mechanism": 2, "Iterations": 10, "Salt": b"s" * 16,
          "SaltedPassword": b"p" * 64}
    c.call("AlterUserScramCredentials", 0, {"Deletions": [], "Upsertions": [up]}, check=True)


@case("AlterUserScramCredentials", "unknown-mechanism")
def _(c):
    up = {"Name": "diff-mech", "Mechanism": 9, "Iterations": 8192, "Salt": b"s" * 16,
          "SaltedPassword": b"p" * 32}
    c.call("AlterUserScramCredentials", 0, {"Deletions": [], "Upsertions": [up]}, check=True)


@case("AlterUserScramCredentials", "delete-unknown")
def _(c):
    c.call("AlterUserScramCredentials", 0, {"Deletions": [{"Name": "ghost", "Mechanism": 1}],
                                            "Upsertions": []}, check=True)


@case("AlterUserScramCredentials", "empty-user-name")
def _(c):
    up = {"Name": "", "Mechanism": 1, "Iterations": 8192, "Salt": b"s" * 16,
          "SaltedPassword": b"p" * 32}
    c.call("AlterUserScramCredentials", 0, {"Deletions": [], "Upsertions": [up]}, check=True)


@case("AlterUserScramCredentials", "duplicate-user-in-request")
def _(c):
    up = {"Name": "diff-dup", "Mechanism": 1, "Iterations": 8192, "Salt": b"s" * 16,
          "SaltedPassword": b"p" * 32}
    c.call("AlterUserScramCredentials", 0, {"Deletions": [{"Name": "diff-dup", "Mechanism": 1}],
                                            "Upsertions": [up]}, check=True)


# ---- UnregisterBroker ----------------------------------------------------------------------

@case("UnregisterBroker", "unknown-broker")
def _(c):
    """`kafka-cluster unregister` of an id that never registered: BROKER_ID_NOT_REGISTERED."""
    c.call("UnregisterBroker", 0, {"BrokerId": 9999}, check=True)


# ---- AddRaftVoter / RemoveRaftVoter (KIP-853) ------------------------------------------------
# The single node's quorum is static (controller.quorum.voters, kraft.version 0); its broker
# listener forwards voter changes to the active controller, itself.

_DIR = "ZmlyKTJSTSaP3S5Fh4b5YQ"


@case("AddRaftVoter", "v1-static-quorum")
def _(c):
    """A static quorum cannot change voters: UNSUPPORTED_VERSION naming kraft.version 0."""
    c.call("AddRaftVoter", 1, {"ClusterId": None, "TimeoutMs": 5000, "VoterId": 2,
                               "VoterDirectoryId": _DIR, "AckWhenCommitted": True,
                               "Listeners": [{"Name": "CONTROLLER", "Host": "127.0.0.1",
                                              "Port": 1}]}, check=True)


@case("AddRaftVoter", "v0-no-directory-id")
def _(c):
    """A voter without a directory id: INVALID_REQUEST, before any quorum check."""
    c.call("AddRaftVoter", 0, {"ClusterId": None, "TimeoutMs": 5000, "VoterId": 2,
                               "VoterDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA",
                               "Listeners": [{"Name": "CONTROLLER", "Host": "127.0.0.1",
                                              "Port": 1}]}, check=True)


@case("RemoveRaftVoter", "v0-static-quorum")
def _(c):
    """A static quorum cannot change voters: UNSUPPORTED_VERSION naming kraft.version 0."""
    c.call("RemoveRaftVoter", 0, {"ClusterId": None, "VoterId": 1, "VoterDirectoryId": _DIR},
           check=True)
