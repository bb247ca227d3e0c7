//! SASL servers for `SASL_PLAINTEXT` and `SASL_SSL` listeners (Kafka's `PlainSaslServer` and
//! `ScramSaslServer`), as pure state machines: bytes from a SaslAuthenticate request in, the
//! bytes to answer with or a failure out. The connection owns one while a client
//! authenticates; credentials come from the listener's JAAS config (PLAIN) or from the
//! metadata image (SCRAM, `UserScramCredentialRecord`s written by `kafka-configs`).

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::KafkaPrincipal;
use crate::metadata::core::ScramCredential;

pub const PLAIN: &str = "PLAIN";
pub const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
pub const SCRAM_SHA_512: &str = "SCRAM-SHA-512";
pub const OAUTHBEARER: &str = "OAUTHBEARER";

/// The mechanisms kactor serves (GSSAPI, Kafka's default, is not).
pub const SUPPORTED_MECHANISMS: &[&str] = &[PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER];

/// Kafka's SCRAM iteration bounds (`ScramMechanism.minIterations`).
const SCRAM_MIN_ITERATIONS: i32 = 4096;

/// One SASL listener's settings. `Debug` leaves the passwords out.
#[derive(Clone, Default)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms` for the listener, in the configured order (the handshake
    /// answer lists them).
    pub enabled_mechanisms: Vec<String>,
    /// PLAIN's users from `listener.name.<l>.plain.sasl.jaas.config` (`user_<name>="<pw>"`).
    pub plain_users: HashMap<String, String>,
    /// `connections.max.reauth.ms` per mechanism; 0 = sessions do not expire.
    pub max_reauth_ms: HashMap<String, i64>,
    /// `sasl.server.max.receive.size`: the largest frame read before authentication ends.
    pub max_receive_size: usize,
    /// OAUTHBEARER's unsecured-token validation options (from its JAAS config).
    pub oauthbearer: UnsecuredJwtOptions,
}

impl std::fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("enabled_mechanisms", &self.enabled_mechanisms)
            .field("plain_users", &self.plain_users.keys().collect::<Vec<_>>())
            .field("max_reauth_ms", &self.max_reauth_ms)
            .field("max_receive_size", &self.max_receive_size)
            .field("oauthbearer", &self.oauthbearer)
            .finish()
    }
}

/// The options of Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`, the broker's default
/// OAUTHBEARER validator: tokens are unsigned JWTs (`alg: none`) whose claims are checked.
#[derive(Debug, Clone)]
pub struct UnsecuredJwtOptions {
    /// `unsecuredValidatorPrincipalClaimName` (default `sub`).
    pub principal_claim: String,
    /// `unsecuredValidatorScopeClaimName` (default `scope`).
    pub scope_claim: String,
    /// `unsecuredValidatorRequiredScope`: scopes every token must carry.
    pub required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs`.
    pub allowable_clock_skew_ms: i64,
}

impl Default for UnsecuredJwtOptions {
    fn default() -> Self {
        UnsecuredJwtOptions {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: Vec::new(),
            allowable_clock_skew_ms: 0,
        }
    }
}

impl UnsecuredJwtOptions {
    pub fn from_jaas(options: &HashMap<String, String>) -> Result<Self, String> {
        let mut o = UnsecuredJwtOptions::default();
        if let Some(v) = options.get("unsecuredValidatorPrincipalClaimName") {
            o.principal_claim = v.trim().to_string();
        }
        if let Some(v) = options.get("unsecuredValidatorScopeClaimName") {
            o.scope_claim = v.trim().to_string();
        }
        if let Some(v) = options.get("unsecuredValidatorRequiredScope") {
            o.required_scope = v.split_whitespace().map(str::to_string).collect();
        }
        if let Some(v) = options.get("unsecuredValidatorAllowableClockSkewMs") {
            o.allowable_clock_skew_ms = v.trim().parse().map_err(|_| {
                format!("unsecuredValidatorAllowableClockSkewMs {v:?} is not a number")
            })?;
        }
        Ok(o)
    }
}

/// Why an exchange failed. Kafka tells the client the message of an authentication exception
/// verbatim; any other SASL failure gets a generic message, so that a client cannot learn
/// whether a user exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslFailure {
    /// Sent to the client as is.
    Client(String),
    /// Logged only; the client reads "Authentication failed during authentication due to
    /// invalid credentials with SASL mechanism M".
    Hidden(String),
}

impl SaslFailure {
    pub fn client_message(&self, mechanism: &str, reauthenticating: bool) -> String {
        match self {
            SaslFailure::Client(m) => m.clone(),
            SaslFailure::Hidden(_) => format!(
                "Authentication failed during {} due to invalid credentials with SASL mechanism {mechanism}",
                if reauthenticating { "re-authentication" } else { "authentication" }
            ),
        }
    }

    pub fn log_message(&self) -> &str {
        match self {
            SaslFailure::Client(m) | SaslFailure::Hidden(m) => m,
        }
    }
}

/// What a step of the exchange produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// Send these bytes and expect another SaslAuthenticate.
    Challenge(Vec<u8>),
    /// Authenticated: send these bytes (possibly empty) and serve the client as `principal`.
    Done {
        response: Vec<u8>,
        principal: KafkaPrincipal,
        /// When the credential itself expires (an OAUTHBEARER token's `exp`), in ms since the
        /// epoch: the session ends then at the latest.
        credential_expires_ms: Option<i64>,
    },
}

/// Looks up a user's SCRAM credential for a mechanism (1 = SHA-256, 2 = SHA-512).
pub type CredentialLookup<'a> = &'a dyn Fn(&str, i8) -> Option<ScramCredential>;

#[derive(Debug)]
pub enum SaslServer {
    Plain,
    Scram(Box<ScramServer>),
    OAuthBearer {
        /// The error sent as a challenge; the client's `%x01` answer ends the exchange with it.
        pending_error: Option<String>,
    },
}

impl SaslServer {
    /// `None` when kactor does not implement `mechanism`.
    pub fn new(mechanism: &str) -> Option<Self> {
        match mechanism {
            PLAIN => Some(SaslServer::Plain),
            SCRAM_SHA_256 => Some(SaslServer::Scram(Box::new(ScramServer::new(
                ScramHash::Sha256,
            )))),
            SCRAM_SHA_512 => Some(SaslServer::Scram(Box::new(ScramServer::new(
                ScramHash::Sha512,
            )))),
            OAUTHBEARER => Some(SaslServer::OAuthBearer {
                pending_error: None,
            }),
            _ => None,
        }
    }

    pub fn step(
        &mut self,
        token: &[u8],
        settings: &SaslSettings,
        credentials: CredentialLookup<'_>,
    ) -> Result<SaslStep, SaslFailure> {
        match self {
            SaslServer::Plain => plain(token, &settings.plain_users),
            SaslServer::Scram(s) => s.step(token, credentials),
            SaslServer::OAuthBearer { pending_error } => {
                if token == [0x01] {
                    if let Some(e) = pending_error.take() {
                        return Err(SaslFailure::Client(e));
                    }
                }
                *pending_error = None;
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                match oauthbearer(token, &settings.oauthbearer, now_ms)? {
                    OAuthOutcome::Valid(step) => Ok(step),
                    OAuthOutcome::Invalid(json) => {
                        *pending_error = Some(json.clone());
                        Ok(SaslStep::Challenge(json.into_bytes()))
                    }
                }
            }
        }
    }
}

enum OAuthOutcome {
    Valid(SaslStep),
    /// RFC 7628: the server answers an unusable token with a JSON error as a challenge.
    Invalid(String),
}

/// RFC 7628 client initial response `n,[a=authzid],^Aauth=Bearer <token>^A[k=v^A]*^A`, with
/// the token checked as Kafka's unsecured validator does.
fn oauthbearer(
    token: &[u8],
    options: &UnsecuredJwtOptions,
    now_ms: i64,
) -> Result<OAuthOutcome, SaslFailure> {
    let bad = |what: &str| {
        SaslFailure::Hidden(format!("Invalid OAUTHBEARER client first message: {what}"))
    };
    let text = std::str::from_utf8(token).map_err(|_| bad("not UTF-8"))?;
    let rest = text
        .strip_prefix("n,")
        .ok_or_else(|| bad("no gs2 header"))?;
    let (authzid, rest) = rest.split_once(',').ok_or_else(|| bad("no gs2 header"))?;
    let authzid = match authzid {
        "" => "",
        a => a
            .strip_prefix("a=")
            .ok_or_else(|| bad("bad authorization id"))?,
    };
    let pairs = rest
        .strip_prefix('\u{1}')
        .and_then(|r| r.strip_suffix("\u{1}\u{1}"))
        .ok_or_else(|| bad("bad separators"))?;
    let mut auth = None;
    for pair in pairs.split('\u{1}') {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad("key without value"))?;
        if k == "auth" {
            auth = Some(v);
        }
    }
    let auth = auth.ok_or_else(|| bad("no auth"))?;
    let (scheme, jwt) = auth.split_once(' ').ok_or_else(|| bad("no token"))?;
    if scheme != "Bearer" {
        return Err(SaslFailure::Hidden(format!(
            "Invalid scheme in OAUTHBEARER client first message: {scheme}"
        )));
    }
    let invalid_token = || {
        Ok(OAuthOutcome::Invalid(
            r#"{"status":"invalid_token"}"#.into(),
        ))
    };
    let Some(claims) = unsecured_jwt_claims(jwt.trim()) else {
        return invalid_token();
    };
    let principal = match claims.get(&options.principal_claim) {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return invalid_token(),
    };
    let millis = |name: &str| {
        claims
            .get(name)
            .and_then(serde_json::Value::as_f64)
            .map(|s| (s * 1000.0) as i64)
    };
    let skew = options.allowable_clock_skew_ms;
    let iat = millis("iat");
    if claims.contains_key("iat") && !matches!(iat, Some(t) if t <= now_ms.saturating_add(skew)) {
        return invalid_token();
    }
    let Some(exp_ms) = millis("exp") else {
        return invalid_token();
    };
    if now_ms >= exp_ms.saturating_add(skew) || iat.is_some_and(|t| t >= exp_ms) {
        return invalid_token();
    }
    if !options.required_scope.is_empty() {
        let scope: Vec<String> = match claims.get(&options.scope_claim) {
            Some(serde_json::Value::String(s)) => {
                s.split_whitespace().map(str::to_string).collect()
            }
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        if options.required_scope.iter().any(|r| !scope.contains(r)) {
            return Ok(OAuthOutcome::Invalid(format!(
                r#"{{"status":"insufficient_scope", "scope":"[{}]"}}"#,
                options.required_scope.join(", ")
            )));
        }
    }
    if !authzid.is_empty() && authzid != principal {
        return Err(SaslFailure::Client(format!(
            "Authentication failed: Client requested an authorization id ({authzid}) that is different from the token's principal name ({principal})"
        )));
    }
    Ok(OAuthOutcome::Valid(SaslStep::Done {
        response: Vec::new(),
        principal: KafkaPrincipal::user(&principal),
        credential_expires_ms: Some(exp_ms),
    }))
}

/// The claims of an unsecured JWS (`base64url(header).base64url(claims).`, `alg` = `none`).
fn unsecured_jwt_claims(jwt: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = jwt.split('.');
    let (header, claims, signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !signature.is_empty() {
        return None;
    }
    let decode = |p: &str| URL_SAFE_NO_PAD.decode(p.trim_end_matches('=')).ok();
    let header: serde_json::Value = serde_json::from_slice(&decode(header)?).ok()?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("none") {
        return None;
    }
    match serde_json::from_slice(&decode(claims)?).ok()? {
        serde_json::Value::Object(m) => Some(m),
        _ => None,
    }
}

/// RFC 4616: `[authzid] NUL authcid NUL passwd`, checked against the JAAS users.
fn plain(token: &[u8], users: &HashMap<String, String>) -> Result<SaslStep, SaslFailure> {
    let text = String::from_utf8_lossy(token);
    let parts: Vec<&str> = text.split('\u{0}').collect();
    if parts.len() != 3 {
        return Err(SaslFailure::Client(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            parts.len()
        )));
    }
    let (authzid, username, password) = (parts[0], parts[1], parts[2]);
    if username.is_empty() {
        return Err(SaslFailure::Client(
            "Authentication failed: username not specified".into(),
        ));
    }
    if password.is_empty() {
        return Err(SaslFailure::Client(
            "Authentication failed: password not specified".into(),
        ));
    }
    let ok = users
        .get(username)
        .is_some_and(|expected| constant_time_eq(expected.as_bytes(), password.as_bytes()));
    if !ok {
        return Err(SaslFailure::Client(
            "Authentication failed: Invalid username or password".into(),
        ));
    }
    if !authzid.is_empty() && authzid != username {
        return Err(SaslFailure::Client(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    Ok(SaslStep::Done {
        response: Vec::new(),
        principal: KafkaPrincipal::user(username),
        credential_expires_ms: None,
    })
}

/// Compares digests of both sides, so that the time taken says nothing about where the
/// passwords differ nor about the stored password's length.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::Digest;
    let (da, db) = (sha2::Sha256::digest(a), sha2::Sha256::digest(b));
    da.iter()
        .zip(db.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    /// Kafka's `ScramMechanism` type id, as stored in `UserScramCredentialRecord`.
    pub fn type_id(self) -> i8 {
        match self {
            ScramHash::Sha256 => 1,
            ScramHash::Sha512 => 2,
        }
    }

    pub fn from_type_id(id: i8) -> Option<Self> {
        match id {
            1 => Some(ScramHash::Sha256),
            2 => Some(ScramHash::Sha512),
            _ => None,
        }
    }

    /// RFC 5802's StoredKey = H(HMAC(salted, "Client Key")) and ServerKey =
    /// HMAC(salted, "Server Key"): what is stored instead of the password.
    pub fn keys(self, salted_password: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let client_key = self.hmac(salted_password, b"Client Key");
        (
            self.hash(&client_key),
            self.hmac(salted_password, b"Server Key"),
        )
    }

    pub fn hmac(self, key: &[u8], msg: &[u8]) -> Vec<u8> {
        macro_rules! mac {
            ($h:ty) => {{
                let mut m = Hmac::<$h>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(msg);
                m.finalize().into_bytes().to_vec()
            }};
        }
        match self {
            ScramHash::Sha256 => mac!(Sha256),
            ScramHash::Sha512 => mac!(Sha512),
        }
    }

    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }
}

/// RFC 5802's server side, with Kafka's extensions field (`tokenauth` for delegation tokens,
/// which kactor does not issue, so a token login fails as an unknown token does in Kafka).
#[derive(Debug)]
pub struct ScramServer {
    hash: ScramHash,
    state: ScramState,
}

#[derive(Debug)]
enum ScramState {
    ExpectClientFirst,
    ExpectClientFinal(Box<FirstExchanged>),
    Finished,
}

/// What the first round fixed, for checking the client's final message.
#[derive(Debug)]
struct FirstExchanged {
    username: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

impl ScramServer {
    pub fn new(hash: ScramHash) -> Self {
        ScramServer {
            hash,
            state: ScramState::ExpectClientFirst,
        }
    }

    fn step(
        &mut self,
        token: &[u8],
        credentials: CredentialLookup<'_>,
    ) -> Result<SaslStep, SaslFailure> {
        let text = std::str::from_utf8(token)
            .map_err(|_| SaslFailure::Hidden("SCRAM message is not UTF-8".into()))?;
        match std::mem::replace(&mut self.state, ScramState::Finished) {
            ScramState::ExpectClientFirst => self.client_first(text, credentials),
            ScramState::ExpectClientFinal(first) => {
                let signature = first.verify(self.hash, text)?;
                Ok(SaslStep::Done {
                    response: format!("v={}", B64.encode(signature)).into_bytes(),
                    principal: KafkaPrincipal::user(&first.username),
                    credential_expires_ms: None,
                })
            }
            ScramState::Finished => Err(SaslFailure::Hidden(
                "SCRAM exchange already finished".into(),
            )),
        }
    }

    fn client_first(
        &mut self,
        text: &str,
        credentials: CredentialLookup<'_>,
    ) -> Result<SaslStep, SaslFailure> {
        let bad = || {
            SaslFailure::Hidden(format!(
                "Invalid SCRAM client first message \"{}\"",
                crate::network::authenticator::loggable(text)
            ))
        };
        // gs2-header: "n," [ "a=" authzid ] ","; channel binding ("y", "p=") is not offered.
        let rest = text.strip_prefix("n,").ok_or_else(bad)?;
        let (authzid, bare) = rest.split_once(',').ok_or_else(bad)?;
        let authzid = match authzid {
            "" => None,
            a => Some(decode_sasl_name(a.strip_prefix("a=").ok_or_else(bad)?).ok_or_else(bad)?),
        };
        let gs2_header = format!("n,{},", &rest[..rest.len() - bare.len() - 1]);
        let mut fields = bare.split(',');
        let mut first = fields.next().ok_or_else(bad)?;
        if first.starts_with("m=") {
            // reserved-mext: RFC 5802 says a server must fail an exchange that uses it.
            return Err(bad());
        }
        let username =
            decode_sasl_name(first.strip_prefix("n=").ok_or_else(bad)?).ok_or_else(bad)?;
        first = fields.next().ok_or_else(bad)?;
        let client_nonce = first.strip_prefix("r=").ok_or_else(bad)?;
        if client_nonce.is_empty() {
            return Err(bad());
        }
        let extensions: Vec<&str> = fields.collect();
        if extensions
            .iter()
            .any(|e| e.starts_with("tokenauth=") && e.ends_with("=true"))
        {
            return Err(SaslFailure::Hidden(format!(
                "Token Authentication failed: Invalid tokenId : {username}"
            )));
        }
        let credential = credentials(&username, self.hash.type_id()).ok_or_else(|| {
            SaslFailure::Hidden("Authentication failed: Invalid user credentials".into())
        })?;
        if let Some(a) = authzid {
            if a != username {
                return Err(SaslFailure::Client(
                    "Authentication failed: Client requested an authorization id that is different from username".into(),
                ));
            }
        }
        if credential.iterations < SCRAM_MIN_ITERATIONS {
            return Err(SaslFailure::Hidden(format!(
                "Iterations {} is less than the minimum {SCRAM_MIN_ITERATIONS}",
                credential.iterations
            )));
        }
        let nonce = format!("{client_nonce}{}", server_nonce());
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let out = server_first.clone().into_bytes();
        self.state = ScramState::ExpectClientFinal(Box::new(FirstExchanged {
            username,
            gs2_header,
            client_first_bare: bare.to_string(),
            server_first,
            nonce,
            credential,
        }));
        Ok(SaslStep::Challenge(out))
    }
}

impl FirstExchanged {
    /// Checks the client's proof; returns the server signature.
    fn verify(&self, hash: ScramHash, text: &str) -> Result<Vec<u8>, SaslFailure> {
        let bad =
            || SaslFailure::Hidden("Authentication failed: Invalid client final message".into());
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(bad)?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or_else(bad)?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or_else(bad)?;
        if nonce != self.nonce {
            return Err(SaslFailure::Hidden(
                "Invalid client nonce in the final client message.".into(),
            ));
        }
        if B64.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(bad());
        }
        let proof = B64.decode(proof).map_err(|_| bad())?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let client_signature = hash.hmac(&self.credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(SaslFailure::Hidden("Invalid client credentials".into()));
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if !constant_time_eq(&hash.hash(&client_key), &self.credential.stored_key) {
            return Err(SaslFailure::Hidden("Invalid client credentials".into()));
        }
        Ok(hash.hmac(&self.credential.server_key, auth_message.as_bytes()))
    }
}

/// RFC 5802 saslname: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn decode_sasl_name(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

fn server_nonce() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    (0..32)
        .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
        .collect()
}

/// The options of a JAAS login module line, e.g. `org.apache.kafka.common.security.plain.
/// PlainLoginModule required username="admin" password="admin-secret" user_alice="x";`
pub fn parse_jaas_options(text: &str) -> Result<HashMap<String, String>, String> {
    let text = text.trim();
    let body = text
        .strip_suffix(';')
        .ok_or("a JAAS config must end with `;`")?
        .trim();
    let mut chars = body.char_indices().peekable();
    // The module class and its control flag come first.
    let mut words = 0;
    let mut start_of_options = body.len();
    while let Some((i, c)) = chars.peek().copied() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if words == 2 {
            start_of_options = i;
            break;
        }
        while chars.peek().is_some_and(|(_, c)| !c.is_whitespace()) {
            chars.next();
        }
        words += 1;
    }
    if words < 2 {
        return Err("a JAAS config needs a login module class and a control flag".into());
    }
    let mut options = HashMap::new();
    let mut rest = &body[start_of_options.min(body.len())..];
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let eq = rest
            .find('=')
            // The text holds passwords: name the option's position, never its text.
            .ok_or_else(|| format!("option {} has no `=`", options.len() + 1))?;
        let key = rest[..eq].trim().to_string();
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(q) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut end = None;
            let mut it = q.char_indices();
            while let Some((i, c)) = it.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = it.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    c => v.push(c),
                }
            }
            let end = end.ok_or_else(|| format!("unterminated quoted value of option {key}"))?;
            value = v;
            rest = &q[end + 1..];
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            value = rest[..end].to_string();
            rest = &rest[end..];
        }
        options.insert(key, value);
    }
    Ok(options)
}

/// PLAIN's user table from JAAS options: `user_<name>` = password.
pub fn plain_users(options: &HashMap<String, String>) -> HashMap<String, String> {
    options
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_string(), v.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::core::scram::scram_keys;

    fn credential(
        hash: ScramHash,
        password: &str,
        salt: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let salted = hi(hash, password.as_bytes(), salt, iterations);
        let (stored, server) = scram_keys(hash.type_id(), &salted).unwrap();
        ScramCredential {
            salt: bytes::Bytes::copy_from_slice(salt),
            stored_key: stored.into(),
            server_key: server.into(),
            iterations,
        }
    }

    /// RFC 5802 Hi() (PBKDF2 with one block), the client's side of the key derivation.
    fn hi(hash: ScramHash, password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
        let mut msg = salt.to_vec();
        msg.extend_from_slice(&1u32.to_be_bytes());
        let mut u = hash.hmac(password, &msg);
        let mut out = u.clone();
        for _ in 1..iterations {
            u = hash.hmac(password, &u);
            out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
        }
        out
    }

    /// A client of our own, following RFC 5802, to drive the server.
    fn client_final(
        hash: ScramHash,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> (String, Vec<u8>) {
        let fields: HashMap<&str, &str> = server_first
            .split(',')
            .filter_map(|f| f.split_once('='))
            .collect();
        let salt = B64.decode(fields["s"]).unwrap();
        let iterations: i32 = fields["i"].parse().unwrap();
        let salted = hi(hash, password.as_bytes(), &salt, iterations);
        let client_key = hash.hmac(&salted, b"Client Key");
        let stored_key = hash.hash(&client_key);
        let without_proof = format!("c=biws,r={}", fields["r"]);
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let sig = hash.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let server_key = hash.hmac(&salted, b"Server Key");
        let expected_server_sig = hash.hmac(&server_key, auth.as_bytes());
        (
            format!("{without_proof},p={}", B64.encode(proof)),
            expected_server_sig,
        )
    }

    fn exchange(hash: ScramHash, stored_pw: &str, given_pw: &str) -> Result<SaslStep, SaslFailure> {
        let cred = credential(hash, stored_pw, b"salty", 4096);
        let lookup =
            move |u: &str, t: i8| (u == "alice" && t == hash.type_id()).then(|| cred.clone());
        let mut server = ScramServer::new(hash);
        let bare = "n=alice,r=clientnonce";
        let SaslStep::Challenge(first) = server.step(format!("n,,{bare}").as_bytes(), &lookup)?
        else {
            panic!("expected a challenge")
        };
        let first = String::from_utf8(first).unwrap();
        assert!(first.starts_with("r=clientnonce"), "{first}");
        let (fin, expected_sig) = client_final(hash, given_pw, bare, &first);
        let step = server.step(fin.as_bytes(), &lookup)?;
        if let SaslStep::Done { response, .. } = &step {
            assert_eq!(
                response,
                &format!("v={}", B64.encode(expected_sig)).into_bytes()
            );
        }
        Ok(step)
    }

    #[test]
    fn scram_accepts_the_right_password_with_both_hashes() {
        for h in [ScramHash::Sha256, ScramHash::Sha512] {
            match exchange(h, "pw", "pw").unwrap() {
                SaslStep::Done { principal, .. } => assert_eq!(principal.to_string(), "User:alice"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn scram_refuses_a_wrong_password_and_unknown_users_alike() {
        let e = exchange(ScramHash::Sha256, "pw", "nope").unwrap_err();
        assert!(matches!(e, SaslFailure::Hidden(_)));
        assert_eq!(
            e.client_message(SCRAM_SHA_256, false),
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        );
        let mut server = ScramServer::new(ScramHash::Sha256);
        let none = |_: &str, _: i8| None;
        let e = server.step(b"n,,n=bob,r=abc", &none).unwrap_err();
        assert!(matches!(e, SaslFailure::Hidden(_)));
    }

    #[test]
    fn scram_rejects_malformed_first_messages_and_token_logins() {
        let cred = credential(ScramHash::Sha256, "pw", b"s", 4096);
        let lookup = move |_: &str, _: i8| Some(cred.clone());
        for msg in [
            &b"y,,n=alice,r=x"[..],
            b"n,,r=x",
            b"n,,n=al=ice,r=x",
            b"n,,n=alice,r=",
            b"\xff\xfe",
        ] {
            assert!(ScramServer::new(ScramHash::Sha256)
                .step(msg, &lookup)
                .is_err());
        }
        let e = ScramServer::new(ScramHash::Sha256)
            .step(b"n,,n=alice,r=x,tokenauth=true", &lookup)
            .unwrap_err();
        assert!(e.log_message().contains("Token"));
        let e = ScramServer::new(ScramHash::Sha256)
            .step(b"n,a=bob,n=alice,r=x", &lookup)
            .unwrap_err();
        assert!(matches!(e, SaslFailure::Client(_)));
    }

    fn jwt(claims: &str) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims.as_bytes())
        )
    }

    fn bearer(token: &str) -> Vec<u8> {
        format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
    }

    #[test]
    fn oauthbearer_accepts_valid_unsecured_tokens_and_reports_bad_ones() {
        let now = 1_700_000_000_000i64;
        let opts = UnsecuredJwtOptions {
            required_scope: vec!["kafka".into()],
            ..Default::default()
        };
        let good = jwt(r#"{"sub":"alice","iat":1699999990,"exp":1700000100,"scope":"kafka x"}"#);
        match oauthbearer(&bearer(&good), &opts, now) {
            Ok(OAuthOutcome::Valid(SaslStep::Done {
                principal,
                credential_expires_ms,
                ..
            })) => {
                assert_eq!(principal.to_string(), "User:alice");
                assert_eq!(credential_expires_ms, Some(1_700_000_100_000));
            }
            _ => panic!("valid token refused"),
        }
        for (claims, status) in [
            (
                r#"{"sub":"alice","exp":1699999999,"scope":"kafka"}"#,
                "invalid_token",
            ),
            (r#"{"exp":1700000100,"scope":"kafka"}"#, "invalid_token"),
            (
                r#"{"sub":"alice","exp":1700000100,"scope":"other"}"#,
                "insufficient_scope",
            ),
        ] {
            match oauthbearer(&bearer(&jwt(claims)), &opts, now) {
                Ok(OAuthOutcome::Invalid(json)) => assert!(json.contains(status), "{json}"),
                _ => panic!("{claims} accepted"),
            }
        }
        // A signed token is not an unsecured one.
        let signed = format!("{}sig", jwt(r#"{"sub":"a","exp":1700000100}"#));
        assert!(matches!(
            oauthbearer(&bearer(&signed), &UnsecuredJwtOptions::default(), now),
            Ok(OAuthOutcome::Invalid(_))
        ));
        // The error challenge, then the client's %x01, fails with the JSON as the message.
        let settings = SaslSettings {
            oauthbearer: opts,
            ..Default::default()
        };
        let mut server = SaslServer::new(OAUTHBEARER).unwrap();
        let none = |_: &str, _: i8| None;
        let expired = jwt(r#"{"sub":"alice","exp":1000,"scope":"kafka"}"#);
        assert!(matches!(
            server.step(&bearer(&expired), &settings, &none),
            Ok(SaslStep::Challenge(_))
        ));
        assert_eq!(
            server.step(&[1], &settings, &none),
            Err(SaslFailure::Client(r#"{"status":"invalid_token"}"#.into()))
        );
    }

    #[test]
    fn plain_checks_the_jaas_users() {
        let opts = parse_jaas_options(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" user_alice="al\"ice";"#,
        )
        .unwrap();
        assert_eq!(opts["username"], "admin");
        let users = plain_users(&opts);
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "al\"ice");
        assert!(matches!(
            plain(b"\0alice\0al\"ice", &users),
            Ok(SaslStep::Done { .. })
        ));
        assert_eq!(
            plain(b"\0alice\0wrong", &users),
            Err(SaslFailure::Client(
                "Authentication failed: Invalid username or password".into()
            ))
        );
        assert!(
            matches!(plain(b"bob\0alice\0al\"ice", &users), Err(SaslFailure::Client(m)) if m.contains("authorization id"))
        );
        assert!(
            matches!(plain(b"alice", &users), Err(SaslFailure::Client(m)) if m.contains("expected 3 tokens"))
        );
        assert!(parse_jaas_options("Module required user_a=\"x\"").is_err());
        assert!(parse_jaas_options("Module;").is_err());
    }
}
