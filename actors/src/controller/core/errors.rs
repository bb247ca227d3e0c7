//! The controller's answer to one request or item (Kafka's `ApiError`): a Kafka error code
//! (`kactor_protocol::errors`) and its optional message.

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
