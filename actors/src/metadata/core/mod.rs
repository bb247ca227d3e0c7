//! The pure side of metadata: records and their framing, the image, replay and the local
//! consequences of a delta. No actix, no I/O.

pub mod image;
pub mod publish;
pub mod records;
pub mod snapshot;

pub use image::{
    BrokerRegistration, ConfigResource, ConfigResourceType, MetadataChanges, MetadataImage,
    PartitionRegistration, Provenance, QuotaEntity, ReplayError, ScramCredential, TopicImage,
    TopicsImage,
};
pub use publish::{
    broker_configs, local_changes, BrokerConfigChange, LocalChanges, LocalPartitionChange,
    LocalPartitionChangeKind, TopicConfigChange,
};
pub use records::{MetadataRecord, RecordCodecError};

#[cfg(test)]
mod tests;
