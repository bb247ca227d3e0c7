//! Kafka's error codes (`org.apache.kafka.common.protocol.Errors`), generated at build time by
//! `kactor-codegen` from `schemas/errors/errors.tsv`: the [`ErrorCode`] enum (code, Kafka's
//! name, retriability, default message) and one `i16` constant per error (`NOT_COORDINATOR`)
//! for the response fields that carry raw codes. This is the one error vocabulary of kactor.

include!(concat!(env!("OUT_DIR"), "/errors.rs"));

impl ErrorCode {
    /// Kafka's `Errors.forCode`: the error with this code, UNKNOWN_SERVER_ERROR for a code
    /// Kafka does not define.
    pub const fn for_code(code: i16) -> ErrorCode {
        match ErrorCode::from_code(code) {
            Some(e) => e,
            None => ErrorCode::UnknownServerError,
        }
    }
}

/// An error code with its message, as the cores answer a failed operation (a share
/// coordinator's state request, a group coordinator's share-offsets request).
pub type CodedError = (i16, String);

/// `code` with Kafka's default message for it.
pub fn with_default_message(code: i16) -> CodedError {
    (
        code,
        ErrorCode::for_code(code).default_message().to_string(),
    )
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> i16 {
        e.code()
    }
}

impl std::fmt::Display for ErrorCode {
    /// Kafka's name, as Kafka's `Errors.toString()` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn known_rows() {
        let e = ErrorCode::NotCoordinator;
        assert_eq!(
            (e.code(), e.name(), e.is_retriable()),
            (16, "NOT_COORDINATOR", true)
        );
        assert_eq!(e.default_message(), "This is not the correct coordinator.");
        assert_eq!(NOT_COORDINATOR, 16);
        assert_eq!(
            ErrorCode::from_code(-1),
            Some(ErrorCode::UnknownServerError)
        );
        assert!(!ErrorCode::UnknownServerError.is_retriable());
        // NONE has no exception: Errors.message() is its name.
        assert_eq!(ErrorCode::None.default_message(), "NONE");
        assert_eq!(NONE, 0);
        // A few retriable / non-retriable pairs that the translation code relies on.
        assert!(ErrorCode::NotLeaderOrFollower.is_retriable());
        assert!(ErrorCode::CoordinatorLoadInProgress.is_retriable());
        assert!(ErrorCode::NetworkException.is_retriable());
        assert!(ErrorCode::NotEnoughReplicas.is_retriable());
        // Kafka 4.x made ConcurrentTransactionsException a RetriableException.
        assert!(ErrorCode::ConcurrentTransactions.is_retriable());
        assert!(!ErrorCode::InvalidProducerEpoch.is_retriable());
        assert!(!ErrorCode::ProducerFenced.is_retriable());
        assert_eq!(INVALID_TOPIC_EXCEPTION, 17);
        assert_eq!(TRANSACTION_ABORTABLE, 120);
        assert_eq!(INVALID_REGULAR_EXPRESSION, 128);
        // Kafka 4.4's last code.
        let last = ErrorCode::ALL.iter().max().unwrap();
        assert_eq!(
            (last.code(), last.name()),
            (136, "CONTROLLER_ID_NOT_REGISTERED")
        );
        assert_eq!(ErrorCode::from_code(137), None);
        assert_eq!(ErrorCode::for_code(137), ErrorCode::UnknownServerError);
        assert_eq!(ErrorCode::for_code(16).to_string(), "NOT_COORDINATOR");
    }

    #[test]
    fn codes_and_names_are_unique_and_round_trip() {
        let mut codes = HashSet::new();
        let mut names = HashSet::new();
        for &e in ErrorCode::ALL {
            assert!(codes.insert(e.code()), "{e} code repeated");
            assert!(names.insert(e.name()), "{e} name repeated");
            assert_eq!(ErrorCode::from_code(e.code()), Some(e));
            assert!(!e.default_message().is_empty());
        }
        // Kafka's table is dense from -1 to its last code.
        assert_eq!(ErrorCode::ALL.len(), 138);
        assert!((-1..=136).all(|c| ErrorCode::from_code(c).is_some()));
    }
}
