//! Fuzz target: a request or response frame as a connection sees it (Kafka's
//! `RequestContext.parseRequest` / `NetworkClient` response parsing), after the size prefix.
//!
//! Input layout: byte 0 picks request (even) or response (odd); a request is then a full
//! request frame (header says api key and version); a response is api key (2) + version (2)
//! followed by the response header and body. Properties: decoding never panics (libFuzzer
//! reports panics as crashes, and `-rss_limit_mb` / `-malloc_limit_mb` catch over-allocation),
//! and whatever decodes re-encodes, and decodes again to the same bytes.

#![no_main]

use bytes::Bytes;
use kactor_protocol::codec::Writer;
use kactor_protocol::messages::{RequestHeader, ResponseHeader};
use kactor_protocol::{
    request_header_version, response_header_version, ApiKey, Decode, Encode, RequestBody,
    ResponseBody,
};
use libfuzzer_sys::fuzz_target;

fn api(data: &[u8]) -> Option<(ApiKey, i16)> {
    let key = ApiKey::try_from(i16::from_be_bytes([*data.first()?, *data.get(1)?])).ok()?;
    Some((key, i16::from_be_bytes([*data.get(2)?, *data.get(3)?])))
}

fn reencode(encode: impl Fn(&mut Writer)) -> Bytes {
    let mut w = Writer::new();
    encode(&mut w);
    w.into_bytes()
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let Some((key, version)) = api(rest) else {
        return;
    };
    if kind % 2 == 0 {
        let mut buf = Bytes::copy_from_slice(rest);
        let hv = request_header_version(key, version);
        let Ok(header) = RequestHeader::decode(&mut buf, hv) else {
            return;
        };
        let Ok(body) = RequestBody::decode(key, version, &mut buf) else {
            return;
        };
        // Decoded values are valid at their version, so encoding cannot fail, the length is
        // exact, and a second decode/encode is a fixed point (bytes, not values: NaN floats).
        let once = reencode(|w| {
            header.encode(w, hv).expect("re-encode header");
            body.encode(w, version).expect("re-encode body");
        });
        assert_eq!(
            once.len(),
            header.encoded_len(hv).unwrap() + body.encoded_len(version).unwrap()
        );
        let mut again = once.clone();
        let h2 = RequestHeader::decode(&mut again, hv).expect("decode re-encoded header");
        let b2 = RequestBody::decode(key, version, &mut again).expect("decode re-encoded body");
        assert!(again.is_empty());
        let twice = reencode(|w| {
            h2.encode(w, hv).unwrap();
            b2.encode(w, version).unwrap();
        });
        assert_eq!(once, twice);
    } else {
        let mut buf = Bytes::copy_from_slice(&rest[4..]);
        let hv = response_header_version(key, version);
        let Ok(header) = ResponseHeader::decode(&mut buf, hv) else {
            return;
        };
        let Ok(body) = ResponseBody::decode(key, version, &mut buf) else {
            return;
        };
        let once = reencode(|w| {
            header.encode(w, hv).expect("re-encode header");
            body.encode(w, version).expect("re-encode body");
        });
        let mut again = once.clone();
        let h2 = ResponseHeader::decode(&mut again, hv).expect("decode re-encoded header");
        let b2 = ResponseBody::decode(key, version, &mut again).expect("decode re-encoded body");
        let twice = reencode(|w| {
            h2.encode(w, hv).unwrap();
            b2.encode(w, version).unwrap();
        });
        assert_eq!(once, twice);
    }
});
