//! Record batch v2 codec against Kafka's facts: batches written by the Java client
//! (kafka-clients 4.4.0 `MemoryRecordsBuilder`, fixtures in src/records/testdata), round trips
//! through every codec, CRC checks, in-place rewrites, produce-path validation, and bad input.

use bytes::Bytes;
use kactor_protocol::records::*;

const ALL: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn hex(s: &str) -> Bytes {
    let s = s.trim();
    Bytes::from(
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>(),
    )
}

fn java_fixture(codec: Compression) -> Bytes {
    hex(match codec {
        Compression::None => include_str!("../src/records/testdata/java_none.hex"),
        Compression::Gzip => include_str!("../src/records/testdata/java_gzip.hex"),
        Compression::Snappy => include_str!("../src/records/testdata/java_snappy.hex"),
        Compression::Lz4 => include_str!("../src/records/testdata/java_lz4.hex"),
        Compression::Zstd => include_str!("../src/records/testdata/java_zstd.hex"),
    })
}

/// The records the Java generator (testdata/Gen.java) writes: (timestamp, key, value, headers).
type Expected = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);
fn expected_records() -> Vec<Expected> {
    (0..5)
        .map(|i| {
            let key = (i != 2).then(|| format!("key-{i}").into_bytes());
            let value = (i != 3).then(|| format!("value-{i}-{}", "x".repeat(40 * i)).into_bytes());
            let headers = if i % 2 == 0 {
                vec![
                    ("h1".to_string(), Some(format!("v{i}").into_bytes())),
                    ("h2".to_string(), None),
                ]
            } else {
                vec![]
            };
            (1_700_000_000_000 + i as i64 * 7, key, value, headers)
        })
        .collect()
}

/// Builds the same batch as the Java generator, with our builder.
fn build_like_java(codec: Compression) -> Bytes {
    let mut b = BatchBuilder::new(0)
        .compression(codec)
        .producer(4242, 3, 17);
    for (ts, key, value, headers) in expected_records() {
        let hs: Vec<(&str, Option<&[u8]>)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        b.append(ts, key.as_deref(), value.as_deref(), &hs).unwrap();
    }
    b.build().unwrap()
}

fn assert_records_match(batch: &RecordBatch) {
    let records: Vec<Record> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
    let expected = expected_records();
    assert_eq!(records.len(), expected.len());
    for (i, (r, (ts, key, value, headers))) in records.iter().zip(expected).enumerate() {
        assert_eq!(
            r.offset(batch.header.base_offset),
            batch.header.base_offset + i as i64
        );
        assert_eq!(r.timestamp(batch.header.base_timestamp), ts);
        assert_eq!(r.key.as_deref(), key.as_deref());
        assert_eq!(r.value.as_deref(), value.as_deref());
        let got: Vec<(String, Option<Vec<u8>>)> = r
            .headers
            .iter()
            .map(|h| {
                (
                    String::from_utf8(h.key.to_vec()).unwrap(),
                    h.value.as_ref().map(|v| v.to_vec()),
                )
            })
            .collect();
        assert_eq!(got, headers);
    }
}

#[test]
fn java_client_batches_decode_for_every_codec() {
    for codec in ALL {
        let buf = java_fixture(codec);
        let all: Vec<RecordBatch> = batches(buf.clone()).collect::<Result<_, _>>().unwrap();
        assert_eq!(all.len(), 1, "{codec:?}");
        let batch = &all[0];
        batch.verify_crc().unwrap();
        let h = batch.header;
        assert_eq!(h.compression().unwrap(), codec);
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (4242, 3, 17)
        );
        assert_eq!((h.records_count, h.last_offset_delta), (5, 4));
        assert_eq!(
            (h.base_timestamp, h.max_timestamp),
            (1_700_000_000_000, 1_700_000_000_028)
        );
        assert_eq!(h.partition_leader_epoch, NO_PARTITION_LEADER_EPOCH);
        assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
        assert_records_match(batch);
        let v = validate_batch(&buf).unwrap();
        assert_eq!(v.compression, codec);
        assert_eq!(v.records_count, 5);
        assert_eq!(v.records_checked, codec == Compression::None);
    }
}

#[test]
fn builder_matches_java_byte_for_byte_when_uncompressed() {
    assert_eq!(
        build_like_java(Compression::None),
        java_fixture(Compression::None)
    );
    // Compressed bytes depend on the compressor, but the records inside must be identical.
    for codec in ALL {
        let ours = RecordBatch::parse(&build_like_java(codec)).unwrap();
        let java = RecordBatch::parse(&java_fixture(codec)).unwrap();
        assert_eq!(
            ours.uncompressed_payload(1 << 20).unwrap(),
            java.uncompressed_payload(1 << 20).unwrap()
        );
        let mut ours_h = ours.header;
        let mut java_h = java.header;
        (
            ours_h.batch_length,
            ours_h.crc,
            java_h.batch_length,
            java_h.crc,
        ) = (0, 0, 0, 0);
        assert_eq!(ours_h, java_h, "{codec:?}");
    }
}

#[test]
fn end_transaction_marker_matches_java() {
    let java = hex(include_str!(
        "../src/records/testdata/java_commit_marker.hex"
    ));
    let ours = end_transaction_marker_batch(
        100,
        1_700_000_000_123,
        5,
        4242,
        3,
        EndTransactionMarker::commit(9),
    )
    .unwrap();
    assert_eq!(ours, java);
    let batch = RecordBatch::parse(&ours).unwrap();
    assert!(batch.header.is_control() && batch.header.is_transactional());
    let r = batch.records().unwrap().next().unwrap().unwrap();
    let m = EndTransactionMarker::parse(r.key.as_deref().unwrap(), r.value.as_deref()).unwrap();
    assert_eq!(m, EndTransactionMarker::commit(9));
    // Markers come from the coordinator path; clients may not write them.
    let coord = ValidationOptions {
        origin: AppendOrigin::Coordinator,
        ..Default::default()
    };
    assert!(validate_batch_with(&ours, &coord).unwrap().is_control);
    assert_eq!(validate_batch(&ours).unwrap_err().error_code(), 87);
}

#[test]
fn kraft_control_batch_matches_java() {
    let java = hex(include_str!(
        "../src/records/testdata/java_leader_change.hex"
    ));
    let batch = RecordBatch::parse(&java).unwrap();
    assert!(batch.header.is_control() && !batch.header.is_transactional());
    let r = batch.records().unwrap().next().unwrap().unwrap();
    assert_eq!(
        ControlRecordType::parse_key(r.key.as_deref().unwrap()).unwrap(),
        ControlRecordType::LeaderChange
    );
    let ours = control_record_batch(
        42,
        1_700_000_000_456,
        8,
        ControlRecordType::LeaderChange,
        &r.value.unwrap(),
    )
    .unwrap();
    assert_eq!(ours, java);
}

#[test]
fn compression_names() {
    for codec in ALL {
        assert_eq!(Compression::from_name(codec.name()), Some(codec));
    }
    assert_eq!(
        Compression::from_name("uncompressed"),
        Some(Compression::None)
    );
    assert_eq!(Compression::from_name("producer"), None);
}

#[test]
fn every_codec_round_trips_through_the_builder() {
    for codec in ALL {
        let bytes = build_like_java(codec);
        let batch = RecordBatch::parse(&bytes).unwrap();
        batch.verify_crc().unwrap();
        assert_records_match(&batch);
        // A larger batch spans several compression blocks (xerial 32 KiB, lz4 64 KiB).
        let mut b = BatchBuilder::new(1000).compression(codec);
        let value: Vec<u8> = (0..1000u32).flat_map(|i| i.to_le_bytes()).collect();
        for i in 0..300 {
            b.append(i, Some(format!("k{i}").as_bytes()), Some(&value), &[])
                .unwrap();
        }
        let big = b.build().unwrap();
        let batch = RecordBatch::parse(&big).unwrap();
        let n = batch
            .records()
            .unwrap()
            .map(|r| assert_eq!(r.unwrap().value.unwrap(), value[..]))
            .count();
        assert_eq!(n, 300);
        assert_eq!(validate_batch(&big).unwrap().last_offset_delta, 299);
    }
}

#[test]
fn uncompressed_records_are_slices_of_the_batch() {
    let bytes = build_like_java(Compression::None);
    let batch = RecordBatch::parse(&bytes).unwrap();
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    for r in batch.records().unwrap() {
        let r = r.unwrap();
        if let Some(v) = &r.value {
            assert!(range.contains(&(v.as_ptr() as usize)), "value was copied");
        }
    }
}

#[test]
fn crc_detects_any_flipped_byte_in_the_covered_range() {
    let bytes = build_like_java(Compression::Lz4).to_vec();
    for i in 21..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x40;
        assert!(
            matches!(verify_crc(&bad), Err(RecordError::CrcMismatch { .. })),
            "flip at {i} not detected"
        );
        let err = validate_batch(&bad).unwrap_err();
        assert_eq!(err.error_code(), 2, "flip at {i}: {err}");
    }
}

#[test]
fn rewriting_base_offset_and_leader_epoch_keeps_the_crc() {
    for codec in ALL {
        let mut bytes = build_like_java(codec).to_vec();
        let crc_before = bytes[CRC_OFFSET..CRC_OFFSET + 4].to_vec();
        set_base_offset(&mut bytes, 1_234_567);
        set_partition_leader_epoch(&mut bytes, 42);
        assert_eq!(&bytes[CRC_OFFSET..CRC_OFFSET + 4], &crc_before[..]);
        verify_crc(&bytes).unwrap();
        let h = BatchHeader::parse(&bytes).unwrap();
        assert_eq!(
            (h.base_offset, h.partition_leader_epoch, h.last_offset()),
            (1_234_567, 42, 1_234_571)
        );
        validate_batch(&bytes).unwrap();
    }
}

#[test]
fn log_append_time_sets_the_flag_and_max_timestamp() {
    for codec in ALL {
        let mut bytes = build_like_java(codec).to_vec();
        set_log_append_time(&mut bytes, 1_800_000_000_000).unwrap();
        verify_crc(&bytes).unwrap();
        let batch = RecordBatch::parse(&Bytes::from(bytes)).unwrap();
        assert_eq!(batch.header.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(batch.header.max_timestamp, 1_800_000_000_000);
        assert_eq!(batch.compression().unwrap(), codec);
        assert_records_match(&batch);
    }
}

#[test]
fn recompress_between_every_pair_keeps_everything_but_the_codec() {
    for from in ALL {
        let mut src = build_like_java(from).to_vec();
        set_base_offset(&mut src, 77);
        set_partition_leader_epoch(&mut src, 6);
        for to in ALL {
            let out = recompress(&src, to).unwrap();
            verify_crc(&out).unwrap();
            let batch = RecordBatch::parse(&out).unwrap();
            assert_eq!(batch.compression().unwrap(), to);
            let (mut a, mut b) = (BatchHeader::parse(&src).unwrap(), batch.header);
            (
                a.attributes,
                a.batch_length,
                a.crc,
                b.attributes,
                b.batch_length,
                b.crc,
            ) = (0, 0, 0, 0, 0, 0);
            assert_eq!(a, b, "{from:?} -> {to:?}");
            assert_records_match(&batch);
            validate_batch(&out).unwrap();
        }
    }
}

#[test]
fn transactional_flag_and_producer_fields_survive() {
    let mut b = BatchBuilder::new(0)
        .producer(99, 2, 1000)
        .transactional(true)
        .compression(Compression::Zstd);
    b.append(5, None, Some(b"v"), &[]).unwrap();
    let bytes = b.build().unwrap();
    let v = validate_batch(&bytes).unwrap();
    assert!(v.is_transactional && !v.is_control);
    assert_eq!(
        (v.producer_id, v.producer_epoch, v.base_sequence),
        (99, 2, 1000)
    );
}

#[test]
fn client_validation_rules() {
    let one = |b: BatchBuilder| {
        let mut b = b;
        b.append(1, None, Some(b"v"), &[]).unwrap();
        b.build().unwrap()
    };
    // Empty batch: rejected from a client, accepted when replicating (the cleaner leaves them).
    let empty = BatchBuilder::new(0).last_offset_delta(3).build().unwrap();
    assert_eq!(validate_batch(&empty).unwrap_err().error_code(), 87);
    let repl = ValidationOptions {
        origin: AppendOrigin::Replication,
        ..Default::default()
    };
    assert_eq!(validate_batch_with(&empty, &repl).unwrap().records_count, 0);
    // Idempotent producer without a sequence.
    assert!(validate_batch(&one(BatchBuilder::new(0).producer(5, 0, -1))).is_err());
    // Two batches in one produce partition.
    let two = [one(BatchBuilder::new(0)), one(BatchBuilder::new(1))].concat();
    assert_eq!(validate_batch(&two).unwrap_err().error_code(), 87);
    // message.max.bytes.
    let b = one(BatchBuilder::new(0));
    let small = ValidationOptions {
        max_batch_size: b.len() - 1,
        ..Default::default()
    };
    assert_eq!(
        validate_batch_with(&b, &small).unwrap_err().error_code(),
        10
    );
    // Offset deltas with a gap: count 2, last delta 2.
    let mut g = BatchBuilder::new(0);
    g.append(1, None, Some(b"a"), &[]).unwrap();
    g.append_with_offset_delta(2, 1, None, Some(b"b"), &[])
        .unwrap();
    let gap = g.build().unwrap();
    assert!(validate_batch(&gap).is_err());
    // Consistent header but records whose deltas are out of order: last delta 1, count 2, deltas 1,1
    // cannot be built, so rewrite the second record's delta in an uncompressed batch by hand.
    let mut b = BatchBuilder::new(0);
    b.append(1, None, Some(b"a"), &[]).unwrap();
    b.append(1, None, Some(b"b"), &[]).unwrap();
    let mut bytes = b.build().unwrap().to_vec();
    // Record layout: len, attrs, ts delta, offset delta; first record is 7 bytes + "a".
    let second = BATCH_HEADER_LEN + 1 + 7;
    assert_eq!(bytes[second + 3], 2, "zigzag(1)");
    bytes[second + 3] = 0; // offset delta 0
    write_crc(&mut bytes).unwrap();
    assert!(validate_batch(&bytes)
        .unwrap_err()
        .to_string()
        .contains("offset delta"));
    // Record max timestamp is reported from the records for uncompressed batches.
    let mut b = BatchBuilder::new(0);
    b.append(50, None, None, &[]).unwrap();
    b.append(40, None, None, &[]).unwrap();
    let mut bytes = b.build().unwrap().to_vec();
    bytes[35..43].copy_from_slice(&0i64.to_be_bytes()); // understate max timestamp
    write_crc(&mut bytes).unwrap();
    assert_eq!(validate_batch(&bytes).unwrap().max_timestamp, 50);
}

#[test]
fn timestamp_and_key_rules() {
    let build = |codec: Compression, lat: bool, entries: &[(i64, Option<&[u8]>)]| {
        let mut b = BatchBuilder::new(0).compression(codec);
        if lat {
            b = b.log_append_time(1_000);
        }
        for (ts, key) in entries {
            b.append(*ts, *key, Some(b"v"), &[]).unwrap();
        }
        b.build().unwrap()
    };
    let lat_topic = ValidationOptions {
        topic_timestamp_type: TimestampType::LogAppendTime,
        ..Default::default()
    };
    let bounded = ValidationOptions {
        timestamp_bounds: Some((100, 200)),
        ..Default::default()
    };
    let compacted = ValidationOptions {
        compacted: true,
        ..Default::default()
    };
    let inspect = |o: ValidationOptions| ValidationOptions {
        inspect_compressed: Some(1 << 20),
        ..o
    };
    for codec in ALL {
        // A producer claiming LogAppendTime: rejected on LogAppendTime topics.
        let lat = build(codec, true, &[(150, Some(b"k"))]);
        assert_eq!(
            validate_batch_with(&lat, &lat_topic)
                .unwrap_err()
                .error_code(),
            32
        );
        assert!(validate_batch(&lat).is_ok());
        assert!(validate_batch(&build(codec, false, &[(150, None)])).is_ok());
        // Timestamp bounds on CreateTime topics; -1 (no timestamp) is exempt.
        let ok = build(
            codec,
            false,
            &[(120, Some(b"k")), (-1, Some(b"k")), (200, Some(b"k"))],
        );
        assert!(validate_batch_with(&ok, &bounded).is_ok(), "{codec:?}");
        let late = build(codec, false, &[(150, Some(b"k")), (201, Some(b"k"))]);
        assert_eq!(
            validate_batch_with(&late, &bounded)
                .unwrap_err()
                .error_code(),
            32
        );
        // An early record in the middle shows only when the records are read.
        let early = build(
            codec,
            false,
            &[(150, Some(b"k")), (99, Some(b"k")), (160, Some(b"k"))],
        );
        let walked = validate_batch_with(&early, &inspect(bounded));
        assert_eq!(walked.unwrap_err().error_code(), 32, "{codec:?}");
        // Compacted topics need keys.
        let keyless = build(codec, false, &[(1, Some(b"k")), (2, None)]);
        assert_eq!(
            validate_batch_with(&keyless, &inspect(compacted))
                .unwrap_err()
                .error_code(),
            87
        );
        if codec == Compression::None {
            assert!(validate_batch_with(&keyless, &compacted).is_err());
        } else {
            assert!(
                validate_batch_with(&keyless, &compacted).is_ok(),
                "not inflated by default"
            );
        }
    }
}

#[test]
fn inspecting_compressed_batches_checks_their_records() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut g = BatchBuilder::new(0).compression(codec);
        g.append(1, None, Some(b"a"), &[]).unwrap();
        g.append_with_offset_delta(1, 1, None, Some(b"b"), &[])
            .unwrap();
        let good = g.build().unwrap();
        // Replace the records with a gapped sequence under a consistent header.
        let mut gapped = BatchBuilder::new(0);
        gapped.append(1, None, Some(b"a"), &[]).unwrap();
        gapped
            .append_with_offset_delta(2, 1, None, Some(b"b"), &[])
            .unwrap();
        let plain = RecordBatch::parse(&gapped.build().unwrap())
            .unwrap()
            .payload();
        let mut bytes = good.to_vec();
        bytes.truncate(BATCH_HEADER_LEN);
        bytes.extend_from_slice(&compress(codec, &plain).unwrap());
        let len = (bytes.len() - LOG_OVERHEAD) as i32;
        bytes[8..12].copy_from_slice(&len.to_be_bytes());
        write_crc(&mut bytes).unwrap();
        assert!(validate_batch(&bytes).is_ok(), "header-only by default");
        let opts = ValidationOptions {
            inspect_compressed: Some(1 << 20),
            ..Default::default()
        };
        assert!(validate_batch_with(&bytes, &opts)
            .unwrap_err()
            .to_string()
            .contains("offset delta"));
        assert!(validate_batch_with(&good, &opts).unwrap().records_checked);
    }
}

#[test]
fn unknown_codec_and_old_magic_are_rejected() {
    let mut bytes = build_like_java(Compression::None).to_vec();
    bytes[22] |= 0x07; // codec 7
    write_crc(&mut bytes).unwrap();
    assert!(matches!(
        validate_batch(&bytes),
        Err(RecordError::UnknownCompression(7))
    ));
    let mut bytes = build_like_java(Compression::None).to_vec();
    bytes[16] = 1;
    assert!(matches!(
        validate_batch(&bytes),
        Err(RecordError::UnsupportedMagic(1))
    ));
    assert!(matches!(
        batches(Bytes::from(bytes)).next(),
        Some(Err(RecordError::UnsupportedMagic(1)))
    ));
}

#[test]
fn memory_records_with_a_trailing_partial_batch() {
    let mut buf = Vec::new();
    for (i, codec) in ALL.iter().enumerate() {
        let mut b = build_like_java(*codec).to_vec();
        set_base_offset(&mut b, i as i64 * 5);
        buf.extend_from_slice(&b);
    }
    let whole = buf.len();
    let tail = build_like_java(Compression::Gzip);
    for cut in [0, 1, 16, 17, 60, 61, tail.len() - 1] {
        let mut with_partial = buf.clone();
        with_partial.extend_from_slice(&tail[..cut]);
        let mut it = batches(Bytes::from(with_partial));
        let got: Vec<RecordBatch> = it.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 5, "cut {cut}");
        assert_eq!(it.remaining().len(), cut);
        for (i, b) in got.iter().enumerate() {
            assert_eq!(b.header.base_offset, i as i64 * 5);
            b.verify_crc().unwrap();
            assert_records_match(b);
        }
    }
    assert_eq!(batches(Bytes::from(buf)).count(), whole.min(5));
    // An impossible batch length is an error, not a partial batch.
    let mut bad = build_like_java(Compression::None).to_vec();
    bad[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        batches(Bytes::from(bad)).next(),
        Some(Err(RecordError::InvalidLength(10)))
    ));
}

/// Wraps an arbitrary payload as a batch of `codec` (for hand-made compressed streams).
fn batch_with_payload(codec: Compression, count: i32, payload: &[u8]) -> Bytes {
    // Header fields (timestamps, producer) of the batch the Java generator writes.
    let mut bytes = build_like_java(Compression::None).to_vec();
    bytes.truncate(BATCH_HEADER_LEN);
    bytes.extend_from_slice(payload);
    let len = (bytes.len() - LOG_OVERHEAD) as i32;
    bytes[8..12].copy_from_slice(&len.to_be_bytes());
    bytes[21..23].copy_from_slice(&codec.id().to_be_bytes());
    bytes[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    bytes[57..61].copy_from_slice(&count.to_be_bytes());
    write_crc(&mut bytes).unwrap();
    Bytes::from(bytes)
}

#[test]
fn snappy_raw_and_xerial_both_decode() {
    let plain = RecordBatch::parse(&build_like_java(Compression::None))
        .unwrap()
        .payload();
    let raw = snap::raw::Encoder::new().compress_vec(&plain).unwrap();
    let raw_batch = batch_with_payload(Compression::Snappy, 5, &raw);
    let raw_batch = RecordBatch::parse(&raw_batch).unwrap();
    assert_records_match(&raw_batch);
    let xerial = RecordBatch::parse(&java_fixture(Compression::Snappy)).unwrap();
    assert_eq!(&xerial.payload()[..8], b"\x82SNAPPY\0");
    assert_records_match(&xerial);
}

#[test]
fn zip_bomb_is_refused_at_the_limit() {
    let zeros = vec![0u8; 32 * 1024 * 1024];
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let bomb = batch_with_payload(codec, 1, &compress(codec, &zeros).unwrap());
        assert!(
            bomb.len() < 2 * 1024 * 1024,
            "{codec:?} bomb is {} bytes",
            bomb.len()
        );
        // Produce-path validation never inflates it.
        validate_batch(&bomb).unwrap();
        let batch = RecordBatch::parse(&bomb).unwrap();
        assert!(matches!(
            batch.records_with_limit(1024 * 1024),
            Err(RecordError::DecompressedTooLarge { limit: 1_048_576 })
        ));
        assert!(matches!(
            recompress_with_limit(&bomb, Compression::None, 1024 * 1024),
            Err(RecordError::DecompressedTooLarge { .. })
        ));
        // Within the limit it inflates, and the garbage records are then an error, not a panic.
        assert!(batch
            .records_with_limit(64 << 20)
            .unwrap()
            .any(|r| r.is_err()));
    }
}

#[test]
fn every_truncation_is_an_error_never_a_panic() {
    for codec in ALL {
        let bytes = build_like_java(codec);
        for cut in 0..bytes.len() {
            let prefix = &bytes[..cut];
            assert!(validate_batch(prefix).is_err());
            assert!(recompress(prefix, Compression::None).is_err());
            assert_eq!(
                batches(Bytes::copy_from_slice(prefix))
                    .filter(|b| b.is_ok())
                    .count(),
                0
            );
        }
        // Truncate the records section but keep the header's length consistent.
        let full = RecordBatch::parse(&bytes).unwrap();
        let payload = full.payload();
        for cut in 0..payload.len() {
            let b = batch_with_payload(codec, 5, &payload[..cut]);
            assert!(
                validate_batch(&b).is_err() || codec != Compression::None,
                "cut {cut}"
            );
            // lz4_flex treats a frame cut inside its 4-byte end mark as complete; the records
            // before it are whole (and CRC-covered), so those cuts may decode.
            let lz4_end_mark = codec == Compression::Lz4 && cut >= payload.len() - 4;
            if let Ok(it) = RecordBatch::parse(&b).unwrap().records() {
                assert!(
                    lz4_end_mark || it.take(10).any(|r| r.is_err()),
                    "{codec:?} cut {cut} decoded"
                );
            }
        }
    }
}

/// Exercises every entry point on `buf`; only panics matter.
fn poke(buf: &[u8]) {
    let bytes = Bytes::copy_from_slice(buf);
    let _ = BatchHeader::parse(buf);
    let _ = verify_crc(buf);
    let _ = validate_batch(buf);
    let _ = validate_batch_with(
        buf,
        &ValidationOptions {
            origin: AppendOrigin::Coordinator,
            max_batch_size: 1 << 20,
            timestamp_bounds: Some((0, i64::MAX)),
            compacted: true,
            inspect_compressed: Some(1 << 20),
            ..Default::default()
        },
    );
    let _ = recompress_with_limit(buf, Compression::Lz4, 1 << 20);
    for b in batches(bytes).take(100) {
        let Ok(b) = b else { break };
        if let Ok(it) = b.records_with_limit(1 << 20) {
            // Stops at the first error, like the iterator itself.
            for r in it.take(10_000).map_while(Result::ok) {
                if let Some(k) = &r.key {
                    let _ = EndTransactionMarker::parse(k, r.value.as_deref());
                }
            }
        }
    }
    if buf.len() >= BATCH_HEADER_LEN {
        let mut m = buf.to_vec();
        let _ = set_log_append_time(&mut m, 1);
    }
}

#[test]
fn random_and_mutated_input_never_panics() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    for _ in 0..3000 {
        let len = rng.gen_range(0..300);
        let buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        poke(&buf);
    }
    // Random mutations of valid batches, with the CRC fixed up so the record decoder is reached.
    let seeds: Vec<Vec<u8>> = ALL.iter().map(|c| build_like_java(*c).to_vec()).collect();
    for _ in 0..3000 {
        let mut m = seeds[rng.gen_range(0..seeds.len())].clone();
        for _ in 0..rng.gen_range(1..6) {
            let i = rng.gen_range(0..m.len());
            m[i] = rng.gen();
        }
        if rng.gen_bool(0.2) {
            let n = rng.gen_range(0..m.len());
            m.truncate(n);
        }
        let _ = write_crc(&mut m);
        poke(&m);
    }
}

/// Writes our batches (every codec, plus recompressed and LogAppendTime variants) as hex files
/// for `src/records/testdata/Check.java` to read with the Java client: into
/// `$KACTOR_RECORDS_EXPORT` when set, else into a scratch dir. Each exported batch must be a
/// complete, CRC-valid v2 batch, so the export the Java check reads is checked here too.
#[test]
fn export_for_java_check() {
    let dir = match std::env::var_os("KACTOR_RECORDS_EXPORT") {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            let d =
                std::env::temp_dir().join(format!("kactor-records-export-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            d
        }
    };
    let to_hex = |b: &[u8]| {
        verify_crc(b).expect("exported batch must be CRC-valid");
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    };
    for codec in ALL {
        let ours = build_like_java(codec);
        std::fs::write(
            dir.join(format!("ours_{}.hex", codec.name())),
            to_hex(&ours),
        )
        .unwrap();
        let mut stamped = recompress(&java_fixture(Compression::Gzip), codec)
            .unwrap()
            .to_vec();
        set_base_offset(&mut stamped, 500);
        set_log_append_time(&mut stamped, 1_800_000_000_000).unwrap();
        std::fs::write(
            dir.join(format!("recompressed_{}.hex", codec.name())),
            to_hex(&stamped),
        )
        .unwrap();
    }
    let marker =
        end_transaction_marker_batch(7, 1, 2, 3, 4, EndTransactionMarker::abort(5)).unwrap();
    std::fs::write(dir.join("ours_abort_marker.hex"), to_hex(&marker)).unwrap();
}

/// Produce validation reads compressed records from a streaming decoder: records larger than
/// its read-ahead chunk and many records across chunks pass; the inflation bound, a truncated
/// stream and a stream that is not the codec's are refused (the last two as codec failures,
/// which Kafka answers UNKNOWN_SERVER_ERROR).
#[test]
fn compressed_records_are_walked_as_a_stream() {
    let big = vec![7u8; 150_000];
    let opts = |limit| ValidationOptions {
        inspect_compressed: Some(limit),
        ..Default::default()
    };
    for codec in ALL {
        let mut b = BatchBuilder::new(0).compression(codec);
        for i in 0..3 {
            b.append(1_700_000_000_000 + i, Some(b"k"), Some(&big), &[])
                .unwrap();
        }
        for i in 3..2000 {
            b.append(1_700_000_000_000 + i, None, Some(b"small"), &[])
                .unwrap();
        }
        let batch = b.build().unwrap();
        let v = validate_batch_with(&batch, &opts(1 << 20)).unwrap();
        assert!(v.records_checked, "{codec:?}");
        assert_eq!(v.max_timestamp, 1_700_000_000_000 + 1999, "{codec:?}");
        if codec == Compression::None {
            continue;
        }
        assert!(matches!(
            validate_batch_with(&batch, &opts(100_000)),
            Err(RecordError::DecompressedTooLarge { limit: 100_000 })
        ));
        // The payload cut in half, the header and CRC made to match.
        let mut cut = batch[..BATCH_HEADER_LEN + (batch.len() - BATCH_HEADER_LEN) / 2].to_vec();
        let len = (cut.len() - LOG_OVERHEAD) as i32;
        cut[8..12].copy_from_slice(&len.to_be_bytes());
        write_crc(&mut cut).unwrap();
        let err = validate_batch_with(&cut, &opts(1 << 20)).unwrap_err();
        assert!(
            matches!(err, RecordError::Compression(_)),
            "{codec:?}: {err:?}"
        );
        // Another codec's stream under this codec's flag.
        let other = if codec == Compression::Gzip {
            Compression::Zstd
        } else {
            Compression::Gzip
        };
        let mut swapped = BatchBuilder::new(0).compression(other);
        swapped
            .append(1_700_000_000_000, None, Some(b"v"), &[])
            .unwrap();
        let mut swapped = swapped.build().unwrap().to_vec();
        let attributes = (i16::from_be_bytes([swapped[21], swapped[22]]) & !7) | codec as i16;
        swapped[21..23].copy_from_slice(&attributes.to_be_bytes());
        write_crc(&mut swapped).unwrap();
        let err = validate_batch_with(&swapped, &opts(1 << 20)).unwrap_err();
        assert!(
            matches!(err, RecordError::Compression(_)),
            "{codec:?}: {err:?}"
        );
    }
}
