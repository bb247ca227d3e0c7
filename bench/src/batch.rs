//! Batch consumption: librdkafka's `rd_kafka_consume_batch_queue`, the call behind
//! confluent-kafka-python's `Consumer.consume(num_messages)` and Kafka's Java consumer handing
//! `poll()` a batch of records. The rdkafka crate wraps only the one-message poll, whose
//! per-call queue lock and clock read cost about as much as librdkafka's parsing of a 100 B
//! record: with it the consumer loop, not the broker, set the consumer figures.

use std::ffi::CString;
use std::time::Duration;

use anyhow::{bail, Result};

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::types::RDKafkaErrorCode;

/// Reads up to `capacity` records per call from a queue of its own, into which the topic's
/// partition queues are forwarded. Not the consumer queue: librdkafka's batch call serves the
/// statistics events it meets there with the C statistics callback, which the rdkafka crate
/// leaves unset (it takes them as events from `poll`), so they would be dropped. Records go to
/// this queue instead, and the consumer queue keeps only events, served by
/// `BaseConsumer::poll`.
pub struct BatchReader<'a, C: ConsumerContext + 'static> {
    // Borrowed so the consumer outlives the queue handle taken from it.
    _consumer: &'a BaseConsumer<C>,
    queue: *mut rd::rd_kafka_queue_t,
    slots: Vec<*mut rd::rd_kafka_message_t>,
}

impl<'a, C: ConsumerContext + 'static> BatchReader<'a, C> {
    /// Takes over partitions `0..partitions` of `topic`; call it before they are assigned, so
    /// that no record reaches the consumer queue first.
    pub fn new(
        consumer: &'a BaseConsumer<C>,
        topic: &str,
        partitions: i32,
        capacity: usize,
    ) -> Result<Self> {
        let rk = consumer.client().native_ptr();
        let name = CString::new(topic)?;
        // SAFETY: the client pointer is valid while `consumer` lives, which the borrow
        // guarantees for as long as the queue handles; each partition queue handle is released
        // right after it is forwarded (the forwarding stays), and librdkafka keeps an
        // application-set forward when it starts fetching the partition.
        let queue = unsafe { rd::rd_kafka_queue_new(rk) };
        if queue.is_null() {
            bail!("librdkafka returned no queue");
        }
        let reader = BatchReader {
            _consumer: consumer,
            queue,
            slots: vec![std::ptr::null_mut(); capacity.max(1)],
        };
        for p in 0..partitions {
            // SAFETY: as above; `name` outlives the call.
            let pq = unsafe { rd::rd_kafka_queue_get_partition(rk, name.as_ptr(), p) };
            if pq.is_null() {
                bail!("librdkafka has no queue for {topic} [{p}]");
            }
            // SAFETY: both handles are live; `pq` is released once, here.
            unsafe {
                rd::rd_kafka_queue_forward(pq, queue);
                rd::rd_kafka_queue_destroy(pq);
            }
        }
        Ok(reader)
    }

    /// Waits up to `timeout` for up to `limit` records (at most the reader's capacity) and
    /// calls `each` with every record's value length (or its error). Returns how many came
    /// back. librdkafka returns early only once it has `limit` records, so a caller that knows
    /// how many remain asks for no more than that: otherwise the last call waits out the
    /// timeout.
    pub fn read(
        &mut self,
        timeout: Duration,
        limit: usize,
        mut each: impl FnMut(Result<usize, String>),
    ) -> usize {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `slots` has room for `slots.len()` message pointers; librdkafka fills the
        // first `n` and hands their ownership to us.
        let n = unsafe {
            rd::rd_kafka_consume_batch_queue(
                self.queue,
                ms,
                self.slots.as_mut_ptr(),
                limit.clamp(1, self.slots.len()),
            )
        };
        let n = usize::try_from(n).unwrap_or(0);
        for &m in &self.slots[..n] {
            // SAFETY: each of the first `n` slots is a live message we own until destroyed
            // right below; nothing keeps a reference past this iteration.
            let (err, len) = unsafe { ((*m).err, (*m).len) };
            if err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                each(Ok(len));
            } else {
                each(Err(RDKafkaErrorCode::from(err).to_string()));
            }
            // SAFETY: as above; destroyed exactly once.
            unsafe { rd::rd_kafka_message_destroy(m) };
        }
        n
    }
}

impl<C: ConsumerContext + 'static> Drop for BatchReader<'_, C> {
    fn drop(&mut self) {
        // SAFETY: the handle came from rd_kafka_queue_get_consumer and is released once.
        unsafe { rd::rd_kafka_queue_destroy(self.queue) };
    }
}
