//! The supported-versions table (Kafka's `ApiVersionsResponse` construction from
//! `ApiKeys` + `apiVersionsResponse`): which (api key, min, max) this build advertises.
//!
//! Ranges come from the schemas' validVersions (Kafka 4.4.0's), with two of Kafka's rules:
//! versions marked `latestVersionUnstable` are not advertised, and Produce is advertised from
//! v0 although v0–v2 cannot be decoded (Kafka does the same so librdkafka keeps compression on;
//! a request at such a version, like any outside an API's range except ApiVersions, closes
//! the connection without a response, as Kafka 4.4 does). Only APIs in [`IMPLEMENTED`] are
//! advertised.

use crate::messages::ApiKey;

/// APIs the broker really serves. Extend this list when a handler lands, never before:
/// a client that sees an API advertised will use it.
pub const IMPLEMENTED: &[ApiKey] = &[
    ApiKey::ApiVersions,
    // SASL (actors/src/network/authenticator.rs): every listener answers them, SASL
    // listeners authenticate with them.
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    // Partition APIs (actors/src/partition/apis.rs).
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::DeleteRecords,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DescribeLogDirs,
    // Metadata and admin APIs (actors/src/controller/apis.rs).
    ApiKey::Metadata,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeCluster,
    ApiKey::DescribeTopicPartitions,
    ApiKey::DescribeQuorum,
    ApiKey::UpdateFeatures,
    // KRaft between controllers, on controller listeners (actors/src/raft/apis.rs).
    ApiKey::Vote,
    ApiKey::BeginQuorumEpoch,
    ApiKey::EndQuorumEpoch,
    ApiKey::FetchSnapshot,
    // A voter announcing its listeners and kraft.version range to the leader (KIP-853).
    ApiKey::UpdateRaftVoter,
    // Voter changes at the Raft leader (KIP-853; `kafka-metadata-quorum add-controller /
    // remove-controller`); brokers forward them.
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
    // Brokers in other processes reaching the active controller
    // (actors/src/controller/broker_apis.rs).
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::AlterPartition,
    ApiKey::ControllerRegistration,
    ApiKey::AllocateProducerIds,
    // Admin requests a broker forwards to the active controller
    // (actors/src/controller/envelope.rs).
    ApiKey::Envelope,
    // Cluster administration (actors/src/controller/cluster_apis.rs).
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::DescribeClientQuotas,
    ApiKey::AlterClientQuotas,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    ApiKey::ListConfigResources,
    ApiKey::UnregisterBroker,
    // No authorizer: answered SECURITY_DISABLED, as Kafka does without one.
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    // Group coordinator APIs (actors/src/group/apis.rs).
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::OffsetDelete,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
    // KIP-932 share groups: membership at the group coordinator (actors/src/group/apis/share.rs),
    // delivery at partition leaders (actors/src/share/apis.rs); the share-group offsets at the
    // group coordinator (actors/src/group/apis/share.rs).
    ApiKey::ShareGroupHeartbeat,
    ApiKey::ShareGroupDescribe,
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::AlterShareGroupOffsets,
    ApiKey::DeleteShareGroupOffsets,
    // The share coordinator (actors/src/share/coordinator/apis.rs): share-partition leaders
    // keep their delivery state in `__share_group_state` through these.
    ApiKey::InitializeShareGroupState,
    ApiKey::ReadShareGroupState,
    ApiKey::WriteShareGroupState,
    ApiKey::DeleteShareGroupState,
    ApiKey::ReadShareGroupStateSummary,
    // Producer and transaction APIs (actors/src/txn/apis.rs; TxnOffsetCommit is served by the
    // group coordinator, actors/src/group/apis.rs).
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::WriteTxnMarkers,
    ApiKey::DescribeProducers,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
];

/// The (min, max) version advertised for `api_key`, or None if this build does not serve it.
pub fn supported_range(api_key: ApiKey) -> Option<(i16, i16)> {
    if !IMPLEMENTED.contains(&api_key) {
        return None;
    }
    Some(advertised_range(api_key))
}

/// Kafka 4.4.0's advertised range for an API we have schemas for (whether or not implemented).
pub fn advertised_range(api_key: ApiKey) -> (i16, i16) {
    let (mut min, mut max) = api_key.valid_versions();
    if api_key.latest_version_unstable() {
        max -= 1;
    }
    if api_key == ApiKey::Produce {
        min = 0;
    }
    (min, max)
}

/// Whether a request at `version` can be decoded and served (unlike the advertised range, this
/// excludes Produce v0–v2).
pub fn is_supported(api_key: ApiKey, version: i16) -> bool {
    let (min, max) = api_key.valid_versions();
    supported_range(api_key).is_some_and(|(_, amax)| version >= min && version <= amax.min(max))
}

/// (api key, min, max) for every served API, ascending by key: the ApiVersions response body.
pub fn supported_versions() -> impl Iterator<Item = (ApiKey, i16, i16)> {
    ApiKey::ALL
        .iter()
        .filter_map(|&k| supported_range(k).map(|(min, max)| (k, min, max)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_implemented_apis_are_advertised() {
        let v: Vec<_> = supported_versions().collect();
        assert!(v.iter().any(|(k, _, _)| *k == ApiKey::ApiVersions));
        for (k, min, max) in v {
            assert!(IMPLEMENTED.contains(&k));
            assert!(min <= max);
        }
    }

    #[test]
    fn api_versions_range_matches_kafka_4_4() {
        assert_eq!(supported_range(ApiKey::ApiVersions), Some((0, 5)));
    }
}
