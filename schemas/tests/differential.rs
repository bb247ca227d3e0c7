//! Differential tests against the `kafka-protocol` crate (generated from Kafka's own schemas):
//! for every API key × version both sides know, random requests and responses encoded by us
//! must decode with kafka-protocol and re-encode to the same bytes, and our decoder must read
//! those bytes back to the same value. The headers and the record/data schemas kafka-protocol
//! also generates go through the same [`check`].

use std::marker::PhantomData;

use bytes::{Bytes, BytesMut};
use kactor_protocol::codec::{Decode, DecodeError, Encode, EncodeError, Writer};
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

fn encode_ours(f: impl FnOnce(&mut Writer) -> Result<(), EncodeError>) -> Bytes {
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
        // Split on ": ", not ':', so "md::VotersRecord v0" stays one key.
        let key = what.split(": ").next().unwrap_or_default().to_string();
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

/// One message kind as both codecs see it: request bodies and response bodies (dispatched by
/// API key) and the typed schemas (headers, records) all go through [`check`].
trait Codecs {
    type Ours: PartialEq + std::fmt::Debug;
    type Theirs: std::fmt::Debug;
    /// Whether kafka-protocol may lack a version its ApiKey table lists (dispatch by key only).
    const THEIRS_MAY_LACK_VERSIONS: bool = false;
    fn encoded_len(ours: &Self::Ours, version: i16) -> Result<usize, EncodeError>;
    fn encode(ours: &Self::Ours, w: &mut Writer, version: i16) -> Result<(), EncodeError>;
    fn decode(&self, buf: &mut Bytes, version: i16) -> Result<Self::Ours, DecodeError>;
    /// kafka-protocol's decoder (its errors as text: they are anyhow errors).
    fn decode_theirs(&self, buf: &mut Bytes, version: i16) -> Result<Self::Theirs, String>;
    fn encode_theirs(theirs: &Self::Theirs, buf: &mut BytesMut, version: i16)
        -> Result<(), String>;
}

/// Requests (`REQUEST = true`) or responses of one API key.
struct Bodies<const REQUEST: bool> {
    key: ApiKey,
    kpk: kp::ApiKey,
}

/// Our decoder and kafka-protocol's for one of the two halves.
macro_rules! bodies {
    ($request:literal, $ours:ty, $theirs:ty) => {
        impl Codecs for Bodies<$request> {
            type Ours = $ours;
            type Theirs = $theirs;
            // kafka-protocol's ApiKey table can be ahead of its message types (e.g.
            // OffsetCommit v10 is listed but the type stops at v9): not a wire difference.
            const THEIRS_MAY_LACK_VERSIONS: bool = true;
            fn encoded_len(ours: &$ours, version: i16) -> Result<usize, EncodeError> {
                ours.encoded_len(version)
            }
            fn encode(ours: &$ours, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
                ours.encode(w, version)
            }
            fn decode(&self, buf: &mut Bytes, version: i16) -> Result<$ours, DecodeError> {
                <$ours>::decode(self.key, version, buf)
            }
            fn decode_theirs(&self, buf: &mut Bytes, version: i16) -> Result<$theirs, String> {
                <$theirs>::decode(self.kpk, buf, version).map_err(|e| format!("{e:#}"))
            }
            fn encode_theirs(t: &$theirs, buf: &mut BytesMut, version: i16) -> Result<(), String> {
                t.encode(buf, version).map_err(|e| format!("{e:#}"))
            }
        }
    };
}
bodies!(true, RequestBody, kp::RequestKind);
bodies!(false, ResponseBody, kp::ResponseKind);

/// A typed schema of ours (`O`) and kafka-protocol's type for it (`T`).
struct Typed<O, T>(PhantomData<(O, T)>);

impl<O, T> Codecs for Typed<O, T>
where
    O: Encode + Decode + PartialEq + std::fmt::Debug,
    T: Encodable + Decodable + std::fmt::Debug,
{
    type Ours = O;
    type Theirs = T;
    fn encoded_len(ours: &O, version: i16) -> Result<usize, EncodeError> {
        ours.encoded_len(version)
    }
    fn encode(ours: &O, w: &mut Writer, version: i16) -> Result<(), EncodeError> {
        ours.encode(w, version)
    }
    fn decode(&self, buf: &mut Bytes, version: i16) -> Result<O, DecodeError> {
        O::decode(buf, version)
    }
    fn decode_theirs(&self, buf: &mut Bytes, version: i16) -> Result<T, String> {
        T::decode(buf, version).map_err(|e| format!("{e:#}"))
    }
    fn encode_theirs(t: &T, buf: &mut BytesMut, version: i16) -> Result<(), String> {
        t.encode(buf, version).map_err(|e| format!("{e:#}"))
    }
}

/// Encodes `ours` at `version` (checking its exact size) and decodes it back; then decodes our
/// bytes with kafka-protocol, which must consume them all, know every tag (when we add no
/// unknown tags of our own) and re-encode them to the same bytes. `ctx` names the case
/// ("<message> v<version>").
fn check<C: Codecs>(codecs: &C, ctx: String, ours: &C::Ours, version: i16, r: &mut Report) {
    r.cases += 1;
    let bytes = encode_ours(|w| C::encode(ours, w, version));
    let len = C::encoded_len(ours, version).expect("our encoded_len");
    if len != bytes.len() {
        r.fail(format!("{ctx}: encoded_len {len} != {}", bytes.len()));
    }
    let mut b = bytes.clone();
    match codecs.decode(&mut b, version) {
        Ok(back) if &back == ours && b.is_empty() => {}
        Ok(back) => r.fail(format!(
            "{ctx}: our round trip differs ({} left)\n ours {ours:?}\n back {back:?}",
            b.len()
        )),
        Err(e) => r.fail(format!("{ctx}: our decode failed: {e}")),
    }
    let mut b = bytes.clone();
    let theirs = match codecs.decode_theirs(&mut b, version) {
        Ok(t) => t,
        Err(e) if C::THEIRS_MAY_LACK_VERSIONS && e.contains("version not supported") => {
            r.cases -= 1;
            r.skipped.insert(ctx);
            return;
        }
        Err(e) => {
            return r.fail(format!(
                "{ctx}: kafka-protocol cannot decode ours: {e}\n ours {ours:?}"
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
    if let Err(e) = C::encode_theirs(&theirs, &mut out, version) {
        return r.fail(format!("{ctx}: kafka-protocol re-encode failed: {e}"));
    }
    if out.as_ref() != bytes.as_ref() {
        r.fail(format!(
            "{ctx}: bytes differ\n ours   {:02x?}\n theirs {:02x?}\n value {ours:?}",
            bytes.as_ref(),
            out.as_ref()
        ));
    }
    // Equal bytes make our decode of kafka-protocol's bytes the round trip checked above.
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
                let ours = RequestBody::random(key, &mut rng, version);
                let ctx = format!("{}Request v{version}", key.name());
                check(&Bodies::<true> { key, kpk }, ctx, &ours, version, &mut r);
                let ours = ResponseBody::random(key, &mut rng, version);
                let ctx = format!("{}Response v{version}", key.name());
                check(&Bodies::<false> { key, kpk }, ctx, &ours, version, &mut r);
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
                    let ctx = format!("{} v{version}", stringify!($ours));
                    check(&Typed::<$ours, $theirs>(PhantomData), ctx, &v, version, &mut $r);
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
