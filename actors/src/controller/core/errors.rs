//! The Kafka error codes the controller answers with (Kafka's `Errors` / `ApiError`).
//! The numbers are protocol facts; the project-wide `BrokerError` mapping should absorb these.

/// An error code plus the message Kafka would put in the response's `error_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: i16,
    pub message: Option<String>,
}

impl ApiError {
    pub const NONE: ApiError = ApiError {
        code: 0,
        message: None,
    };
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: Some(message.into()),
        }
    }
    pub fn code(code: i16) -> Self {
        ApiError {
            code,
            message: None,
        }
    }
    pub fn is_ok(&self) -> bool {
        self.code == 0
    }
}

pub const NONE: i16 = 0;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
pub const INVALID_CONFIG: i16 = 40;
pub const NOT_CONTROLLER: i16 = 41;
pub const INVALID_REQUEST: i16 = 42;
pub const POLICY_VIOLATION: i16 = 44;
pub const SECURITY_DISABLED: i16 = 54;
pub const TOPIC_DELETION_DISABLED: i16 = 73;
pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
pub const ELECTION_NOT_NEEDED: i16 = 84;
pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
pub const RESOURCE_NOT_FOUND: i16 = 91;
pub const DUPLICATE_RESOURCE: i16 = 92;
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
pub const STALE_BROKER_EPOCH: i16 = 77;
pub const INVALID_UPDATE_VERSION: i16 = 95;
pub const FEATURE_UPDATE_FAILED: i16 = 96;
pub const UNKNOWN_TOPIC_ID: i16 = 100;
pub const DUPLICATE_BROKER_REGISTRATION: i16 = 101;
pub const BROKER_ID_NOT_REGISTERED: i16 = 102;
pub const INCONSISTENT_CLUSTER_ID: i16 = 104;
pub const INELIGIBLE_REPLICA: i16 = 107;
pub const NEW_LEADER_ELECTED: i16 = 108;
pub use crate::partition::core::error::codes::FENCED_LEADER_EPOCH;
