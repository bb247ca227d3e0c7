//! Golden frames: bytes written by real Kafka clients (kafka-clients 4.4.0's generated classes,
//! librdkafka 2.0.2 via kcat; see tests/golden/) must decode to the values we build by hand,
//! and our encoding of those values must be the same bytes.

use bytes::Bytes;
use kactor_protocol::codec::Writer;
use kactor_protocol::messages::{
    api_versions_response, metadata_request, produce_request, ApiVersionsRequest,
    ApiVersionsResponse, MetadataRequest, ProduceRequest, RequestHeader, ResponseHeader,
};
use kactor_protocol::{
    request_header_version, response_header_version, ApiKey, Decode, Encode, Records, RequestBody,
    Uuid,
};

fn java_frame(name: &str) -> Bytes {
    let text = include_str!("golden/java_frames.txt");
    let hex = text
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no golden frame {name}"));
    unhex(hex)
}

fn unhex(s: &str) -> Bytes {
    let s = s.trim();
    Bytes::from(
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>(),
    )
}

fn header(key: ApiKey, version: i16, correlation_id: i32, client_id: &str) -> RequestHeader {
    RequestHeader {
        request_api_key: key as i16,
        request_api_version: version,
        correlation_id,
        client_id: Some(client_id.to_string()),
        ..Default::default()
    }
}

/// Encodes header + body the way a connection writes a request (without the size prefix).
fn request_frame(h: &RequestHeader, body: &impl Encode, key: ApiKey, version: i16) -> Bytes {
    let mut w = Writer::new();
    h.encode(&mut w, request_header_version(key, version))
        .unwrap();
    body.encode(&mut w, version).unwrap();
    assert_eq!(
        w.len(),
        h.encoded_len(request_header_version(key, version)).unwrap()
            + body.encoded_len(version).unwrap()
    );
    w.into_bytes()
}

/// Decodes a request frame: header at the version its api key/version imply, then the body.
fn decode_request(frame: &Bytes) -> (RequestHeader, RequestBody) {
    let mut buf = frame.clone();
    let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let h = RequestHeader::decode(&mut buf, request_header_version(key, version)).unwrap();
    let body = RequestBody::decode(key, version, &mut buf).unwrap();
    assert!(buf.is_empty(), "{} bytes left", buf.len());
    (h, body)
}

#[test]
fn api_versions_v0_request() {
    let frame = java_frame("api_versions_v0_request");
    let h = header(ApiKey::ApiVersions, 0, 1, "golden-client");
    assert_eq!(
        request_frame(&h, &ApiVersionsRequest::default(), ApiKey::ApiVersions, 0),
        frame
    );
    let (dh, body) = decode_request(&frame);
    assert_eq!(dh, h);
    assert_eq!(
        body,
        RequestBody::ApiVersions(ApiVersionsRequest::default())
    );
}

#[test]
fn api_versions_v3_request_from_java() {
    let frame = java_frame("api_versions_v3_request");
    let h = header(ApiKey::ApiVersions, 3, 2, "golden-client");
    let body = ApiVersionsRequest {
        client_software_name: "apache-kafka-java".into(),
        client_software_version: "4.4.0".into(),
        ..Default::default()
    };
    assert_eq!(request_frame(&h, &body, ApiKey::ApiVersions, 3), frame);
    assert_eq!(decode_request(&frame), (h, RequestBody::ApiVersions(body)));
}

#[test]
fn api_versions_v3_request_captured_from_kcat() {
    let frame = unhex(include_str!("golden/kcat_api_versions_v3_request.hex"));
    let (h, body) = decode_request(&frame);
    assert_eq!(h, header(ApiKey::ApiVersions, 3, 1, "rdkafka"));
    let RequestBody::ApiVersions(ref b) = body else {
        panic!("{body:?}")
    };
    assert_eq!(b.client_software_name, "librdkafka");
    assert_eq!(b.client_software_version, "2.0.2");
    assert_eq!(request_frame(&h, b, ApiKey::ApiVersions, 3), frame);
}

fn api_versions_response(version: i16) -> ApiVersionsResponse {
    use api_versions_response::*;
    let mut r = ApiVersionsResponse {
        error_code: 0,
        throttle_time_ms: 0,
        api_keys: vec![
            ApiVersion {
                api_key: 0,
                min_version: 0,
                max_version: 13,
                ..Default::default()
            },
            ApiVersion {
                api_key: 18,
                min_version: 0,
                max_version: 5,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    if version >= 3 {
        r.supported_features = vec![SupportedFeatureKey {
            name: "metadata.version".into(),
            min_version: 7,
            max_version: 29,
            ..Default::default()
        }];
        r.finalized_features_epoch = 42;
        r.finalized_features = vec![FinalizedFeatureKey {
            name: "metadata.version".into(),
            min_version_level: 29,
            max_version_level: 29,
            ..Default::default()
        }];
    }
    r
}

#[test]
fn api_versions_v0_and_v3_responses() {
    for version in [0i16, 3] {
        let frame = java_frame(&format!("api_versions_v{version}_response"));
        // ApiVersions responses use header v0 even when the body is flexible (KIP-511).
        let hv = response_header_version(ApiKey::ApiVersions, version);
        assert_eq!(hv, 0);
        let h = ResponseHeader {
            correlation_id: version as i32,
            ..Default::default()
        };
        let body = api_versions_response(version);
        let mut w = Writer::new();
        h.encode(&mut w, hv).unwrap();
        body.encode(&mut w, version).unwrap();
        assert_eq!(w.into_bytes(), frame, "v{version}");

        let mut buf = frame.clone();
        assert_eq!(ResponseHeader::decode(&mut buf, hv).unwrap(), h);
        assert_eq!(
            ApiVersionsResponse::decode(&mut buf, version).unwrap(),
            body
        );
        assert!(buf.is_empty());
    }
}

#[test]
fn metadata_v12_request() {
    use metadata_request::MetadataRequestTopic;
    let frame = java_frame("metadata_v12_request");
    let h = header(ApiKey::Metadata, 12, 3, "golden-client");
    let body = MetadataRequest {
        topics: Some(vec![
            MetadataRequestTopic {
                name: Some("orders".into()),
                topic_id: Uuid::ZERO,
                ..Default::default()
            },
            MetadataRequestTopic {
                name: None,
                topic_id: "q1Bz3V4RT1aAl_OcT9cdRg".parse().unwrap(),
                ..Default::default()
            },
        ]),
        allow_auto_topic_creation: true,
        include_topic_authorized_operations: false,
        ..Default::default()
    };
    assert_eq!(request_frame(&h, &body, ApiKey::Metadata, 12), frame);
    assert_eq!(decode_request(&frame), (h, RequestBody::Metadata(body)));
}

#[test]
fn produce_v9_request_with_lz4_batch_is_decoded_without_copying() {
    use produce_request::{PartitionProduceData, TopicProduceData};
    let frame = java_frame("produce_v9_request");
    let batch = unhex(include_str!("../src/records/testdata/java_lz4.hex"));
    let h = header(ApiKey::Produce, 9, 4, "golden-client");
    let body = ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 30000,
        topic_data: vec![TopicProduceData {
            name: "orders".into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(Records::Memory(batch.clone())),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(request_frame(&h, &body, ApiKey::Produce, 9), frame);
    let (dh, decoded) = decode_request(&frame);
    assert_eq!(dh, h);
    let RequestBody::Produce(ref p) = decoded else {
        panic!("{decoded:?}")
    };
    assert_eq!(p, &body);
    let Some(Records::Memory(records)) = &p.topic_data[0].partition_data[0].records else {
        panic!("no records")
    };
    // Zero copy: the decoded records are a view into the received frame.
    let frame_range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    assert!(frame_range.contains(&(records.as_ptr() as usize)));
    let hdr = kactor_protocol::records::BatchHeader::parse(records).unwrap();
    assert_eq!(
        hdr.compression().unwrap(),
        kactor_protocol::records::Compression::Lz4
    );
    kactor_protocol::records::verify_crc(records).unwrap();
}

#[test]
fn non_default_field_missing_from_the_version_is_an_encode_error() {
    // Metadata's IncludeTopicAuthorizedOperations exists from v8 and is not ignorable.
    let body = MetadataRequest {
        include_topic_authorized_operations: true,
        ..Default::default()
    };
    let mut w = Writer::new();
    assert!(body.encode(&mut w, 7).is_err());
    assert!(body.encoded_len(7).is_err());
    // A null topic list cannot be written at v0 (nullable from v1).
    let all = MetadataRequest {
        topics: None,
        ..Default::default()
    };
    assert!(all.encode(&mut Writer::new(), 0).is_err());
    assert!(all.encode(&mut Writer::new(), 1).is_ok());
}

#[test]
fn unknown_tagged_fields_survive_a_round_trip() {
    // ApiVersions v3 request + an unknown tag 9 carrying 3 bytes.
    let mut w = Writer::new();
    let mut body = ApiVersionsRequest {
        client_software_name: "x".into(),
        client_software_version: "1".into(),
        ..Default::default()
    };
    body.unknown_tagged_fields
        .push(kactor_protocol::RawTaggedField {
            tag: 9,
            data: Bytes::from_static(b"abc"),
        });
    body.encode(&mut w, 3).unwrap();
    let bytes = w.into_bytes();
    assert_eq!(bytes.as_ref(), b"\x02x\x021\x01\x09\x03abc");
    let back = ApiVersionsRequest::decode(&mut bytes.clone(), 3).unwrap();
    assert_eq!(back, body);
}

#[test]
fn defaults_follow_the_schema() {
    let m = MetadataRequest::default();
    assert!(m.allow_auto_topic_creation, "schema default true");
    let r = ApiVersionsResponse::default();
    assert_eq!(r.finalized_features_epoch, -1);
    let p = ProduceRequest::default();
    assert_eq!(p.transactional_id, None);
}
