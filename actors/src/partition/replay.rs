//! Reading a coordinator partition back at load (Kafka's `CoordinatorLoaderImpl` read loop):
//! every keyed record of the non-control batches from the log start to the log end, with its
//! offset. Used by the coordinators that load by replay (transactions, share state).

use bytes::Bytes;
use kactor_protocol::records::batches;

use super::core::{IsolationLevel, ReadParams, DEBUGGING_REPLICA_ID};
use super::messages::{DescribeReplica, ReadRecords};
use super::PartitionActor;
use crate::runtime::MeteredAddr;

/// (offset, key, value) of one record read back.
pub type LoadedRecord = (i64, Bytes, Option<Bytes>);

/// How much one read asks for.
const READ_BYTES: usize = 1 << 20;

pub async fn read_log_records(
    log: MeteredAddr<PartitionActor>,
) -> Result<Vec<LoadedRecord>, String> {
    let mut out = Vec::new();
    // From the log start: DeleteRecords (a coordinator's pruning) moves it, and a read below
    // it is out of range.
    let mut offset = log
        .send(DescribeReplica)
        .await
        .map_err(|e| e.to_string())?
        .log_start_offset;
    loop {
        let read = log
            .send(ReadRecords {
                scope: Default::default(),
                params: ReadParams {
                    fetch_offset: offset,
                    max_bytes: READ_BYTES,
                    min_one_batch: true,
                    isolation: IsolationLevel::ReadUncommitted,
                    current_leader_epoch: -1,
                    last_fetched_epoch: -1,
                    // To the log end: a new leader's tail is committed under its leadership
                    // even while its high watermark trails.
                    replica_id: DEBUGGING_REPLICA_ID,
                },
                isr_eligible: false,
                replica_epoch: -1,
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let bytes = read.records.to_bytes().map_err(|e| e.to_string())?;
        if bytes.is_empty() {
            return Ok(out);
        }
        let before = offset;
        for batch in batches(bytes) {
            let batch = batch.map_err(|e| e.to_string())?;
            if batch.header.is_control() || batch.header.last_offset() < offset {
                offset = offset.max(batch.header.next_offset());
                continue;
            }
            for record in batch.records().map_err(|e| e.to_string())? {
                let r = record.map_err(|e| e.to_string())?;
                let at = r.offset(batch.header.base_offset);
                if let Some(k) = r.key {
                    out.push((at, k, r.value));
                }
            }
            offset = batch.header.next_offset();
        }
        if offset == before {
            return Ok(out);
        }
    }
}
