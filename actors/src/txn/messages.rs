//! Mailboxes of the transaction-side actors.

use actix::prelude::*;

/// Sent by the InitProducerId handler for a producer without transactional id: the next
/// producer id, or a retriable error code. Lost: the client times out and retries.
#[derive(Debug, Message)]
#[rtype(result = "Result<i64, i16>")]
pub struct GenerateProducerId;
