//! The cleaner's dedupe map (Kafka's `OffsetMap` / `SkimpyOffsetMap`): key hash → latest offset,
//! in a table whose memory is fixed when it is created, so a cleaner never uses more than its
//! share of `log.cleaner.dedupe.buffer.size`.
//!
//! Like Kafka, a slot costs 24 bytes: a 16-byte digest of the key (two records whose keys share
//! a digest would be treated as one key; at 128 bits that does not happen in practice) and an
//! 8-byte offset. Open addressing with linear probing; a slot holding 0 is free (offsets are
//! stored plus one). The tables are zeroed allocations, so pages a cleaning never probes are
//! never touched, and clearing allocates them afresh instead of writing every slot: resident
//! memory follows the keys a cleaning saw, up to the configured size.

use sha2::{Digest, Sha256};

/// Bytes of memory per slot: 16 bytes of key digest plus the 8-byte offset.
pub const BYTES_PER_SLOT: usize = 24;

type KeyHash = [u8; 16];

pub struct OffsetMap {
    hashes: Vec<KeyHash>,
    /// Offset + 1; 0 = free.
    offsets: Vec<i64>,
    entries: usize,
    /// The last offset put or set with [`OffsetMap::update_latest_offset`] (-1 when cleared).
    latest_offset: i64,
    lookups: u64,
    probes: u64,
}

impl std::fmt::Debug for OffsetMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetMap")
            .field("slots", &self.slots())
            .field("entries", &self.entries)
            .field("latest_offset", &self.latest_offset)
            .finish()
    }
}

fn digest(key: &[u8]) -> KeyHash {
    let full = Sha256::digest(key);
    let mut h = [0u8; 16];
    h.copy_from_slice(&full[..16]);
    h
}

impl OffsetMap {
    /// A map using at most `memory` bytes (at least one slot).
    pub fn new(memory: usize) -> Self {
        let slots = (memory / BYTES_PER_SLOT).max(1);
        OffsetMap {
            hashes: vec![[0u8; 16]; slots],
            offsets: vec![0; slots],
            entries: 0,
            latest_offset: -1,
            lookups: 0,
            probes: 0,
        }
    }

    pub fn slots(&self) -> usize {
        self.offsets.len()
    }
    pub fn size(&self) -> usize {
        self.entries
    }
    /// Share of the slots in use (Kafka's `utilization`).
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots() as f64
    }
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }
    /// Average probes per lookup so far (a health figure of the table, for logs).
    pub fn collision_rate(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            (self.probes as f64 - self.lookups as f64) / self.lookups as f64
        }
    }

    pub fn clear(&mut self) {
        let slots = self.slots();
        if self.entries > 0 {
            // Fresh zeroed pages (the old ones go back to the allocator), not a pass over all.
            self.hashes = vec![[0u8; 16]; slots];
            self.offsets = vec![0; slots];
        }
        self.entries = 0;
        self.latest_offset = -1;
        self.lookups = 0;
        self.probes = 0;
    }

    /// The slot holding `hash`, or the free slot where it would go.
    fn slot_of(&mut self, hash: &KeyHash) -> usize {
        let n = self.slots();
        let start =
            (u64::from_le_bytes(hash[..8].try_into().expect("8 bytes")) % n as u64) as usize;
        self.lookups += 1;
        let mut i = start;
        loop {
            self.probes += 1;
            if self.offsets[i] == 0 || &self.hashes[i] == hash {
                return i;
            }
            i += 1;
            if i == n {
                i = 0;
            }
            // The caller never lets the table fill up (it stops at the load factor), so a free
            // slot is always found; a full table would mean a caller bug.
            assert!(i != start, "offset map full");
        }
    }

    /// Records `offset` as the latest for `key` (later puts of a key win). The caller keeps the
    /// map below its load factor; putting a new key into a full table panics.
    pub fn put(&mut self, key: &[u8], offset: i64) {
        debug_assert!(offset >= 0);
        let hash = digest(key);
        let i = self.slot_of(&hash);
        if self.offsets[i] == 0 {
            self.entries += 1;
            self.hashes[i] = hash;
        }
        self.offsets[i] = offset + 1;
        self.latest_offset = offset;
    }

    /// The latest offset recorded for `key`, or -1.
    pub fn get(&mut self, key: &[u8]) -> i64 {
        let hash = digest(key);
        let i = self.slot_of(&hash);
        self.offsets[i] - 1
    }

    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_put_wins_and_memory_bounds_slots() {
        let mut m = OffsetMap::new(24 * 100);
        assert_eq!(m.slots(), 100);
        for i in 0..90i64 {
            m.put(format!("k{}", i % 30).as_bytes(), i);
        }
        assert_eq!(m.size(), 30);
        for k in 0..30i64 {
            assert_eq!(m.get(format!("k{k}").as_bytes()), 60 + k);
        }
        assert_eq!(m.get(b"absent"), -1);
        assert_eq!(m.latest_offset(), 89);
        m.clear();
        assert_eq!((m.size(), m.get(b"k1"), m.latest_offset()), (0, -1, -1));
    }

    #[test]
    fn fills_to_the_last_slot() {
        let mut m = OffsetMap::new(24 * 64);
        for i in 0..64i64 {
            m.put(&i.to_be_bytes(), i);
        }
        assert_eq!(m.size(), 64);
        for i in 0..64i64 {
            assert_eq!(m.get(&i.to_be_bytes()), i);
        }
    }
}
