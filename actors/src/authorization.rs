//! The ACL vocabulary describe responses report "authorized operations" in (KIP-430):
//! Kafka's `AclOperation` codes, its `ResourceType`s and the operations each resource type
//! supports (`AclEntry.supportedOperations`). kactor runs without an authorizer, and Kafka
//! without one reports every operation the resource type supports
//! (`AuthHelper.authorizedOperations`), as a bit field of the operation codes.

/// Kafka's `AclOperation` (its byte codes are the bit positions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AclOperation {
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
    TwoPhaseCommit = 15,
}

/// Kafka's concrete `ResourceType`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User,
}

/// The operations an ACL on `resource` can grant (Kafka's `AclEntry.supportedOperations`).
pub fn supported_operations(resource: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
    }
}

/// What a describe response's `AuthorizedOperations` holds for a resource of this type when
/// the client asked for it: with no authorizer, every supported operation (Kafka's
/// `Utils.to32BitField` of their codes).
pub fn authorized_operations(resource: ResourceType) -> i32 {
    supported_operations(resource)
        .iter()
        .fold(0, |bits, op| bits | 1 << *op as u8)
}

/// `AuthorizedOperations` when the client did not ask for them (Kafka's `Integer.MIN_VALUE`).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_as_kafka_4_4_reports_them_without_an_authorizer() {
        // The values Apache Kafka 4.4.0 answers DescribeGroups / ConsumerGroupDescribe,
        // Metadata v8 (cluster) and Metadata (topics) with.
        assert_eq!(authorized_operations(ResourceType::Group), 3400);
        assert_eq!(authorized_operations(ResourceType::Cluster), 8096);
        assert_eq!(authorized_operations(ResourceType::Topic), 3576);
    }
}
