"""Every difference the differential suite finds between kactor and Apache Kafka 4.4.0, with
its status and reason. docs/differences.md is generated from this list
(`tests/differential/run.py --docs`).

An entry: `case` (a case name, `*` matches any text), `path` (the response label and field path
the report prints, `*` allowed), `kactor` / `kafka` (the values last seen, for the docs),
`status`: "intentional" (kactor differs on purpose; `reason` says why) or "pending" (a kactor
defect still to fix), and `reason`. The suite fails on a difference no entry matches and on an
entry that matches no difference: fix kactor, then delete the entry (and run --docs).
`run.py --suggest` prints entries for new differences.
"""
PENDING, INTENTIONAL = "pending", "intentional"


def d(case, path, kactor, kafka, status, reason):
    return {"case": case, "path": path, "kactor": kactor, "kafka": kafka, "status": status,
            "reason": reason}


# Kafka 4.4.0's broker listener advertises these APIs; kactor does not serve them yet (README,
# Compatibility). Each is a missing ApiKeys row in every ApiVersions answer.
NOT_SERVED = {
    34: ("AlterReplicaLogDirs", 1, 2),
    38: ("CreateDelegationToken", 1, 3),
    39: ("RenewDelegationToken", 1, 2),
    40: ("ExpireDelegationToken", 1, 2),
    41: ("DescribeDelegationToken", 1, 3),
    88: ("StreamsGroupHeartbeat", 0, 1),
    89: ("StreamsGroupDescribe", 0, 1),
    93: ("StreamsGroupTopologyDescriptionUpdate", 0, 0),
    94: ("UnregisterController", 0, 0),
}

KNOWN = [
    *[d("ApiVersions/v*", f"ApiVersions v*.ApiKeys[ApiKey={k}]", "<absent>",
        f"{{'ApiKey': {k}, 'MinVersion': {lo}, 'MaxVersion': {hi}}}", PENDING,
        f"{name} is not served by kactor yet (Kafka advertises v{lo}-{hi})")
      for k, (name, lo, hi) in NOT_SERVED.items()],
    # ---- ApiVersions
    d('ApiVersions/v4',
      'ApiVersions v4.FinalizedFeatures[Name=streams.version]',
      "'<absent>'",
      "{'Name': 'streams.version', 'MaxVersionLevel': 1, 'MinVersionLevel': 1}",
      PENDING,
      'kactor does not finalize streams.version, eligible.leader.replicas.version'),
    d('ApiVersions/v4',
      'ApiVersions v4.FinalizedFeatures[Name=eligible.leader.replicas.version]',
      "'<absent>'",
      "{'Name': 'eligible.leader.replicas.version', 'MaxVersionLevel': 1, 'MinVersionLevel': 1}",
      PENDING,
      'kactor does not finalize streams.version, eligible.leader.replicas.version'),
    # ---- AlterShareGroupOffsets
    d('AlterShareGroupOffsets/v0-creates-the-group',
      'group.Groups[0].*Epoch',
      '0',
      '1',
      PENDING,
      'A share group created by AlterShareGroupOffsets describes with group and assignment '
      'epoch 1 on Kafka 4.4, 0 on kactor; the 4.4 code writes no epoch record on that path '
      '(GroupMetadataManager.alterShareGroupOffsets), so where Kafka takes the 1 from is '
      'not found yet'),
    # ---- DescribeTopicPartitions
    d('DescribeTopicPartitions/empty-name',
      'DescribeTopicPartitions v0.Topics[0].ErrorCode',
      '3 (UNKNOWN_TOPIC_OR_PARTITION)',
      '-1 (UNKNOWN_SERVER_ERROR)',
      INTENTIONAL,
      'an empty topic name: Kafka 4.4.0 fails it with UNKNOWN_SERVER_ERROR (an internal error); kactor answers UNKNOWN_TOPIC_OR_PARTITION as for any other name that does not exist'),
    d('DescribeTopicPartitions/empty-name',
      'DescribeTopicPartitions v0.Topics[0].TopicAuthorizedOperations',
      '3576',
      '-2147483648',
      INTENTIONAL,
      'an empty topic name: Kafka 4.4.0 fails the whole request (UNKNOWN_SERVER_ERROR rows carry no operations); kactor answers the row of a topic that does not exist, with its operations as Kafka fills them for one'),
    # ---- DescribeConfigs
    d('DescribeConfigs/topic-documentation',
      'DescribeConfigs v4.Results[0].Configs[Name=cleanup.policy].Documentation',
      'None',
      '\'This config designates the retention policy to use on log segments. The "delete" policy (which is the default) will discard old segments when their retention time or size limit has been reached. T...',
      PENDING,
      'IncludeDocumentation: kactor sends no documentation (null) for topic configs'),
    d('DescribeConfigs/topic-documentation',
      'DescribeConfigs v4.Results[0].Configs[Name=retention.ms].Documentation',
      'None',
      '\'This configuration controls the maximum time we will retain a log before we will discard old log segments to free up space if we are using the "delete" retention policy. This represents an SLA on ...',
      PENDING,
      'IncludeDocumentation: kactor sends no documentation (null) for topic configs'),
    # ---- AlterConfigs
    d('AlterConfigs/v2-duplicate-resource',
      'AlterConfigs v2',
      "{'ThrottleTimeMs': '<throttle>', 'Responses': [{'ErrorCode': 0, 'ErrorMessage': None, 'ResourceType': 2, 'ResourceName': 'd.alterconfigs.v2-duplicate-resource'}, {'ErrorCode': 0, 'ErrorMessage': No...",
      "'<no response within the timeout>'",
      INTENTIONAL,
      'a resource named twice: Kafka 4.4.0 never answers (its handler fails on the duplicate key and the request times out); kactor answers a row per resource'),
    # ---- IncrementalAlterConfigs
    d('IncrementalAlterConfigs/v1-unknown-operation',
      'IncrementalAlterConfigs v1.Responses[0].ErrorCode',
      '42 (INVALID_REQUEST)',
      '-1 (UNKNOWN_SERVER_ERROR)',
      INTENTIONAL,
      'an unknown ConfigOperation (9): Kafka 4.4.0 fails with UNKNOWN_SERVER_ERROR (an internal error, no message); kactor answers INVALID_REQUEST naming the operation'),
    d('IncrementalAlterConfigs/v1-unknown-operation',
      'IncrementalAlterConfigs v1.Responses[0].ErrorMessage',
      "'Unknown config operation 9'",
      'None',
      INTENTIONAL,
      'an unknown ConfigOperation (9): Kafka 4.4.0 fails with UNKNOWN_SERVER_ERROR (an internal error, no message); kactor answers INVALID_REQUEST naming the operation'),
    # ---- Produce
    d('Produce/v11-null-records',
      'Produce v11',
      "{'Responses': [{'Name': 'd.produce.v11-null-records', 'PartitionResponses': [{'Index': 0, 'ErrorCode': 87, 'BaseOffset': -1, 'LogAppendTimeMs': -1, 'LogStartOffset': -1, 'RecordErrors': [], 'ErrorM...",
      "'<no response within the timeout>'",
      INTENTIONAL,
      'null Records: Kafka 4.4.0 never answers (the request fails inside its handler and the client times out); kactor answers INVALID_RECORD'),
]
