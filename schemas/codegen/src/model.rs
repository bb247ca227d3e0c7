//! The schema model (Kafka's `MessageSpec`, `FieldSpec`, `StructSpec`, `Versions`) parsed from
//! the JSON files.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

/// An inclusive version range; empty when `lo > hi`. `hi == i16::MAX` means "and later".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    pub lo: i16,
    pub hi: i16,
}

impl Versions {
    pub const NONE: Versions = Versions { lo: 1, hi: 0 };
    pub const ALL: Versions = Versions {
        lo: 0,
        hi: i16::MAX,
    };

    pub fn parse(s: &str) -> Result<Versions, String> {
        let s = s.trim();
        if s == "none" || s.is_empty() {
            return Ok(Versions::NONE);
        }
        let num = |x: &str| {
            x.trim()
                .parse::<i16>()
                .map_err(|_| format!("bad version range {s:?}"))
        };
        if let Some(lo) = s.strip_suffix('+') {
            return Ok(Versions {
                lo: num(lo)?,
                hi: i16::MAX,
            });
        }
        if let Some((a, b)) = s.split_once('-') {
            return Ok(Versions {
                lo: num(a)?,
                hi: num(b)?,
            });
        }
        let v = num(s)?;
        Ok(Versions { lo: v, hi: v })
    }

    pub fn is_empty(&self) -> bool {
        self.lo > self.hi
    }

    pub fn contains(&self, v: i16) -> bool {
        v >= self.lo && v <= self.hi
    }

    pub fn intersect(&self, o: Versions) -> Versions {
        Versions {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        }
    }

    /// `self` without `o`, assuming `o` is a prefix or suffix of `self` (as tagged versions are).
    pub fn minus(&self, o: Versions) -> Versions {
        if o.is_empty() || self.intersect(o).is_empty() {
            return *self;
        }
        if o.lo <= self.lo {
            if o.hi >= self.hi {
                Versions::NONE
            } else {
                Versions {
                    lo: o.hi + 1,
                    hi: self.hi,
                }
            }
        } else {
            Versions {
                lo: self.lo,
                hi: o.lo - 1,
            }
        }
    }

    /// Smallest range covering both.
    pub fn union_hull(&self, o: Versions) -> Versions {
        if o.is_empty() {
            return *self;
        }
        if self.is_empty() {
            return o;
        }
        Versions {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            write!(f, "none")
        } else if self.hi == i16::MAX {
            write!(f, "{}+", self.lo)
        } else if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U16,
    U32,
    F64,
    String,
    Bytes,
    Records,
    Uuid,
    Array(Box<Ty>),
    Struct(String),
}

impl Ty {
    pub fn parse(s: &str) -> Result<Ty, String> {
        if let Some(inner) = s.strip_prefix("[]") {
            return Ok(Ty::Array(Box::new(Ty::parse(inner)?)));
        }
        Ok(match s {
            "bool" => Ty::Bool,
            "int8" => Ty::I8,
            "int16" => Ty::I16,
            "int32" => Ty::I32,
            "int64" => Ty::I64,
            "uint16" => Ty::U16,
            "uint32" => Ty::U32,
            "float64" => Ty::F64,
            "string" => Ty::String,
            "bytes" => Ty::Bytes,
            "records" => Ty::Records,
            "uuid" => Ty::Uuid,
            other => {
                if other.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    && other.chars().all(|c| c.is_ascii_alphanumeric())
                {
                    Ty::Struct(other.to_string())
                } else {
                    return Err(format!("unknown type {other:?}"));
                }
            }
        })
    }

    /// The struct this type names, directly or as array elements.
    pub fn struct_name(&self) -> Option<&str> {
        match self {
            Ty::Struct(n) => Some(n),
            Ty::Array(t) => t.struct_name(),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub ident: String,
    pub ty: Ty,
    pub versions: Versions,
    pub nullable: Versions,
    pub tagged: Versions,
    pub tag: Option<u32>,
    pub default: Option<Value>,
    pub ignorable: bool,
    pub map_key: bool,
    pub flexible_override: Option<Versions>,
    pub about: String,
}

#[derive(Debug, Clone)]
pub struct StructDef {
    pub name: String,
    pub versions: Versions,
    pub fields: Vec<Field>,
    pub about: String,
}

#[derive(Debug, Clone)]
pub struct Schema {
    pub name: String,
    /// `request`, `response`, `header`, `metadata`, `data`, `coordinator-key`, ...
    pub kind: String,
    pub api_key: Option<i16>,
    pub valid: Versions,
    pub flexible: Versions,
    pub listeners: Vec<String>,
    pub latest_version_unstable: bool,
    pub top: StructDef,
    /// Inline structs (in definition order) and common structs.
    pub structs: Vec<StructDef>,
}

impl Schema {
    /// The top-level struct first, then nested and common structs.
    pub fn all_structs(&self) -> impl Iterator<Item = &StructDef> {
        std::iter::once(&self.top).chain(self.structs.iter())
    }
}

fn str_attr<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(|x| x.as_str())
}

fn versions_attr(v: &Value, k: &str) -> Result<Option<Versions>, String> {
    match v.get(k) {
        None => Ok(None),
        Some(Value::String(s)) => Versions::parse(s).map(Some),
        Some(other) => Err(format!("{k} must be a string, got {other}")),
    }
}

fn bool_attr(v: &Value, k: &str) -> bool {
    match v.get(k) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}

fn parse_fields(
    arr: Option<&Value>,
    out_structs: &mut Vec<StructDef>,
    seen: &mut BTreeSet<String>,
) -> Result<Vec<Field>, String> {
    let mut fields = Vec::new();
    let Some(arr) = arr else {
        return Ok(fields);
    };
    let arr = arr.as_array().ok_or("fields must be an array")?;
    for fv in arr {
        let name = str_attr(fv, "name")
            .ok_or("field without name")?
            .to_string();
        let ty = Ty::parse(str_attr(fv, "type").ok_or_else(|| format!("{name}: no type"))?)
            .map_err(|e| format!("{name}: {e}"))?;
        let tagged = versions_attr(fv, "taggedVersions")?.unwrap_or(Versions::NONE);
        // A tagged field may omit `versions`: it then exists exactly in its tagged versions.
        let versions = match versions_attr(fv, "versions")? {
            Some(v) => v,
            None if !tagged.is_empty() => tagged,
            None => return Err(format!("{name}: no versions")),
        };
        let nullable = versions_attr(fv, "nullableVersions")?.unwrap_or(Versions::NONE);
        let tag = match fv.get("tag") {
            None => None,
            Some(Value::Number(n)) => Some(n.as_u64().ok_or("bad tag")? as u32),
            Some(Value::String(s)) => Some(s.parse().map_err(|_| format!("{name}: bad tag"))?),
            Some(_) => return Err(format!("{name}: bad tag")),
        };
        if tag.is_some() == tagged.is_empty() {
            return Err(format!("{name}: tag and taggedVersions must come together"));
        }
        if let Some(children) = fv.get("fields") {
            let sname = ty
                .struct_name()
                .ok_or_else(|| format!("{name}: has fields but is not a struct type"))?
                .to_string();
            let sub = parse_fields(Some(children), out_structs, seen)?;
            if seen.insert(sname.clone()) {
                out_structs.push(StructDef {
                    name: sname,
                    versions,
                    fields: sub,
                    about: str_attr(fv, "about").unwrap_or_default().to_string(),
                });
            }
        }
        fields.push(Field {
            ident: crate::field_ident(&name),
            name,
            ty,
            versions,
            nullable,
            tagged,
            tag,
            default: fv.get("default").cloned(),
            ignorable: bool_attr(fv, "ignorable"),
            map_key: bool_attr(fv, "mapKey"),
            flexible_override: versions_attr(fv, "flexibleVersions")?,
            about: str_attr(fv, "about").unwrap_or_default().to_string(),
        });
    }
    Ok(fields)
}

pub fn parse_schema(v: &Value) -> Result<Schema, String> {
    let name = str_attr(v, "name")
        .ok_or("schema without name")?
        .to_string();
    let kind = str_attr(v, "type").unwrap_or("data").to_string();
    let api_key = match v.get("apiKey") {
        None => None,
        Some(k) => Some(k.as_i64().ok_or("apiKey must be a number")? as i16),
    };
    let valid = versions_attr(v, "validVersions")?.ok_or("no validVersions")?;
    let flexible = versions_attr(v, "flexibleVersions")?.unwrap_or(Versions::NONE);
    let listeners = v
        .get("listeners")
        .and_then(|l| l.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut structs = Vec::new();
    let mut seen = BTreeSet::new();
    seen.insert(name.clone());
    let fields = parse_fields(v.get("fields"), &mut structs, &mut seen)?;
    if let Some(common) = v.get("commonStructs").and_then(|c| c.as_array()) {
        for c in common {
            let cname = str_attr(c, "name")
                .ok_or("common struct without name")?
                .to_string();
            let cv = versions_attr(c, "versions")?.unwrap_or(valid);
            let cf = parse_fields(c.get("fields"), &mut structs, &mut seen)?;
            if seen.insert(cname.clone()) {
                structs.push(StructDef {
                    name: cname,
                    versions: cv,
                    fields: cf,
                    about: str_attr(c, "about").unwrap_or_default().to_string(),
                });
            }
        }
    }
    // Every struct a field names must be defined here.
    let defined: BTreeSet<&str> = structs.iter().map(|s| s.name.as_str()).collect();
    for s in std::iter::once(&fields).chain(structs.iter().map(|s| &s.fields)) {
        for f in s {
            if let Some(n) = f.ty.struct_name() {
                if !defined.contains(n) {
                    return Err(format!("{}: struct {n} is not defined", f.name));
                }
            }
        }
    }
    Ok(Schema {
        top: StructDef {
            name: name.clone(),
            versions: valid,
            fields,
            about: String::new(),
        },
        name,
        kind,
        api_key,
        valid,
        flexible,
        listeners,
        latest_version_unstable: bool_attr(v, "latestVersionUnstable"),
        structs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ranges() {
        assert_eq!(
            Versions::parse("3+").unwrap(),
            Versions {
                lo: 3,
                hi: i16::MAX
            }
        );
        assert_eq!(Versions::parse("0-12").unwrap(), Versions { lo: 0, hi: 12 });
        assert_eq!(Versions::parse("5").unwrap(), Versions { lo: 5, hi: 5 });
        assert!(Versions::parse("none").unwrap().is_empty());
        let all = Versions::parse("0+").unwrap();
        assert_eq!(
            all.minus(Versions::parse("3+").unwrap()),
            Versions { lo: 0, hi: 2 }
        );
    }

    #[test]
    fn snake_names() {
        assert_eq!(
            crate::snake_case("KRaftVersionRecord"),
            "k_raft_version_record"
        );
        assert_eq!(
            crate::snake_case("ApiVersionsResponse"),
            "api_versions_response"
        );
        assert_eq!(crate::field_ident("Type"), "type_");
        assert_eq!(crate::field_ident("TopicId"), "topic_id");
    }
}
