//! TLS for `SSL` and `SASL_SSL` listeners (Kafka's `DefaultSslEngineFactory`): the key store,
//! the trust store and `ssl.client.auth` become one rustls `ServerConfig` per listener, and a
//! client certificate's subject becomes the connection's principal (Kafka's
//! `DefaultKafkaPrincipalBuilder` with `ssl.principal.mapping.rules`).
//!
//! Stores are read in the formats Kafka reads: `PEM` (a file holding the private key and the
//! certificate chain, or the `ssl.keystore.key` / `ssl.keystore.certificate.chain` /
//! `ssl.truststore.certificates` values themselves) and `PKCS12`. A store typed `JKS` (Kafka's
//! default type) is read when its bytes are PKCS12, as Java's keystore compatibility mode does
//! for the PKCS12 files keytool has written since Java 9; a true JKS file is refused with the
//! keytool command that converts it.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::principal_mapper::SslPrincipalMapper;
use super::SecurityError;

/// `ssl.client.auth`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Result<Self, SecurityError> {
        // Case-insensitive, as Kafka's SslClientAuth.forConfig.
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            other => Err(SecurityError::config(
                "ssl.client.auth",
                format!("{other:?} is not one of required, requested, none"),
            )),
        }
    }
}

/// Where a store comes from: a file of some type, or PEM text given in the config itself.
/// `Debug` shows which secrets are set, not their values.
#[derive(Clone, Default)]
pub struct StoreSpec {
    /// `ssl.keystore.type` / `ssl.truststore.type` (JKS, PKCS12, PEM).
    pub store_type: String,
    pub location: Option<String>,
    pub password: Option<String>,
    /// Key store only: `ssl.key.password`.
    pub key_password: Option<String>,
    /// Key store only: `ssl.keystore.key` (PEM).
    pub pem_key: Option<String>,
    /// `ssl.keystore.certificate.chain` / `ssl.truststore.certificates` (PEM).
    pub pem_certificates: Option<String>,
}

impl std::fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSpec")
            .field("store_type", &self.store_type)
            .field("location", &self.location)
            .field("password", &self.password.as_ref().map(|_| "[hidden]"))
            .field(
                "key_password",
                &self.key_password.as_ref().map(|_| "[hidden]"),
            )
            .field("pem_key", &self.pem_key.as_ref().map(|_| "[hidden]"))
            .field("pem_certificates", &self.pem_certificates.is_some())
            .finish()
    }
}

/// One listener's TLS settings, as read from `listener.name.<name>.ssl.*` (or `ssl.*`).
#[derive(Debug, Clone)]
pub struct SslSettings {
    pub keystore: StoreSpec,
    pub truststore: StoreSpec,
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`
    pub enabled_protocols: Vec<String>,
    /// `ssl.principal.mapping.rules`
    pub principal_mapping_rules: String,
}

/// What a TLS listener needs at accept time.
pub struct TlsListener {
    pub acceptor: tokio_rustls::TlsAcceptor,
    pub principal_mapper: SslPrincipalMapper,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener").finish_non_exhaustive()
    }
}

impl TlsListener {
    /// Reads the stores and builds the rustls configuration; every failure names the key and
    /// the file, never a password.
    pub fn new(settings: &SslSettings) -> Result<Self, SecurityError> {
        let (chain, key) = load_key_store(&settings.keystore)?;
        let versions = protocol_versions(&settings.enabled_protocols)?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| SecurityError::config("ssl.enabled.protocols", e.to_string()))?;
        let builder = match settings.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let roots = load_trust_store(&settings.truststore)?;
                if roots.is_empty() {
                    return Err(SecurityError::config(
                        "ssl.truststore.location",
                        "ssl.client.auth needs a trust store with at least one certificate",
                    ));
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| SecurityError::config("ssl.truststore.location", e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| SecurityError::config("ssl.keystore.location", e.to_string()))?;
        let principal_mapper = SslPrincipalMapper::parse(&settings.principal_mapping_rules)
            .map_err(|e| SecurityError::config("ssl.principal.mapping.rules", e))?;
        Ok(TlsListener {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            principal_mapper,
        })
    }
}

fn protocol_versions(
    names: &[String],
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, SecurityError> {
    let mut out = Vec::new();
    for n in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        match n {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            // Older versions are disabled in current JDKs too; naming them is harmless as long
            // as a supported one is also named.
            "TLSv1.1" | "TLSv1" | "SSLv3" => {}
            other => {
                return Err(SecurityError::config(
                    "ssl.enabled.protocols",
                    format!("unknown protocol {other:?}"),
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(SecurityError::config(
            "ssl.enabled.protocols",
            "names neither TLSv1.2 nor TLSv1.3",
        ));
    }
    Ok(out)
}

fn read_store_file(key: &'static str, path: &str) -> Result<Vec<u8>, SecurityError> {
    std::fs::read(Path::new(path))
        .map_err(|e| SecurityError::config(key, format!("cannot read {path}: {e}")))
}

/// The store's bytes are PKCS12 (a DER SEQUENCE), whatever its configured type says.
fn looks_like_pkcs12(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x30)
}

const JKS_MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];

fn store_format(
    key: &'static str,
    spec: &StoreSpec,
    bytes: &[u8],
) -> Result<&'static str, SecurityError> {
    match spec.store_type.trim().to_ascii_uppercase().as_str() {
        "PEM" => Ok("PEM"),
        "PKCS12" => Ok("PKCS12"),
        "JKS" if looks_like_pkcs12(bytes) => Ok("PKCS12"),
        "JKS" if bytes.starts_with(&JKS_MAGIC) => Err(SecurityError::config(
            key,
            format!(
                "{} is a JKS store, which kactor does not read; convert it with \
                 `keytool -importkeystore -srckeystore {0} -destkeystore store.p12 \
                 -deststoretype PKCS12` and set the type to PKCS12",
                spec.location.as_deref().unwrap_or("the store")
            ),
        )),
        "JKS" => Err(SecurityError::config(key, "not a JKS or PKCS12 store")),
        other => Err(SecurityError::config(
            key,
            format!("store type {other:?} is not one of JKS, PKCS12, PEM"),
        )),
    }
}

type KeyPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The listener's certificate chain and private key.
pub fn load_key_store(spec: &StoreSpec) -> Result<KeyPair, SecurityError> {
    const KEY: &str = "ssl.keystore.location";
    if let Some(pem_key) = &spec.pem_key {
        let chain_text = spec.pem_certificates.as_deref().ok_or_else(|| {
            SecurityError::config(
                "ssl.keystore.certificate.chain",
                "required with ssl.keystore.key",
            )
        })?;
        return pem_key_pair(
            "ssl.keystore.key",
            pem_key.as_bytes(),
            chain_text.as_bytes(),
        );
    }
    let path = spec
        .location
        .as_deref()
        .ok_or_else(|| SecurityError::config(KEY, "a TLS listener needs a key store"))?;
    let bytes = read_store_file(KEY, path)?;
    match store_format(KEY, spec, &bytes)? {
        "PEM" => pem_key_pair(KEY, &bytes, &bytes),
        _ => {
            let password = spec.password.as_deref().unwrap_or("");
            let store = p12_keystore::KeyStore::from_pkcs12(&bytes, password).map_err(|e| {
                SecurityError::config(KEY, format!("cannot open PKCS12 store {path}: {e}"))
            })?;
            let (_, chain) = store.private_key_chain().ok_or_else(|| {
                SecurityError::config(KEY, format!("{path} holds no private key entry"))
            })?;
            let certs = chain
                .chain()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect::<Vec<_>>();
            if certs.is_empty() {
                return Err(SecurityError::config(
                    KEY,
                    format!("{path}: the key entry has no certificate"),
                ));
            }
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().to_vec()));
            Ok((certs, key))
        }
    }
}

fn pem_key_pair(
    key_name: &'static str,
    key_text: &[u8],
    chain_text: &[u8],
) -> Result<KeyPair, SecurityError> {
    if String::from_utf8_lossy(key_text).contains("ENCRYPTED PRIVATE KEY") {
        // Kafka decrypts PKCS8 keys with ssl.key.password; kactor reads unencrypted keys only,
        // and says so rather than failing later with a parse error.
        return Err(SecurityError::config(
            key_name,
            "encrypted PEM private keys are not read by kactor yet; give an unencrypted \
             PKCS#8 key (openssl pkcs8 -topk8 -nocrypt) and no ssl.key.password",
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_text)
        .map_err(|e| SecurityError::config(key_name, format!("no usable private key: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(chain_text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SecurityError::config(key_name, format!("bad certificate: {e}")))?;
    if certs.is_empty() {
        return Err(SecurityError::config(
            key_name,
            "no certificate in the key store",
        ));
    }
    Ok((certs, key))
}

/// The certificates client certificates are checked against.
pub fn load_trust_store(spec: &StoreSpec) -> Result<RootCertStore, SecurityError> {
    const KEY: &str = "ssl.truststore.location";
    let certs: Vec<CertificateDer<'static>> = if let Some(text) = &spec.pem_certificates {
        CertificateDer::pem_slice_iter(text.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| SecurityError::config("ssl.truststore.certificates", e.to_string()))?
    } else if let Some(path) = spec.location.as_deref() {
        let bytes = read_store_file(KEY, path)?;
        match store_format(KEY, spec, &bytes)? {
            "PEM" => CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<_, _>>()
                .map_err(|e| SecurityError::config(KEY, format!("{path}: {e}")))?,
            _ => {
                let password = spec.password.as_deref().unwrap_or("");
                let store = p12_keystore::KeyStore::from_pkcs12(&bytes, password).map_err(|e| {
                    SecurityError::config(KEY, format!("cannot open PKCS12 store {path}: {e}"))
                })?;
                store
                    .entries()
                    .flat_map(|(_, entry)| match entry {
                        p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => {
                            k.chain().iter().map(|c| c.as_der().to_vec()).collect()
                        }
                        p12_keystore::KeyStoreEntry::Secret(_) => vec![],
                    })
                    .map(CertificateDer::from)
                    .collect()
            }
        }
    } else {
        Vec::new()
    };
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| SecurityError::config(KEY, format!("unusable certificate: {e}")))?;
    }
    Ok(roots)
}

/// The subject of a DER certificate as Java's `X500Principal.getName()` writes it (RFC 2253):
/// the most specific name first, `,` between names, `+` inside a multi-valued one.
pub fn subject_rfc2253(cert_der: &[u8]) -> Result<String, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).map_err(|e| e.to_string())?;
    let rdns: Vec<String> = cert
        .subject()
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| {
                    let oid = atv.attr_type().to_id_string();
                    match (short_name(&oid), atv.as_str()) {
                        (Some(name), Ok(value)) => format!("{name}={}", escape_rfc2253(value)),
                        // Java writes other attributes as their OID and the value's DER in hex.
                        _ => {
                            let raw = atv.attr_value();
                            let mut der = vec![raw.header.tag().0 as u8];
                            der_length(&mut der, raw.data.len());
                            der.extend_from_slice(raw.data);
                            let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                            format!("{oid}=#{hex}")
                        }
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// A DER length: one byte below 128, else 0x80 | n followed by n big-endian bytes.
fn der_length(out: &mut Vec<u8>, len: usize) {
    if len < 128 {
        out.push(len as u8);
        return;
    }
    let bytes = len.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push(0x80 | (bytes.len() - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// The keywords RFC 2253 (and Java) write by name.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_map_to_rustls_versions() {
        let v = protocol_versions(&["TLSv1.2".into(), "TLSv1.3".into()]).unwrap();
        assert_eq!(v.len(), 2);
        assert!(protocol_versions(&["TLSv1".into()]).is_err());
        assert!(protocol_versions(&["TLSv9".into()]).is_err());
    }

    #[test]
    fn der_lengths_use_the_long_form_from_128() {
        let enc = |n| {
            let mut v = Vec::new();
            der_length(&mut v, n);
            v
        };
        assert_eq!(enc(5), vec![5]);
        assert_eq!(enc(200), vec![0x81, 200]);
        assert_eq!(enc(300), vec![0x82, 1, 44]);
        assert_eq!(ClientAuth::parse("REQUIRED").unwrap(), ClientAuth::Required);
    }

    #[test]
    fn rfc2253_escapes_specials() {
        assert_eq!(escape_rfc2253("a,b"), "a\\,b");
        assert_eq!(escape_rfc2253("#x "), "\\#x\\ ");
        assert_eq!(escape_rfc2253("plain"), "plain");
    }

    #[test]
    fn jks_magic_is_refused_with_the_conversion_command() {
        let spec = StoreSpec {
            store_type: "JKS".into(),
            location: Some("/x/k.jks".into()),
            ..Default::default()
        };
        let err = store_format("ssl.keystore.location", &spec, &[0xFE, 0xED, 0xFE, 0xED, 0])
            .unwrap_err()
            .to_string();
        assert!(err.contains("keytool -importkeystore"), "{err}");
        assert_eq!(
            store_format("k", &spec, &[0x30, 0x82]).unwrap(),
            "PKCS12",
            "a PKCS12 file typed JKS is read, as Java does"
        );
    }
}
