//! The embedded consumer protocol of classic groups (Kafka's `ConsumerProtocol` with its
//! `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment` messages, versions 0–3):
//! what a classic member puts in JoinGroup's protocol metadata and receives as its SyncGroup
//! assignment. The coordinator reads and writes them only when classic members live in a
//! KIP-848 consumer group (online migration). Non-flexible encoding: int16 string lengths,
//! int32 array counts and nullable bytes (-1 = null).

use bytes::Bytes;

/// Highest `ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` version Kafka 4.4 knows.
pub const CONSUMER_PROTOCOL_MAX_VERSION: i16 = 3;

/// A decoded `ConsumerProtocolSubscription`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerSubscription {
    pub version: i16,
    pub topics: Vec<String>,
    pub user_data: Option<Bytes>,
    /// v1+: (topic name, partitions) the member owns (cooperative rebalancing).
    pub owned_partitions: Vec<(String, Vec<i32>)>,
    /// v2+, else -1.
    pub generation_id: i32,
    /// v3+.
    pub rack_id: Option<String>,
}

/// A decoded `ConsumerProtocolAssignment`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerAssignment {
    pub partitions: Vec<(String, Vec<i32>)>,
    pub user_data: Option<Bytes>,
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn nullable_string(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        Some(Some(
            String::from_utf8(self.take(len as usize)?.to_vec()).ok()?,
        ))
    }
    fn string(&mut self) -> Option<String> {
        self.nullable_string()?
    }
    /// An array count, refused when the rest of the buffer cannot hold that many
    /// `min_size`-byte elements (a hostile count must not drive an allocation).
    fn count(&mut self, min_size: usize) -> Option<usize> {
        let n = self.i32()?;
        if n < 0 || n as usize > self.0.len() / min_size.max(1) {
            return None;
        }
        Some(n as usize)
    }
    fn nullable_bytes(&mut self) -> Option<Option<Bytes>> {
        let len = self.i32()?;
        if len < 0 {
            return Some(None);
        }
        Some(Some(Bytes::copy_from_slice(self.take(len as usize)?)))
    }
    fn topic_partitions(&mut self) -> Option<Vec<(String, Vec<i32>)>> {
        let n = self.count(6)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let topic = self.string()?;
            let np = self.count(4)?;
            let mut ps = Vec::with_capacity(np);
            for _ in 0..np {
                ps.push(self.i32()?);
            }
            out.push((topic, ps));
        }
        Some(out)
    }
}

/// Decodes a subscription of any version (fields of versions above 3 are ignored, as Kafka's
/// parser reads newer versions by their known prefix). None if it does not parse.
pub fn decode_subscription(metadata: &[u8]) -> Option<ConsumerSubscription> {
    let mut r = Reader(metadata);
    let version = r.i16()?;
    if version < 0 {
        return None;
    }
    let n = r.count(2)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(r.string()?);
    }
    // Kafka accepts a v0 subscription without its trailing user data.
    let user_data = if r.0.is_empty() {
        None
    } else {
        r.nullable_bytes()?
    };
    let mut s = ConsumerSubscription {
        version,
        topics,
        user_data,
        generation_id: -1,
        ..Default::default()
    };
    if version >= 1 && !r.0.is_empty() {
        s.owned_partitions = r.topic_partitions()?;
    }
    if version >= 2 && !r.0.is_empty() {
        s.generation_id = r.i32()?;
    }
    if version >= 3 && !r.0.is_empty() {
        s.rack_id = r.nullable_string()?;
    }
    Some(s)
}

/// Decodes an assignment; an empty buffer is an empty assignment (a member that never synced).
pub fn decode_assignment(bytes: &[u8]) -> Option<ConsumerAssignment> {
    if bytes.is_empty() {
        return Some(ConsumerAssignment::default());
    }
    let mut r = Reader(bytes);
    if r.i16()? < 0 {
        return None;
    }
    let partitions = r.topic_partitions()?;
    let user_data = if r.0.is_empty() {
        None
    } else {
        r.nullable_bytes()?
    };
    Some(ConsumerAssignment {
        partitions,
        user_data,
    })
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Encodes an assignment (no user data) at `version`, clamped to 0..=3 as Kafka's
/// `serializeAssignment` writes the version the member's subscription used.
pub fn encode_assignment(version: i16, partitions: &[(String, Vec<i32>)]) -> Bytes {
    let version = version.clamp(0, CONSUMER_PROTOCOL_MAX_VERSION);
    let mut out = Vec::new();
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
    for (topic, ps) in partitions {
        put_string(&mut out, topic);
        out.extend_from_slice(&(ps.len() as i32).to_be_bytes());
        for p in ps {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i32).to_be_bytes()); // null user data
    Bytes::from(out)
}

/// Encodes a subscription at `version` (0..=3): tests and tools.
pub fn encode_subscription(version: i16, s: &ConsumerSubscription) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&(s.topics.len() as i32).to_be_bytes());
    for t in &s.topics {
        put_string(&mut out, t);
    }
    match &s.user_data {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
    if version >= 1 {
        out.extend_from_slice(&(s.owned_partitions.len() as i32).to_be_bytes());
        for (topic, ps) in &s.owned_partitions {
            put_string(&mut out, topic);
            out.extend_from_slice(&(ps.len() as i32).to_be_bytes());
            for p in ps {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
    }
    if version >= 2 {
        out.extend_from_slice(&s.generation_id.to_be_bytes());
    }
    if version >= 3 {
        match &s.rack_id {
            None => out.extend_from_slice(&(-1i16).to_be_bytes()),
            Some(r) => put_string(&mut out, r),
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_round_trips_at_every_version() {
        let full = ConsumerSubscription {
            version: 3,
            topics: vec!["a".into(), "b".into()],
            user_data: Some(Bytes::from_static(b"ud")),
            owned_partitions: vec![("a".into(), vec![0, 2])],
            generation_id: 7,
            rack_id: Some("r1".into()),
        };
        for version in 0..=3 {
            let bytes = encode_subscription(version, &full);
            let got = decode_subscription(&bytes).expect("parses");
            assert_eq!(got.version, version);
            assert_eq!(got.topics, full.topics);
            assert_eq!(got.user_data, full.user_data);
            let want_owned = if version >= 1 {
                full.owned_partitions.clone()
            } else {
                Vec::new()
            };
            assert_eq!(got.owned_partitions, want_owned);
            assert_eq!(got.generation_id, if version >= 2 { 7 } else { -1 });
            assert_eq!(
                got.rack_id,
                if version >= 3 {
                    Some("r1".into())
                } else {
                    None
                }
            );
        }
    }

    #[test]
    fn assignment_round_trips_and_empty_means_nothing() {
        let parts = vec![("t".to_string(), vec![1, 3]), ("u".to_string(), vec![0])];
        let bytes = encode_assignment(9, &parts);
        assert_eq!(&bytes[..2], &3i16.to_be_bytes()); // clamped to the highest known
        let got = decode_assignment(&bytes).unwrap();
        assert_eq!(got.partitions, parts);
        assert_eq!(got.user_data, None);
        assert_eq!(decode_assignment(&[]), Some(ConsumerAssignment::default()));
    }

    #[test]
    fn hostile_counts_and_truncation_are_refused() {
        // Version 0, topic count 2^31-1, nothing after it.
        let mut bad = 0i16.to_be_bytes().to_vec();
        bad.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(decode_subscription(&bad), None);
        assert_eq!(decode_assignment(&bad), None);
        let ok = encode_subscription(
            1,
            &ConsumerSubscription {
                topics: vec!["abc".into()],
                ..Default::default()
            },
        );
        assert_eq!(decode_subscription(&ok[..ok.len() - 2]), None);
        assert_eq!(decode_subscription(&(-1i16).to_be_bytes()), None);
    }
}
