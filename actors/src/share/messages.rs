//! Messages to the `SharePartitionManagerActor`. Each is answered at once from the core; a lost
//! message fails the one request that sent it (the client retries its ShareFetch).

use actix::Message;

use super::core::{
    AcquiredRange, FetchPlan, Limits, PartitionAcks, ReadBatches, SharePartition, TopicIdPartition,
};

/// ShareFetch step one: session, piggybacked acknowledgements, where to read.
#[derive(Message, Debug)]
#[rtype(result = "Result<FetchPlan, super::core::RequestError>")]
pub struct BeginShareFetch {
    pub group: String,
    pub member: String,
    pub epoch: i32,
    pub partitions: Vec<PartitionAcks>,
    pub forgotten: Vec<TopicIdPartition>,
    pub limits: Limits,
}

/// ShareFetch step two: acquire what was read.
#[derive(Message, Debug)]
#[rtype(result = "Vec<(TopicIdPartition, Vec<AcquiredRange>)>")]
pub struct AcquireRecords {
    pub group: String,
    pub member: String,
    pub reads: Vec<ReadBatches>,
    pub max_records: usize,
    pub limits: Limits,
}

/// A long-polled ShareFetch reading again: where to read now.
#[derive(Message, Debug)]
#[rtype(result = "Vec<(TopicIdPartition, Option<i64>)>")]
pub struct NextFetchOffsets {
    pub group: String,
    pub partitions: Vec<TopicIdPartition>,
}

/// ShareAcknowledge.
#[derive(Message, Debug)]
#[rtype(result = "Result<super::core::AckResults, super::core::RequestError>")]
pub struct AcknowledgeRecords {
    pub group: String,
    pub member: String,
    pub epoch: i32,
    pub partitions: Vec<PartitionAcks>,
    pub limits: Limits,
}

/// DescribeShareGroupOffsets: the group's share-partitions here.
#[derive(Message, Debug)]
#[rtype(result = "Vec<(TopicIdPartition, SharePartition)>")]
pub struct DescribeSharePartitions {
    pub group: String,
}
