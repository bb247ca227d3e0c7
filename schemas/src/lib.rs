//! kactor-protocol: the Kafka wire protocol (Kafka's `clients/.../common/message` and
//! `common/record` packages): generated message types, primitives, record batch v2.

pub mod codec;
pub mod errors;
mod generated;
pub mod records;
pub mod versions;

pub use codec::{
    Decode, DecodeError, Encode, EncodeError, FileSlice, Message, RawTaggedField, Records, Request,
    Uuid, Writer,
};
pub use errors::ErrorCode;
pub use generated::{coordinator, messages, metadata};
pub use messages::{
    request_header_version, response_header_version, ApiKey, RequestBody, ResponseBody,
};
