//! Java's hashing where Kafka's answers depend on it: which coordinator partition owns a key
//! (Kafka's `GroupCoordinatorService.partitionFor` and `TransactionStateManager.partitionFor`,
//! both `Utils.abs(key.hashCode()) % partitions`), and the iteration order of a `HashMap`
//! (the client-quota answers, the SASL mechanism list).
//! Clients never compute this (they ask FindCoordinator), but every broker must agree with
//! Kafka so a mixed or migrated `__consumer_offsets` keeps each group on its partition.

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// The order a `java.util.HashMap` built by inserting `items` (hashes given, equal keys
/// already merged, first-insertion order) iterates them, for a map created with
/// `new HashMap<>(initial)` (`initial` = 16 for the default constructor). Buckets ascend;
/// within a bucket, insertion order (resizes keep it). Trees of 8+ colliding keys are not
/// modelled: the maps here hold a handful of entries.
pub fn java_hash_order<T>(items: Vec<(i32, T)>, initial: usize) -> Vec<T> {
    // The table starts at the next power of two of `initial` (at least 1) and doubles while
    // the size is over 3/4 of it, checked after each insertion.
    let mut cap = initial.max(1).next_power_of_two();
    // A table allocated from an initial capacity has threshold cap * 0.75 truncated.
    while items.len() > cap * 3 / 4 {
        cap *= 2;
    }
    let mut indexed: Vec<(usize, usize, T)> = items
        .into_iter()
        .enumerate()
        .map(|(i, (h, t))| {
            let spread = (h ^ ((h as u32) >> 16) as i32) as u32 as usize;
            (spread & (cap - 1), i, t)
        })
        .collect();
    indexed.sort_by_key(|(bucket, i, _)| (*bucket, *i));
    indexed.into_iter().map(|(_, _, t)| t).collect()
}

/// Kafka's `Utils.abs`: `Math.abs` except that `Integer.MIN_VALUE` maps to 0 (where `Math.abs`
/// would stay negative). Note this is not `Utils.toPositive` (`x & 0x7fffffff`, used by the
/// producer's partitioner): for `-1` they give 1 and 2147483647.
pub fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The coordinator partition of `key` among `num_partitions` (`offsets.topic.num.partitions`
/// for group ids, `transaction.state.log.num.partitions` for transactional ids).
pub fn coordinator_partition(key: &str, num_partitions: i32) -> i32 {
    assert!(
        num_partitions > 0,
        "coordinator topics have at least one partition"
    );
    kafka_abs(java_string_hash(key)) % num_partitions
}

/// Partition of `__consumer_offsets` that coordinates `group_id`.
pub fn group_partition(group_id: &str, offsets_topic_num_partitions: i32) -> i32 {
    coordinator_partition(group_id, offsets_topic_num_partitions)
}

/// Partition of `__transaction_state` that coordinates `transactional_id`.
pub fn transaction_partition(transactional_id: &str, transaction_state_num_partitions: i32) -> i32 {
    coordinator_partition(transactional_id, transaction_state_num_partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (key, Java hashCode, partition of 50, partition of 7), computed with Java 17's
    /// `String.hashCode` and Kafka's `Utils.abs`.
    const KNOWN: &[(&str, i32, i32, i32)] = &[
        ("", 0, 0, 0),
        ("my-group", -1906497762, 12, 1),
        ("test-consumer-group", -1793216381, 31, 5),
        ("console-consumer-12345", 158455506, 6, 6),
        ("polygenelubricants", i32::MIN, 0, 0),
        ("GydZG_", i32::MIN, 0, 0),
        ("DESIGNING WORKHOUSES", i32::MIN, 0, 0),
        ("groupé", -1237460406, 6, 0),
        ("日本語グループ", -305235731, 31, 3),
        ("😀group", -1231696132, 32, 2),
        ("txn-1", 110810510, 10, 6),
        ("Aa", 2112, 12, 5),
        ("BB", 2112, 12, 5),
    ];

    #[test]
    fn hash_matches_java() {
        for &(key, hash, _, _) in KNOWN {
            assert_eq!(java_string_hash(key), hash, "{key}");
        }
    }

    #[test]
    fn partitions_match_kafka() {
        for &(key, _, p50, p7) in KNOWN {
            assert_eq!(group_partition(key, 50), p50, "{key}");
            assert_eq!(transaction_partition(key, 7), p7, "{key}");
        }
    }

    #[test]
    fn abs_is_not_to_positive() {
        // -1906497762 & 0x7fffffff = 240985886 -> 36 of 50, but Kafka uses 12.
        assert_eq!(group_partition("my-group", 50), 12);
        assert_eq!(kafka_abs(-1), 1);
        assert_eq!(kafka_abs(i32::MIN), 0);
    }
}
