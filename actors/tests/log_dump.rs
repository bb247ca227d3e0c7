//! Kafka's own `kafka-dump-log` (org.apache.kafka.tools.DumpLogSegments, Kafka 4.4.0) reads the
//! segments, offset indexes and time indexes our log writes, including a gzip batch with
//! `--deep-iteration`. Needs java and the Kafka jars: the classpath comes from `KAFKA_CLASSPATH`
//! or is resolved with Maven from `tests/log_kafka/pom.xml`; without them the test is skipped
//! with a message.

use std::path::{Path, PathBuf};
use std::process::Command;

use kactor_actors::log::testing::{build_batch, simple_batch, TestRecord};
use kactor_actors::log::{Log, LogConfig};

fn classpath() -> Option<String> {
    if let Ok(cp) = std::env::var("KAFKA_CLASSPATH") {
        if !cp.is_empty() {
            return Some(cp);
        }
    }
    if Command::new("java").arg("-version").output().is_err() {
        return None;
    }
    let pom = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/log_kafka/pom.xml");
    let out = std::env::temp_dir().join(format!("kactor-log-dump-cp-{}.txt", std::process::id()));
    let ok = |offline: bool| {
        let mut cmd = Command::new("mvn");
        cmd.arg("-q");
        if offline {
            cmd.arg("-o");
        }
        cmd.arg("-f")
            .arg(&pom)
            .arg("dependency:build-classpath")
            .arg(format!("-Dmdep.outputFile={}", out.display()));
        cmd.status().map(|s| s.success()).unwrap_or(false)
    };
    if !(ok(true) || ok(false)) {
        return None;
    }
    let cp = std::fs::read_to_string(&out).ok()?;
    let _ = std::fs::remove_file(&out);
    Some(cp.trim().to_string())
}

fn dump(cp: &str, args: &[&str]) -> String {
    let out = Command::new("java")
        .arg("-cp")
        .arg(cp)
        .arg("org.apache.kafka.tools.DumpLogSegments")
        .args(args)
        .output()
        .expect("java runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "kafka-dump-log failed: {stdout}\n{stderr}"
    );
    stdout
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!("{name}: "))? + name.len() + 2;
    line[at..].split_whitespace().next()
}

fn file(dir: &Path, base: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base:020}{suffix}"))
}

#[test]
fn kafka_dump_log_reads_our_segments_and_indexes() {
    let Some(cp) = classpath() else {
        eprintln!("SKIPPED kafka_dump_log_reads_our_segments_and_indexes: java or the Kafka 4.4.0 jars are not available (set KAFKA_CLASSPATH)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dump-0");
    let config = LogConfig {
        segment_bytes: 20_000,
        index_interval_bytes: 1000,
        ..LogConfig::default()
    };
    let mut log = Log::open(&dir, config, 0, 0, true, 0).unwrap();
    // 60 plain batches of 3 records (rolls into several segments), then one gzip batch.
    let mut expected = Vec::new(); // (base offset, last offset, position, segment base)
    for _ in 0..60 {
        let o = log.log_end_offset();
        let before = log.log_end_offset_metadata();
        log.append(&simple_batch(o, 4, 3, 200, 1_700_000_000_000 + o), 0)
            .unwrap();
        let seg = log.active_segment().base_offset();
        let pos = if seg == before.segment_base_offset {
            before.relative_position
        } else {
            0
        };
        expected.push((o, o + 2, pos, seg));
    }
    let o = log.log_end_offset();
    let recs: Vec<TestRecord> = (0..5)
        .map(|i| TestRecord {
            timestamp: 1_700_000_000_500 + i,
            key: Some(format!("k{i}").into_bytes()),
            value: vec![b'v'; 300],
        })
        .collect();
    log.append(&build_batch(o, 4, &recs, true), 0).unwrap();
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    assert!(bases.len() >= 3);
    assert_eq!(log.active_segment().base_offset(), *bases.last().unwrap());
    log.close().unwrap();
    // Reopen cleanly to read back what close() left (final time index entries included), then
    // close again so the active segment's indexes are trimmed for the tool.
    let log = Log::open(&dir, LogConfig::default(), 0, 0, true, 0).unwrap();
    let index_entries: Vec<Vec<(i64, u32)>> = log
        .segments()
        .map(|s| {
            (0..s.offset_index().unwrap().entries())
                .map(|i| {
                    (
                        s.offset_index().unwrap().entry(i).offset,
                        s.offset_index().unwrap().entry(i).position,
                    )
                })
                .collect()
        })
        .collect();
    let time_entries: Vec<Vec<(i64, i64)>> = log
        .segments()
        .map(|s| {
            (0..s.time_index().unwrap().entries())
                .map(|i| {
                    (
                        s.time_index().unwrap().entry(i).timestamp,
                        s.time_index().unwrap().entry(i).offset,
                    )
                })
                .collect()
        })
        .collect();
    assert!(index_entries.iter().all(|e| !e.is_empty()) || bases.len() > 3);
    log.close().unwrap();

    // .log: every batch with Kafka's view of offsets, positions and counts.
    let first_log = file(&dir, bases[0], ".log");
    let text = dump(&cp, &["--files", first_log.to_str().unwrap()]);
    println!("{text}");
    let batch_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .collect();
    let in_first: Vec<_> = expected.iter().filter(|e| e.3 == bases[0]).collect();
    assert_eq!(batch_lines.len(), in_first.len());
    for (line, e) in batch_lines.iter().zip(&in_first) {
        assert_eq!(
            field(line, "baseOffset"),
            Some(e.0.to_string().as_str()),
            "{line}"
        );
        assert_eq!(
            field(line, "lastOffset"),
            Some(e.1.to_string().as_str()),
            "{line}"
        );
        assert_eq!(field(line, "count"), Some("3"), "{line}");
        assert_eq!(
            field(line, "position"),
            Some(e.2.to_string().as_str()),
            "{line}"
        );
        assert_eq!(field(line, "isvalid"), Some("true"), "{line}");
        assert_eq!(field(line, "partitionLeaderEpoch"), Some("4"), "{line}");
    }

    // .index and .timeindex of every segment: entries as we wrote them, no mismatch reported.
    for (i, base) in bases.iter().enumerate() {
        let idx = file(&dir, *base, ".index");
        let text = dump(&cp, &["--files", idx.to_str().unwrap()]);
        let entries: Vec<(i64, u32)> = text
            .lines()
            .filter(|l| l.starts_with("offset:"))
            .map(|l| {
                (
                    field(l, "offset").unwrap().parse().unwrap(),
                    field(l, "position").unwrap().parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(entries, index_entries[i], "segment {base}");
        assert!(!text.contains("Mismatches"), "{text}");
        let tidx = file(&dir, *base, ".timeindex");
        let text = dump(&cp, &["--files", tidx.to_str().unwrap()]);
        let entries: Vec<(i64, i64)> = text
            .lines()
            .filter(|l| l.starts_with("timestamp:"))
            .map(|l| {
                (
                    field(l, "timestamp").unwrap().parse().unwrap(),
                    field(l, "offset").unwrap().parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(entries, time_entries[i], "segment {base}");
        assert!(!text.to_lowercase().contains("mismatch"), "{text}");
    }

    // The gzip batch, shallow and deep.
    let last_log = file(&dir, *bases.last().unwrap(), ".log");
    let text = dump(
        &cp,
        &["--files", last_log.to_str().unwrap(), "--deep-iteration"],
    );
    println!("{text}");
    let gz_line = text
        .lines()
        .find(|l| l.starts_with("baseOffset:") && l.contains("compresscodec: gzip"))
        .expect("gzip batch");
    assert_eq!(field(gz_line, "baseOffset"), Some(o.to_string().as_str()));
    assert_eq!(field(gz_line, "count"), Some("5"));
    let records: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("| offset:"))
        .collect();
    let deep: Vec<i64> = records
        .iter()
        .map(|l| field(l, "offset").unwrap().parse().unwrap())
        .collect();
    assert!(deep.ends_with(&(o..o + 5).collect::<Vec<_>>()), "{deep:?}");
    for (i, line) in records.iter().rev().take(5).rev().enumerate() {
        assert_eq!(
            field(line, "CreateTime"),
            Some((1_700_000_000_500 + i as i64).to_string().as_str()),
            "{line}"
        );
        assert_eq!(field(line, "keySize"), Some("2"), "{line}");
        assert_eq!(field(line, "valueSize"), Some("300"), "{line}");
    }
}
