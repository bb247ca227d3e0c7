//! Code generator for the Kafka message schemas in `schemas/` (Kafka's `MessageGenerator` /
//! `MessageDataGenerator`): reads JSON schemas in Kafka's shape and emits Rust structs with
//! versioned `Encode` / `Decode` impls, exact sizes, tagged fields and schema defaults.
//!
//! Also generates the error table (`errors`, from `schemas/errors/errors.tsv`).
//!
//! Used from `schemas/build.rs` (output only in `OUT_DIR`) and by the `kactor-codegen` binary,
//! which prints the code for one schema for review.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod errors;
mod model;
pub use errors::{
    generate_errors, generate_errors_file, parse_error_table, variant_name, ErrorRow,
};
pub use model::{parse_schema, Field, Schema, StructDef, Ty, Versions};

/// Generates the module body for one schema (without the surrounding `pub mod`).
/// `response_of` maps a request to its response type path for `Request::Response`.
pub fn generate_schema(schema: &Schema, response_path: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "#[allow(unused_imports)]\nuse crate::codec as _c;");
    let flexible = schema.flexible;
    for s in schema.all_structs() {
        let is_top = s.name == schema.name;
        gen_struct(&mut out, schema, s, flexible, is_top);
    }
    // Top-level traits.
    let name = &schema.name;
    let fmin = if flexible.is_empty() {
        "None".to_string()
    } else {
        format!("Some({})", flexible.lo)
    };
    let _ = writeln!(
        out,
        "impl _c::Message for {name} {{\n    const VALID_VERSIONS: (i16, i16) = ({}, {});\n    const FLEXIBLE_MIN: Option<i16> = {fmin};\n}}",
        schema.valid.lo, schema.valid.hi
    );
    if let Some(k) = schema.api_key {
        let _ = writeln!(
            out,
            "impl {name} {{\n    /// The schema's apiKey (the API key, or the record type for metadata / coordinator records).\n    pub const API_KEY: i16 = {k};\n}}"
        );
        if let Some(resp) = response_path {
            let _ = writeln!(
                out,
                "impl _c::Request for {name} {{\n    const API_KEY: i16 = {k};\n    type Response = {resp};\n}}"
            );
        }
    }
    out
}

/// Kafka's JSON schemas carry `//` comments; strip them (outside strings) before parsing.
pub fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut in_str = false;
    let mut escaped = false;
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if c == '"' {
            in_str = true;
            out.push(c);
        } else if c == '/' && chars.peek() == Some(&'/') {
            for c2 in chars.by_ref() {
                if c2 == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn load_schema(path: &Path) -> Result<Schema, String> {
    let src = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&strip_comments(&src))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    parse_schema(&v).map_err(|e| format!("{}: {e}", path.display()))
}

/// Sorted `*.json` files in a directory (missing directory = none).
pub fn schema_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = if i > 0 { Some(chars[i - 1]) } else { None };
            let next = chars.get(i + 1);
            let boundary = match prev {
                None => false,
                Some(p) => {
                    p.is_lowercase()
                        || p.is_ascii_digit()
                        || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
                }
            };
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

pub fn field_ident(name: &str) -> String {
    let s = snake_case(name);
    if KEYWORDS.contains(&s.as_str()) {
        format!("{s}_")
    } else {
        s
    }
}

/// Output of a whole directory: one module per schema, re-exports of the top-level structs.
pub struct DirOutput {
    pub code: String,
    pub schemas: Vec<Schema>,
}

pub fn generate_dir(dir: &Path) -> Result<DirOutput, String> {
    let mut schemas = Vec::new();
    for p in schema_files(dir) {
        schemas.push(load_schema(&p)?);
    }
    let mut code = String::new();
    // Requests name their response type; pair them by api key.
    let mut responses: BTreeMap<i16, String> = BTreeMap::new();
    for s in &schemas {
        if s.kind == "response" {
            if let Some(k) = s.api_key {
                responses.insert(k, format!("super::{}::{}", snake_case(&s.name), s.name));
            }
        }
    }
    for s in &schemas {
        let resp = if s.kind == "request" {
            s.api_key
                .and_then(|k| responses.get(&k).map(|x| x.as_str()))
        } else {
            None
        };
        let m = snake_case(&s.name);
        let _ = writeln!(
            code,
            "/// Generated from `{}.json`.\npub mod {m} {{",
            s.name
        );
        code.push_str(&generate_schema(s, resp));
        let _ = writeln!(code, "}}\npub use {m}::{};\n", s.name);
    }
    Ok(DirOutput { code, schemas })
}

/// The API-level glue for `messages/`: `ApiKey`, `RequestBody`, `ResponseBody`, header versions.
pub fn generate_api_glue(schemas: &[Schema]) -> String {
    let mut reqs: BTreeMap<i16, &Schema> = BTreeMap::new();
    let mut resps: BTreeMap<i16, &Schema> = BTreeMap::new();
    for s in schemas {
        match (s.kind.as_str(), s.api_key) {
            ("request", Some(k)) => {
                reqs.insert(k, s);
            }
            ("response", Some(k)) => {
                resps.insert(k, s);
            }
            _ => {}
        }
    }
    // Only APIs with both halves get an ApiKey: a lone request cannot be answered.
    let apis: Vec<(i16, &Schema, &Schema)> = reqs
        .iter()
        .filter_map(|(k, rq)| resps.get(k).map(|rs| (*k, *rq, *rs)))
        .collect();
    let vname = |s: &Schema| s.name.trim_end_matches("Request").to_string();
    let mut o = String::new();
    o.push_str("/// Every API this build has request and response schemas for.\n#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[repr(i16)]\npub enum ApiKey {\n");
    for (k, rq, _) in &apis {
        let _ = writeln!(o, "    {} = {k},", vname(rq));
    }
    o.push_str("}\n\nimpl ApiKey {\n    /// All keys, ascending.\n    pub const ALL: &'static [ApiKey] = &[");
    for (_, rq, _) in &apis {
        let _ = write!(o, "ApiKey::{}, ", vname(rq));
    }
    o.push_str("];\n\n    /// The API's name as Kafka spells it (`Produce`, `ApiVersions`).\n    pub fn name(self) -> &'static str {\n        match self {\n");
    for (_, rq, _) in &apis {
        let _ = writeln!(o, "            ApiKey::{0} => \"{0}\",", vname(rq));
    }
    o.push_str("        }\n    }\n\n    /// The request schema's validVersions.\n    pub fn valid_versions(self) -> (i16, i16) {\n        match self {\n");
    for (_, rq, _) in &apis {
        let _ = writeln!(
            o,
            "            ApiKey::{} => ({}, {}),",
            vname(rq),
            rq.valid.lo,
            rq.valid.hi
        );
    }
    o.push_str("        }\n    }\n\n    /// Whether the request schema marks its latest version unstable (not advertised).\n    pub fn latest_version_unstable(self) -> bool {\n        match self {\n");
    for (_, rq, _) in &apis {
        let _ = writeln!(
            o,
            "            ApiKey::{} => {},",
            vname(rq),
            rq.latest_version_unstable
        );
    }
    o.push_str("        }\n    }\n\n    /// The request schema's listeners (`broker`, `controller`).\n    pub fn listeners(self) -> &'static [&'static str] {\n        match self {\n");
    for (_, rq, _) in &apis {
        let l: Vec<String> = rq.listeners.iter().map(|x| format!("{x:?}")).collect();
        let _ = writeln!(
            o,
            "            ApiKey::{} => &[{}],",
            vname(rq),
            l.join(", ")
        );
    }
    o.push_str("        }\n    }\n\n    /// Lowest flexible version of the request, or None.\n    pub fn request_flexible_min(self) -> Option<i16> {\n        match self {\n");
    for (_, rq, _) in &apis {
        let f = if rq.flexible.is_empty() {
            "None".into()
        } else {
            format!("Some({})", rq.flexible.lo)
        };
        let _ = writeln!(o, "            ApiKey::{} => {f},", vname(rq));
    }
    o.push_str("        }\n    }\n\n    /// Lowest flexible version of the response, or None.\n    pub fn response_flexible_min(self) -> Option<i16> {\n        match self {\n");
    for (_, rq, rs) in &apis {
        let f = if rs.flexible.is_empty() {
            "None".into()
        } else {
            format!("Some({})", rs.flexible.lo)
        };
        let _ = writeln!(o, "            ApiKey::{} => {f},", vname(rq));
    }
    o.push_str("        }\n    }\n}\n\nimpl TryFrom<i16> for ApiKey {\n    type Error = crate::codec::DecodeError;\n    fn try_from(k: i16) -> Result<Self, Self::Error> {\n        match k {\n");
    for (k, rq, _) in &apis {
        let _ = writeln!(o, "            {k} => Ok(ApiKey::{}),", vname(rq));
    }
    o.push_str("            _ => Err(crate::codec::DecodeError::UnknownApiKey(k)),\n        }\n    }\n}\n\n");

    // Header versions.
    o.push_str(
        "/// Request header version for a request (`RequestHeader` v1 classic, v2 flexible).\n\
         pub fn request_header_version(api_key: ApiKey, version: i16) -> i16 {\n\
         \x20   match api_key.request_flexible_min() {\n\
         \x20       Some(f) if version >= f => 2,\n\
         \x20       _ => 1,\n\
         \x20   }\n}\n\n\
         /// Response header version (`ResponseHeader` v0 classic, v1 flexible). ApiVersions\n\
         /// responses always use v0 so a client that does not know our versions can read them.\n\
         pub fn response_header_version(api_key: ApiKey, version: i16) -> i16 {\n",
    );
    if apis.iter().any(|(k, _, _)| *k == 18) {
        o.push_str("    if api_key == ApiKey::ApiVersions {\n        return 0;\n    }\n");
    }
    o.push_str(
        "    match api_key.response_flexible_min() {\n        Some(f) if version >= f => 1,\n        _ => 0,\n    }\n}\n\n",
    );

    for (body, pick) in [("RequestBody", 0usize), ("ResponseBody", 1usize)] {
        let _ = writeln!(
            o,
            "/// Any {} body, by API.\n#[derive(Debug, Clone, PartialEq)]\npub enum {body} {{",
            if pick == 0 { "request" } else { "response" }
        );
        for (_, rq, rs) in &apis {
            let s = if pick == 0 { rq } else { rs };
            let _ = writeln!(o, "    {}({}),", vname(rq), s.name);
        }
        let _ = writeln!(
            o,
            "}}\n\nimpl {body} {{\n    pub fn api_key(&self) -> ApiKey {{\n        match self {{"
        );
        for (_, rq, _) in &apis {
            let _ = writeln!(o, "            {body}::{0}(_) => ApiKey::{0},", vname(rq));
        }
        let _ = writeln!(o, "        }}\n    }}\n\n    /// Decodes the body of `api_key` at `version`.\n    pub fn decode(api_key: ApiKey, version: i16, buf: &mut crate::codec::Bytes) -> Result<Self, crate::codec::DecodeError> {{\n        Ok(match api_key {{");
        for (_, rq, rs) in &apis {
            let s = if pick == 0 { rq } else { rs };
            let _ = writeln!(
                o,
                "            ApiKey::{} => {body}::{}(<{} as crate::codec::Decode>::decode(buf, version)?),",
                vname(rq),
                vname(rq),
                s.name
            );
        }
        let _ = writeln!(o, "        }})\n    }}\n\n    pub fn encode(&self, w: &mut crate::codec::Writer, version: i16) -> Result<(), crate::codec::EncodeError> {{\n        match self {{");
        for (_, rq, _) in &apis {
            let _ = writeln!(
                o,
                "            {body}::{}(m) => crate::codec::Encode::encode(m, w, version),",
                vname(rq)
            );
        }
        let _ = writeln!(o, "        }}\n    }}\n\n    pub fn encoded_len(&self, version: i16) -> Result<usize, crate::codec::EncodeError> {{\n        match self {{");
        for (_, rq, _) in &apis {
            let _ = writeln!(
                o,
                "            {body}::{}(m) => crate::codec::Encode::encoded_len(m, version),",
                vname(rq)
            );
        }
        o.push_str("        }\n    }\n");
        let _ = writeln!(o, "\n    /// A random body of `api_key` valid at `version` (differential tests).\n    #[cfg(feature = \"random\")]\n    pub fn random(api_key: ApiKey, rng: &mut impl crate::codec::random::Rng, version: i16) -> Self {{\n        match api_key {{");
        for (_, rq, rs) in &apis {
            let s = if pick == 0 { rq } else { rs };
            let _ = writeln!(
                o,
                "            ApiKey::{} => {body}::{}({}::random(rng, version)),",
                vname(rq),
                vname(rq),
                s.name
            );
        }
        o.push_str("        }\n    }\n}\n\n");
    }
    o
}

// ---------------------------------------------------------------------------------------------
// per-struct generation

fn vcond(v: Versions) -> String {
    if v.is_empty() {
        "false".into()
    } else if v.lo <= 0 && v.hi == i16::MAX {
        "true".into()
    } else if v.hi == i16::MAX {
        format!("version >= {}", v.lo)
    } else if v.lo <= 0 {
        format!("version <= {}", v.hi)
    } else {
        format!("({}..={}).contains(&version)", v.lo, v.hi)
    }
}

fn is_option(f: &Field) -> bool {
    !f.nullable.is_empty() || matches!(f.ty, Ty::Records)
}

fn rust_ty(t: &Ty) -> String {
    match t {
        Ty::Bool => "bool".into(),
        Ty::I8 => "i8".into(),
        Ty::I16 => "i16".into(),
        Ty::I32 => "i32".into(),
        Ty::I64 => "i64".into(),
        Ty::U16 => "u16".into(),
        Ty::U32 => "u32".into(),
        Ty::F64 => "f64".into(),
        Ty::String => "String".into(),
        Ty::Bytes => "_c::Bytes".into(),
        Ty::Records => "_c::Records".into(),
        Ty::Uuid => "_c::Uuid".into(),
        Ty::Array(inner) => format!("Vec<{}>", rust_ty(inner)),
        Ty::Struct(n) => n.clone(),
    }
}

fn field_rust_ty(f: &Field) -> String {
    if is_option(f) {
        format!("Option<{}>", rust_ty(&f.ty))
    } else {
        rust_ty(&f.ty)
    }
}

fn default_is_null(f: &Field) -> bool {
    match &f.default {
        Some(Value::Null) => true,
        Some(Value::String(s)) => s == "null",
        _ => false,
    }
}

fn parse_int_default(s: &str) -> Option<i128> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()?
    } else {
        body.parse::<i128>().ok()?
    };
    Some(if neg { -v } else { v })
}

fn inner_default(f: &Field) -> String {
    let d = f.default.as_ref();
    let as_str = d.map(|v| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    match &f.ty {
        Ty::Bool => match as_str.as_deref() {
            Some("true") => "true".into(),
            _ => "false".into(),
        },
        Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64 | Ty::U16 | Ty::U32 => {
            let n = as_str.as_deref().and_then(parse_int_default).unwrap_or(0);
            // Kafka writes hex defaults for the full unsigned width of the type (0xffff for int16).
            let n = match &f.ty {
                Ty::I8 => n as i8 as i128,
                Ty::I16 => n as i16 as i128,
                Ty::I32 => n as i32 as i128,
                Ty::I64 => n as i64 as i128,
                Ty::U16 => n as u16 as i128,
                Ty::U32 => n as u32 as i128,
                _ => n,
            };
            format!("{n}{}", rust_ty(&f.ty))
        }
        Ty::F64 => {
            let x: f64 = as_str
                .as_deref()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0.0);
            format!("{x:?}f64")
        }
        Ty::String => match as_str.as_deref() {
            Some(s) if !s.is_empty() && s != "null" => format!("String::from({s:?})"),
            _ => "String::new()".into(),
        },
        Ty::Bytes => "_c::Bytes::new()".into(),
        Ty::Records => "_c::Records::default()".into(),
        Ty::Uuid => "_c::Uuid::ZERO".into(),
        Ty::Array(_) => "Vec::new()".into(),
        Ty::Struct(n) => format!("<{n} as Default>::default()"),
    }
}

fn default_expr(f: &Field) -> String {
    if matches!(f.ty, Ty::Records) {
        return "None".into();
    }
    if is_option(f) {
        if default_is_null(f) {
            "None".into()
        } else {
            format!("Some({})", inner_default(f))
        }
    } else {
        inner_default(f)
    }
}

/// Expression: is `self.<field>` equal to its default?
fn is_default_expr(f: &Field, val: &str) -> String {
    if is_option(f) && (default_is_null(f) || matches!(f.ty, Ty::Records)) {
        return format!("{val}.is_none()");
    }
    if !is_option(f) {
        match f.ty {
            Ty::Array(_) | Ty::Bytes => return format!("{val}.is_empty()"),
            Ty::String if inner_default(f) == "String::new()" => {
                return format!("{val}.is_empty()")
            }
            _ => {}
        }
    }
    format!("{val} == {}", default_expr(f))
}

fn fixed_size(t: &Ty) -> Option<usize> {
    Some(match t {
        Ty::Bool | Ty::I8 => 1,
        Ty::I16 | Ty::U16 => 2,
        Ty::I32 | Ty::U32 => 4,
        Ty::I64 | Ty::F64 => 8,
        Ty::Uuid => 16,
        _ => return None,
    })
}

/// Statements encoding non-null value `val` (an expression of type `&T`).
fn enc_value(t: &Ty, val: &str, compact: &str, depth: usize) -> String {
    match t {
        Ty::Bool => format!("w.put_bool(*{val});"),
        Ty::I8 => format!("w.put_i8(*{val});"),
        Ty::I16 => format!("w.put_i16(*{val});"),
        Ty::I32 => format!("w.put_i32(*{val});"),
        Ty::I64 => format!("w.put_i64(*{val});"),
        Ty::U16 => format!("w.put_u16(*{val});"),
        Ty::U32 => format!("w.put_u32(*{val});"),
        Ty::F64 => format!("w.put_f64(*{val});"),
        Ty::Uuid => format!("w.put_uuid({val});"),
        Ty::String => format!("w.put_string({val}, {compact})?;"),
        Ty::Bytes => format!("w.put_bytes({val}, {compact})?;"),
        Ty::Records => format!("w.put_records_field(Some({val}), {compact})?;"),
        Ty::Struct(_) => format!("_c::Encode::encode({val}, w, version)?;"),
        Ty::Array(inner) => {
            let e = format!("e{depth}");
            format!(
                "w.put_len(Some({val}.len()), {compact})?; for {e} in {val}.iter() {{ {} }}",
                enc_value(inner, &e, compact, depth + 1)
            )
        }
    }
}

/// Expression (usize) for the encoded length of non-null `val` (type `&T`).
fn len_value(t: &Ty, val: &str, compact: &str, depth: usize) -> String {
    if let Some(n) = fixed_size(t) {
        return n.to_string();
    }
    match t {
        Ty::String => format!("_c::string_len({val}.len(), {compact})"),
        Ty::Bytes => format!("_c::bytes_len({val}.len(), {compact})"),
        Ty::Records => format!("_c::bytes_len({val}.len(), {compact})"),
        Ty::Struct(_) => format!("_c::Encode::encoded_len({val}, version)?"),
        Ty::Array(inner) => {
            if let Some(n) = fixed_size(inner) {
                format!("_c::array_len_prefix(Some({val}.len()), {compact}) + {n} * {val}.len()")
            } else {
                let e = format!("e{depth}");
                format!(
                    "{{ let mut n = _c::array_len_prefix(Some({val}.len()), {compact}); for {e} in {val}.iter() {{ n += {}; }} n }}",
                    len_value(inner, &e, compact, depth + 1)
                )
            }
        }
        _ => unreachable!("fixed-size types handled above"),
    }
}

/// Statements encoding a null of type `t`.
fn enc_null(t: &Ty, compact: &str) -> String {
    match t {
        Ty::String => format!("w.put_nullable_string(None, {compact})?;"),
        Ty::Struct(_) => "w.put_i8(-1);".into(),
        _ => format!("w.put_len(None, {compact})?;"),
    }
}

fn len_null(t: &Ty, compact: &str) -> String {
    match t {
        Ty::String => format!("_c::null_len({compact}, true)"),
        Ty::Struct(_) => "1".into(),
        _ => format!("_c::null_len({compact}, false)"),
    }
}

fn min_len(t: &Ty) -> usize {
    fixed_size(t).unwrap_or(1)
}

/// Expression decoding a non-null `T` from `buf`.
fn dec_value(t: &Ty, compact: &str, fname: &str) -> String {
    match t {
        Ty::Bool => "_c::get_bool(buf)?".into(),
        Ty::I8 => "_c::get_i8(buf)?".into(),
        Ty::I16 => "_c::get_i16(buf)?".into(),
        Ty::I32 => "_c::get_i32(buf)?".into(),
        Ty::I64 => "_c::get_i64(buf)?".into(),
        Ty::U16 => "_c::get_u16(buf)?".into(),
        Ty::U32 => "_c::get_u32(buf)?".into(),
        Ty::F64 => "_c::get_f64(buf)?".into(),
        Ty::Uuid => "_c::get_uuid(buf)?".into(),
        Ty::String => format!("_c::get_string(buf, {compact}, {fname:?})?"),
        Ty::Bytes => format!("_c::get_bytes(buf, {compact}, {fname:?})?"),
        Ty::Records => format!(
            "_c::get_records(buf, {compact})?.ok_or(_c::DecodeError::UnexpectedNull {{ field: {fname:?} }})?"
        ),
        Ty::Struct(n) => format!("<{n} as _c::Decode>::decode(buf, version)?"),
        Ty::Array(inner) => format!(
            "{{ let n = _c::get_array_len(buf, {compact}, {})?.ok_or(_c::DecodeError::UnexpectedNull {{ field: {fname:?} }})?; let mut v = Vec::with_capacity(_c::prealloc::<{}>(n, buf.len())); for _ in 0..n {{ v.push({}); }} v }}",
            min_len(inner),
            rust_ty(inner),
            dec_value(inner, compact, fname)
        ),
    }
}

/// Expression decoding an `Option<T>` in a version where the field is nullable.
fn dec_nullable(t: &Ty, compact: &str, fname: &str) -> String {
    match t {
        Ty::String => format!("_c::get_nullable_string(buf, {compact})?"),
        Ty::Bytes => format!("_c::get_nullable_bytes(buf, {compact})?"),
        Ty::Records => format!("_c::get_records(buf, {compact})?"),
        Ty::Struct(n) => format!(
            "if _c::get_i8(buf)? < 0 {{ None }} else {{ Some(<{n} as _c::Decode>::decode(buf, version)?) }}"
        ),
        Ty::Array(inner) => format!(
            "match _c::get_array_len(buf, {compact}, {})? {{ None => None, Some(n) => {{ let mut v = Vec::with_capacity(_c::prealloc::<{}>(n, buf.len())); for _ in 0..n {{ v.push({}); }} Some(v) }} }}",
            min_len(inner),
            rust_ty(inner),
            dec_value(inner, compact, fname)
        ),
        // Fixed-width types have no null encoding; Kafka never declares them nullable.
        other => format!("Some({})", dec_value(other, compact, fname)),
    }
}

fn rand_value(t: &Ty) -> String {
    match t {
        Ty::Bool => "rng.gen::<bool>()".into(),
        Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64 | Ty::U16 | Ty::U32 => {
            format!("rng.gen::<{}>()", rust_ty(t))
        }
        Ty::F64 => "rng.gen::<f64>()".into(),
        Ty::Uuid => "_c::Uuid(rng.gen())".into(),
        Ty::String => "_c::random::string(rng)".into(),
        Ty::Bytes => "_c::random::bytes(rng)".into(),
        Ty::Records => "_c::Records::Memory(_c::random::bytes(rng))".into(),
        Ty::Struct(n) => format!("{n}::random(rng, version)"),
        Ty::Array(inner) => format!(
            "(0..rng.gen_range(0..3usize)).map(|_| {}).collect::<Vec<_>>()",
            rand_value(inner)
        ),
    }
}

fn doc(out: &mut String, indent: &str, text: &str) {
    if !text.is_empty() {
        let _ = writeln!(out, "{indent}#[doc = {text:?}]");
    }
}

fn gen_struct(out: &mut String, schema: &Schema, s: &StructDef, flexible: Versions, is_top: bool) {
    let name = &s.name;
    let has_tags = !flexible.is_empty();
    let top_check = |what: &str| -> String {
        if is_top {
            format!(
                "if !({}) {{ return Err(_c::{what}::UnsupportedVersion {{ message: {name:?}, version }}); }}\n",
                vcond(schema.valid)
            )
        } else {
            String::new()
        }
    };
    // --- struct
    doc(out, "", &s.about);
    let _ = writeln!(
        out,
        "#[derive(Debug, Clone, PartialEq)]\n#[allow(clippy::derive_partial_eq_without_eq)]\npub struct {name} {{"
    );
    for f in &s.fields {
        let mut about = f.about.clone();
        let _ = write!(about, " (versions {})", f.versions);
        doc(out, "    ", about.trim());
        let _ = writeln!(out, "    pub {}: {},", f.ident, field_rust_ty(f));
    }
    if has_tags {
        let _ = writeln!(
            out,
            "    /// Tagged fields this build does not know, in ascending tag order.\n    pub unknown_tagged_fields: Vec<_c::RawTaggedField>,"
        );
    }
    out.push_str("}\n\n");

    // --- Default
    let _ = writeln!(
        out,
        "impl Default for {name} {{\n    fn default() -> Self {{\n        {name} {{"
    );
    for f in &s.fields {
        let _ = writeln!(out, "            {}: {},", f.ident, default_expr(f));
    }
    if has_tags {
        out.push_str("            unknown_tagged_fields: Vec::new(),\n");
    }
    out.push_str("        }\n    }\n}\n\n");

    let compact_of = |f: &Field| vcond(f.flexible_override.unwrap_or(flexible));
    let mut tagged: Vec<&Field> = s.fields.iter().filter(|f| f.tag.is_some()).collect();
    tagged.sort_by_key(|f| f.tag);

    // --- Encode
    let mut enc = String::new();
    let mut len = String::new();
    enc.push_str(&top_check("EncodeError"));
    len.push_str(&top_check("EncodeError"));
    for f in &s.fields {
        let val = format!("self.{}", f.ident);
        let regular = f.versions.minus(f.tagged);
        let present = f.versions.union_hull(f.tagged);
        let compact = compact_of(f);
        let not_present_check = if f.ignorable {
            String::new()
        } else {
            format!(
                "if !({}) && !({}) {{ return Err(_c::EncodeError::FieldNotInVersion {{ message: {name:?}, field: {:?}, version }}); }}\n",
                vcond(present),
                is_default_expr(f, &val),
                f.name
            )
        };
        enc.push_str(&not_present_check);
        len.push_str(&not_present_check);
        if regular.is_empty() {
            continue;
        }
        let (e, l) = enc_len_field(f, &val, "compact", name);
        let _ = writeln!(
            enc,
            "if {} {{ let compact = {compact}; let _ = compact; {e} }}",
            vcond(regular)
        );
        let _ = writeln!(
            len,
            "if {} {{ let compact = {compact}; let _ = compact; n += {l}; }}",
            vcond(regular)
        );
    }
    if has_tags {
        let _ = writeln!(enc, "if {} {{", vcond(flexible));
        let _ = writeln!(len, "if {} {{", vcond(flexible));
        enc.push_str("let mut count = self.unknown_tagged_fields.len();\n");
        len.push_str("let mut count = self.unknown_tagged_fields.len();\n");
        for f in &tagged {
            let val = format!("self.{}", f.ident);
            let c = format!(
                "if {} && !({}) {{ count += 1; }}\n",
                vcond(f.tagged),
                is_default_expr(f, &val)
            );
            enc.push_str(&c);
            len.push_str(&c);
        }
        enc.push_str("w.put_uvarint(count as u32);\nlet mut unknown = self.unknown_tagged_fields.iter().peekable();\n");
        len.push_str("n += _c::uvarint_len(count as u32);\nfor f in self.unknown_tagged_fields.iter() { n += _c::raw_tagged_field_len(f); }\n");
        for f in &tagged {
            let tag = f.tag.unwrap_or(0);
            let val = format!("self.{}", f.ident);
            let compact = compact_of(f);
            let (e, l) = enc_len_field(f, &val, "compact", name);
            let _ = writeln!(
                enc,
                "while let Some(u) = unknown.next_if(|u| u.tag < {tag}) {{ _c::put_raw_tagged_field(w, u); }}\nif {} && !({}) {{ let compact = {compact}; let _ = compact; let size: usize = {l}; w.put_uvarint({tag}); w.put_uvarint(size as u32); {e} }}",
                vcond(f.tagged),
                is_default_expr(f, &val)
            );
            let _ = writeln!(
                len,
                "if {} && !({}) {{ let compact = {compact}; let _ = compact; let size: usize = {l}; n += _c::tagged_field_len({tag}, size); }}",
                vcond(f.tagged),
                is_default_expr(f, &val)
            );
        }
        enc.push_str("for u in unknown { _c::put_raw_tagged_field(w, u); }\n}\n");
        len.push_str("}\n");
    }
    let _ = writeln!(
        out,
        "impl _c::Encode for {name} {{\n#[allow(unused_variables, unused_mut, clippy::all)]\nfn encode(&self, w: &mut _c::Writer, version: i16) -> Result<(), _c::EncodeError> {{\n{enc}Ok(())\n}}\n#[allow(unused_variables, unused_mut, clippy::all)]\nfn encoded_len(&self, version: i16) -> Result<usize, _c::EncodeError> {{\nlet mut n = 0usize;\n{len}Ok(n)\n}}\n}}\n"
    );

    // --- Decode
    let mut dec = String::new();
    dec.push_str(&top_check("DecodeError"));
    for f in &s.fields {
        let _ = writeln!(dec, "let mut f_{} = {};", f.ident, default_expr(f));
    }
    if has_tags {
        dec.push_str("let mut unknown_tagged_fields = Vec::new();\n");
    }
    for f in &s.fields {
        let regular = f.versions.minus(f.tagged);
        if regular.is_empty() {
            continue;
        }
        let compact = compact_of(f);
        let _ = writeln!(
            dec,
            "if {} {{ let compact = {compact}; let _ = compact; f_{} = {}; }}",
            vcond(regular),
            f.ident,
            dec_field(f, "compact")
        );
    }
    if has_tags {
        let _ = writeln!(
            dec,
            "if {} {{\nlet count = _c::get_tagged_count(buf)?;\nfor _ in 0..count {{\nlet (tag, mut data) = _c::get_tagged_field(buf)?;\nmatch tag {{",
            vcond(flexible)
        );
        for f in &tagged {
            let compact = compact_of(f);
            let _ = writeln!(
                dec,
                "{} if {} => {{ let buf = &mut data; let compact = {compact}; let _ = compact; f_{} = {}; }}",
                f.tag.unwrap_or(0),
                vcond(f.tagged),
                f.ident,
                dec_field(f, "compact")
            );
        }
        dec.push_str(
            "_ => unknown_tagged_fields.push(_c::RawTaggedField { tag, data }),\n}\n}\n}\n",
        );
    }
    let mut build = format!("Ok({name} {{");
    for f in &s.fields {
        let _ = write!(build, " {}: f_{},", f.ident, f.ident);
    }
    if has_tags {
        build.push_str(" unknown_tagged_fields,");
    }
    build.push_str(" })");
    let _ = writeln!(
        out,
        "impl _c::Decode for {name} {{\n#[allow(unused_variables, unused_mut, clippy::all)]\nfn decode(buf: &mut _c::Bytes, version: i16) -> Result<Self, _c::DecodeError> {{\n{dec}{build}\n}}\n}}\n"
    );

    // --- random
    let mut r = String::new();
    for f in &s.fields {
        let present = f.versions.union_hull(f.tagged);
        let v = if is_option(f) {
            format!(
                "if {} && rng.gen_ratio(1, 4) {{ None }} else {{ Some({}) }}",
                vcond(f.nullable),
                rand_value(&f.ty)
            )
        } else {
            rand_value(&f.ty)
        };
        let _ = writeln!(r, "if {} {{ x.{} = {v}; }}", vcond(present), f.ident);
    }
    if has_tags {
        let max_tag = tagged
            .iter()
            .filter_map(|f| f.tag)
            .max()
            .map(|t| t + 1)
            .unwrap_or(0);
        let _ = writeln!(
            r,
            "if {} && _c::random::unknown_tags() && rng.gen_ratio(1, 4) {{ let mut tag = {max_tag}u32; for _ in 0..rng.gen_range(1..3) {{ tag += rng.gen_range(0..3u32); x.unknown_tagged_fields.push(_c::RawTaggedField {{ tag, data: _c::random::bytes(rng) }}); tag += 1; }} }}",
            vcond(flexible)
        );
    }
    let _ = writeln!(
        out,
        "#[cfg(feature = \"random\")]\nimpl {name} {{\n/// A random value using only what `version` can carry (differential tests).\n#[allow(unused_variables, unused_mut, unused_imports, clippy::all)]\npub fn random(rng: &mut impl _c::random::Rng, version: i16) -> Self {{\nuse _c::random::Rng as _;\nlet mut x = Self::default();\n{r}x\n}}\n}}\n"
    );
}

/// (encode statements, length expression) for a field's value in a version where it is present.
fn enc_len_field(f: &Field, val: &str, compact: &str, sname: &str) -> (String, String) {
    let t = &f.ty;
    if is_option(f) {
        let ncond = vcond(f.nullable);
        let null_err = format!(
            "return Err(_c::EncodeError::NullNotAllowed {{ message: {sname:?}, field: {:?}, version }});",
            f.name
        );
        let some_enc = match t {
            Ty::Struct(_) => format!(
                "if {ncond} {{ w.put_i8(1); }} {}",
                enc_value(t, "v", "compact", 0)
            ),
            _ => enc_value(t, "v", "compact", 0),
        };
        let some_len = match t {
            Ty::Struct(_) => format!(
                "(if {ncond} {{ 1 }} else {{ 0 }}) + {}",
                len_value(t, "v", "compact", 0)
            ),
            _ => len_value(t, "v", "compact", 0),
        };
        let e = format!(
            "match &{val} {{ None => {{ if !({ncond}) {{ {null_err} }} {} }} Some(v) => {{ {some_enc} }} }}",
            enc_null(t, compact)
        );
        let l = format!(
            "match &{val} {{ None => {{ if !({ncond}) {{ {null_err} }} {} }} Some(v) => {{ {some_len} }} }}",
            len_null(t, compact)
        );
        (e, l)
    } else {
        let r = format!("(&{val})");
        (enc_value(t, &r, compact, 0), len_value(t, &r, compact, 0))
    }
}

fn dec_field(f: &Field, compact: &str) -> String {
    if is_option(f) {
        format!(
            "if {} {{ {} }} else {{ Some({}) }}",
            vcond(f.nullable),
            dec_nullable(&f.ty, compact, &f.name),
            dec_value(&f.ty, compact, &f.name)
        )
    } else {
        dec_value(&f.ty, compact, &f.name)
    }
}

/// The three schema directories under a schema root, and the module each becomes.
pub const SCHEMA_DIRS: &[&str] = &["messages", "metadata", "coordinator"];

/// Generates `<dir>.rs` in `out_dir` for each of [`SCHEMA_DIRS`] under `root`; `messages.rs`
/// also gets the API glue. Returns the schema files read (for `rerun-if-changed`).
pub fn generate_all(root: &Path, out_dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut inputs = Vec::new();
    for d in SCHEMA_DIRS {
        let dir = root.join(d);
        inputs.push(dir.clone());
        inputs.extend(schema_files(&dir));
        let o = generate_dir(&dir)?;
        let mut code = o.code;
        if *d == "messages" {
            code.push_str(&generate_api_glue(&o.schemas));
        }
        std::fs::write(out_dir.join(format!("{d}.rs")), code)
            .map_err(|e| format!("writing {d}.rs: {e}"))?;
    }
    Ok(inputs)
}
