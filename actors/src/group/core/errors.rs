//! The Kafka error codes (`org.apache.kafka.common.protocol.Errors`) the group coordinator
//! returns. Plain `i16`s because they go straight into response fields.

pub const NONE: i16 = 0;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const INVALID_REQUEST: i16 = 42;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
pub const FENCED_INSTANCE_ID: i16 = 82;
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
pub const FENCED_MEMBER_EPOCH: i16 = 110;
pub const UNRELEASED_INSTANCE_ID: i16 = 111;
pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
pub const STALE_MEMBER_EPOCH: i16 = 113;
pub const INVALID_REGULAR_EXPRESSION: i16 = 128;

/// The text Kafka's `Errors.message()` gives a code: what a response carries when an error
/// (or success, "NONE") is reported without a message of its own, e.g. FindCoordinator v1–v3
/// and a request failed as a whole.
pub fn default_message(code: i16) -> &'static str {
    match code {
        NONE => "NONE",
        UNKNOWN_SERVER_ERROR => {
            "The server experienced an unexpected error when processing the request."
        }
        COORDINATOR_LOAD_IN_PROGRESS => "The coordinator is loading and hence can't process requests.",
        COORDINATOR_NOT_AVAILABLE => "The coordinator is not available.",
        NOT_COORDINATOR => "This is not the correct coordinator.",
        INVALID_GROUP_ID => "The group id is invalid.",
        INVALID_REQUEST => "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
        GROUP_ID_NOT_FOUND => "The group id does not exist.",
        _ => "",
    }
}
