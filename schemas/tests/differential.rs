//! Differential tests against the `kafka-protocol` crate (generated from Kafka's own schemas):
//! for every API key × version both sides know, random requests and responses encoded by us
//! must decode with kafka-protocol and re-encode to the same bytes, and our decoder must read
//! kafka-protocol's bytes back to the same value and the same bytes.

use bytes::{Bytes, BytesMut};
use kactor_protocol::codec::{Decode, Encode, Writer};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable};
use rand::rngs::StdRng;
use rand::SeedableRng;

const ITERATIONS: usize = 60;

fn seed() -> u64 {
    std::env::var("DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6b61_6374_6f72)
}

fn encode_ours(f: impl FnOnce(&mut Writer) -> Result<(), kactor_protocol::EncodeError>) -> Bytes {
    let mut w = Writer::new();
    f(&mut w).expect("our encode");
    w.into_bytes()
}

/// The versions both we and kafka-protocol declare for `key`.
fn common_versions(key: ApiKey) -> Option<(kp::ApiKey, i16, i16)> {
    let kpk = kp::ApiKey::try_from(key as i16).ok()?;
    let kr = kpk.valid_versions();
    let (lo, hi) = key.valid_versions();
    let (lo, hi) = (lo.max(kr.min), hi.min(kr.max));
    (lo <= hi).then_some((kpk, lo, hi))
}

/// kafka-protocol keeps tags it does not know in `unknown_tagged_fields: {tag: bytes}` maps;
/// with our unknown tags switched off, any non-empty map means a tag we emit under a number
/// Kafka's schema gives to nothing (or to another field).
fn has_unknown_tags(theirs: &impl std::fmt::Debug) -> bool {
    let s = format!("{theirs:?}");
    s.match_indices("unknown_tagged_fields: {")
        .any(|(i, m)| !s[i + m.len()..].starts_with('}'))
}

#[derive(Default)]
struct Report {
    cases: usize,
    failures: Vec<String>,
    /// Failures per "<message> v<version>", the first one printed in full.
    by_case: std::collections::BTreeMap<String, usize>,
    skipped: std::collections::BTreeSet<String>,
}

impl Report {
    fn fail(&mut self, what: String) {
        let key = what.split(':').next().unwrap_or_default().to_string();
        let n = self.by_case.entry(key).or_default();
        if *n == 0 {
            eprintln!("{what}");
        }
        *n += 1;
        self.failures.push(what);
    }

    fn summary(&self) {
        for (k, n) in &self.by_case {
            eprintln!("FAILED {k}: {n}");
        }
    }
}

fn check_request(key: ApiKey, kpk: kp::ApiKey, version: i16, rng: &mut StdRng, r: &mut Report) {
    let ours = RequestBody::random(key, rng, version);
    let bytes = encode_ours(|w| ours.encode(w, version));
    let ctx = format!("{}Request v{version}", key.name());
    r.cases += 1;
    if ours.encoded_len(version).unwrap() != bytes.len() {
        r.fail(format!(
            "{ctx}: encoded_len {} != {}",
            ours.encoded_len(version).unwrap(),
            bytes.len()
        ));
    }
    // Our decode of our bytes.
    let mut b = bytes.clone();
    match RequestBody::decode(key, version, &mut b) {
        Ok(back) if back == ours && b.is_empty() => {}
        Ok(back) => r.fail(format!(
            "{ctx}: our round trip differs ({} left)\n ours {ours:?}\n back {back:?}",
            b.len()
        )),
        Err(e) => r.fail(format!("{ctx}: our decode failed: {e}")),
    }
    // kafka-protocol's decode and re-encode of our bytes.
    let mut b = bytes.clone();
    let theirs = match kp::RequestKind::decode(kpk, &mut b, version) {
        Ok(t) => t,
        // kafka-protocol's ApiKey table can be ahead of its message types (e.g. OffsetCommit
        // v10 is listed but the type stops at v9): not a difference in the wire format.
        Err(e) if format!("{e:#}").contains("version not supported") => {
            r.cases -= 1;
            r.skipped.insert(ctx);
            return;
        }
        Err(e) => {
            return r.fail(format!(
                "{ctx}: kafka-protocol cannot decode ours: {e:#}\n ours {ours:?}"
            ))
        }
    };
    if !b.is_empty() {
        r.fail(format!(
            "{ctx}: kafka-protocol left {} bytes\n ours {ours:?}",
            b.len()
        ));
    }
    if !kactor_protocol::codec::random::unknown_tags() && has_unknown_tags(&theirs) {
        r.fail(format!(
            "{ctx}: kafka-protocol saw unknown tags (tag numbers differ)\n theirs {theirs:?}"
        ));
    }
    let mut out = BytesMut::new();
    if let Err(e) = theirs.encode(&mut out, version) {
        return r.fail(format!("{ctx}: kafka-protocol re-encode failed: {e}"));
    }
    if out.as_ref() != bytes.as_ref() {
        return r.fail(format!(
            "{ctx}: bytes differ\n ours   {:02x?}\n theirs {:02x?}\n value {ours:?}",
            bytes.as_ref(),
            out.as_ref()
        ));
    }
    // Our decode of kafka-protocol's bytes, re-encoded by us.
    let mut b = out.freeze();
    let again = RequestBody::decode(key, version, &mut b).expect("decode theirs");
    let bytes2 = encode_ours(|w| again.encode(w, version));
    if bytes2 != bytes {
        r.fail(format!(
            "{ctx}: our re-encode of kafka-protocol bytes differs"
        ));
    }
}

fn check_response(key: ApiKey, kpk: kp::ApiKey, version: i16, rng: &mut StdRng, r: &mut Report) {
    let ours = ResponseBody::random(key, rng, version);
    let bytes = encode_ours(|w| ours.encode(w, version));
    let ctx = format!("{}Response v{version}", key.name());
    r.cases += 1;
    if ours.encoded_len(version).unwrap() != bytes.len() {
        r.fail(format!(
            "{ctx}: encoded_len {} != {}",
            ours.encoded_len(version).unwrap(),
            bytes.len()
        ));
    }
    let mut b = bytes.clone();
    match ResponseBody::decode(key, version, &mut b) {
        Ok(back) if back == ours && b.is_empty() => {}
        Ok(back) => r.fail(format!(
            "{ctx}: our round trip differs ({} left)\n ours {ours:?}\n back {back:?}",
            b.len()
        )),
        Err(e) => r.fail(format!("{ctx}: our decode failed: {e}")),
    }
    let mut b = bytes.clone();
    let theirs = match kp::ResponseKind::decode(kpk, &mut b, version) {
        Ok(t) => t,
        // kafka-protocol's ApiKey table can be ahead of its message types (e.g. OffsetCommit
        // v10 is listed but the type stops at v9): not a difference in the wire format.
        Err(e) if format!("{e:#}").contains("version not supported") => {
            r.cases -= 1;
            r.skipped.insert(ctx);
            return;
        }
        Err(e) => {
            return r.fail(format!(
                "{ctx}: kafka-protocol cannot decode ours: {e:#}\n ours {ours:?}"
            ))
        }
    };
    if !b.is_empty() {
        r.fail(format!(
            "{ctx}: kafka-protocol left {} bytes\n ours {ours:?}",
            b.len()
        ));
    }
    if !kactor_protocol::codec::random::unknown_tags() && has_unknown_tags(&theirs) {
        r.fail(format!(
            "{ctx}: kafka-protocol saw unknown tags (tag numbers differ)\n theirs {theirs:?}"
        ));
    }
    let mut out = BytesMut::new();
    if let Err(e) = theirs.encode(&mut out, version) {
        return r.fail(format!("{ctx}: kafka-protocol re-encode failed: {e}"));
    }
    if out.as_ref() != bytes.as_ref() {
        return r.fail(format!(
            "{ctx}: bytes differ\n ours   {:02x?}\n theirs {:02x?}\n value {ours:?}",
            bytes.as_ref(),
            out.as_ref()
        ));
    }
    let mut b = out.freeze();
    let again = ResponseBody::decode(key, version, &mut b).expect("decode theirs");
    let bytes2 = encode_ours(|w| again.encode(w, version));
    if bytes2 != bytes {
        r.fail(format!(
            "{ctx}: our re-encode of kafka-protocol bytes differs"
        ));
    }
}

#[test]
fn every_api_and_version_matches_kafka_protocol() {
    every_api_and_version(true);
}

/// Without unknown tags of our own, kafka-protocol must recognise every tag we write.
#[test]
fn every_tag_is_known_to_kafka_protocol() {
    every_api_and_version(false);
}

fn every_api_and_version(unknown_tags: bool) {
    kactor_protocol::codec::random::set_unknown_tags(unknown_tags);
    let mut rng = StdRng::seed_from_u64(seed() ^ unknown_tags as u64);
    let mut r = Report::default();
    let mut covered = Vec::new();
    for &key in ApiKey::ALL {
        let Some((kpk, lo, hi)) = common_versions(key) else {
            eprintln!("{}: kafka-protocol does not know it; skipped", key.name());
            continue;
        };
        covered.push(format!("{}[{lo}-{hi}]", key.name()));
        for version in lo..=hi {
            for _ in 0..ITERATIONS {
                check_request(key, kpk, version, &mut rng, &mut r);
                check_response(key, kpk, version, &mut rng, &mut r);
            }
        }
    }
    eprintln!("covered {} APIs: {}", covered.len(), covered.join(" "));
    r.summary();
    eprintln!(
        "skipped (kafka-protocol's type lacks the version): {:?}",
        r.skipped
    );
    eprintln!("{} cases, {} failures", r.cases, r.failures.len());
    assert!(
        r.failures.is_empty(),
        "{} of {} cases differ",
        r.failures.len(),
        r.cases
    );
}

/// Encodes `ours` at `version`, decodes with kafka-protocol type `T`, re-encodes, compares, and
/// decodes kafka-protocol's bytes with ours.
fn check_pair<O, T>(ctx: &str, ours: &O, version: i16, r: &mut Report)
where
    O: Encode + Decode + PartialEq + std::fmt::Debug,
    T: Encodable + Decodable + std::fmt::Debug,
{
    r.cases += 1;
    let bytes = encode_ours(|w| ours.encode(w, version));
    if ours.encoded_len(version).unwrap() != bytes.len() {
        r.fail(format!("{ctx} v{version}: encoded_len mismatch"));
    }
    let mut b = bytes.clone();
    let theirs = match T::decode(&mut b, version) {
        Ok(t) => t,
        Err(e) => {
            return r.fail(format!(
                "{ctx} v{version}: kafka-protocol cannot decode: {e}\n{ours:?}"
            ))
        }
    };
    if !kactor_protocol::codec::random::unknown_tags() && has_unknown_tags(&theirs) {
        r.fail(format!("{ctx} v{version}: kafka-protocol saw unknown tags (tag numbers differ)\n theirs {theirs:?}"));
    }
    let mut out = BytesMut::new();
    theirs
        .encode(&mut out, version)
        .expect("kafka-protocol encode");
    if !b.is_empty() || out.as_ref() != bytes.as_ref() {
        return r.fail(format!(
            "{ctx} v{version}: bytes differ\n ours   {:02x?}\n theirs {:02x?}\n{ours:?}",
            bytes.as_ref(),
            out.as_ref()
        ));
    }
    let mut b = out.freeze();
    match O::decode(&mut b, version) {
        Ok(back) if &back == ours && b.is_empty() => {}
        other => r.fail(format!(
            "{ctx} v{version}: our decode of their bytes: {other:?}"
        )),
    }
}

macro_rules! pairs {
    ($r:ident, $rng:ident; $($ours:ty => $theirs:ty $(, fix $fix:expr)?);* $(;)?) => {$(
        {
            use kactor_protocol::Message;
            let (lo, hi) = <$ours as Message>::VALID_VERSIONS;
            let kr = <$theirs as kafka_protocol::protocol::Message>::VERSIONS;
            // Half the cases without our own unknown tags, so tag numbers are checked too.
            for (version, unknown_tags) in (lo.max(kr.min)..=hi.min(kr.max)).flat_map(|v| [(v, true), (v, false)]) {
                kactor_protocol::codec::random::set_unknown_tags(unknown_tags);
                for _ in 0..ITERATIONS {
                    #[allow(unused_mut)]
                    let mut v = <$ours>::random(&mut $rng, version);
                    $( ($fix)(&mut v, version); )?
                    check_pair::<$ours, $theirs>(stringify!($ours), &v, version, &mut $r);
                }
            }
        }
    )*};
}

#[test]
fn headers_match_kafka_protocol() {
    let mut rng = StdRng::seed_from_u64(seed());
    let mut r = Report::default();
    pairs!(r, rng;
        kactor_protocol::messages::RequestHeader => kp::RequestHeader;
        kactor_protocol::messages::ResponseHeader => kp::ResponseHeader;
    );
    assert!(
        r.failures.is_empty(),
        "{} of {} cases differ",
        r.failures.len(),
        r.cases
    );
}

/// The record and data schemas kafka-protocol also generates: KRaft control records, the
/// consumer protocol embedded in group metadata, the EndTxn marker, principal serde.
#[test]
fn records_and_data_schemas_match_kafka_protocol() {
    use kactor_protocol::{coordinator as co, metadata as md};
    let mut rng = StdRng::seed_from_u64(seed());
    let mut r = Report::default();
    pairs!(r, rng;
        md::KRaftVersionRecord => kp::KRaftVersionRecord;
        // kafka-protocol's decoder lets the `Version` field shadow the schema version it
        // passes to nested structs; Kafka writes the schema version there, so do the same.
        md::LeaderChangeMessage => kp::LeaderChangeMessage,
            fix |v: &mut md::LeaderChangeMessage, version| v.version = version;
        md::SnapshotHeaderRecord => kp::SnapshotHeaderRecord;
        md::SnapshotFooterRecord => kp::SnapshotFooterRecord;
        md::VotersRecord => kp::VotersRecord,
            fix |v: &mut md::VotersRecord, version| v.version = version;
        md::DefaultPrincipalData => kp::DefaultPrincipalData;
        md::EndTxnMarker => kp::EndTxnMarker;
        co::ConsumerProtocolAssignment => kp::ConsumerProtocolAssignment;
        co::ConsumerProtocolSubscription => kp::ConsumerProtocolSubscription;
    );
    r.summary();
    assert!(
        r.failures.is_empty(),
        "{} of {} cases differ",
        r.failures.len(),
        r.cases
    );
}
