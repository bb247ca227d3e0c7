//! Generates `kactor_protocol::errors` from `schemas/errors/errors.tsv`, our copy of Kafka's
//! error table (`org.apache.kafka.common.protocol.Errors`): one `ErrorCode` enum with the
//! code, Kafka's name, retriability and default message of every error, and one `i16` constant
//! per error for the response fields that carry raw codes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// One row of the error table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorRow {
    pub code: i16,
    /// Kafka's enum constant name (`NOT_COORDINATOR`).
    pub name: String,
    /// The error's exception extends `RetriableException`.
    pub retriable: bool,
    /// The exception class Kafka raises, None for NONE.
    pub exception: Option<String>,
    /// The exception's default message; empty for NONE.
    pub message: String,
}

/// Parses the tab-separated table: `#` comment lines, one header line starting with `code`,
/// then `code name retriable exception message` rows. Rejects malformed rows and duplicate
/// codes or names, so a bad edit fails the build instead of generating a wrong table.
pub fn parse_error_table(src: &str) -> Result<Vec<ErrorRow>, String> {
    let mut rows = Vec::new();
    let mut codes = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (i, line) in src.lines().enumerate() {
        let at = |what: &str| format!("errors table line {}: {what}", i + 1);
        if line.is_empty() || line.starts_with('#') || line.starts_with("code\t") {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let [code, name, retriable, exception, message] = cols[..] else {
            return Err(at(&format!("{} columns, expected 5", cols.len())));
        };
        let code: i16 = code
            .parse()
            .map_err(|_| at(&format!("bad code {code:?}")))?;
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(at(&format!("bad name {name:?}")));
        }
        let retriable = match retriable {
            "yes" => true,
            "no" => false,
            other => return Err(at(&format!("retriable must be yes or no, not {other:?}"))),
        };
        let exception = match exception {
            "-" => None,
            e => Some(e.to_string()),
        };
        if exception.is_none() != message.is_empty() {
            return Err(at(
                "an error has both an exception and a message, NONE neither",
            ));
        }
        if !codes.insert(code) {
            return Err(at(&format!("duplicate code {code}")));
        }
        if !names.insert(variant_name(name)) {
            return Err(at(&format!("duplicate name {name}")));
        }
        rows.push(ErrorRow {
            code,
            name: name.to_string(),
            retriable,
            exception,
            message: message.to_string(),
        });
    }
    if rows.is_empty() {
        return Err("errors table has no rows".into());
    }
    Ok(rows)
}

/// `NOT_COORDINATOR` -> `NotCoordinator`.
pub fn variant_name(kafka_name: &str) -> String {
    kafka_name
        .split('_')
        .map(|w| {
            let lower = w.to_ascii_lowercase();
            let mut c = lower.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The module body of `kactor_protocol::errors`.
pub fn generate_errors(rows: &[ErrorRow]) -> String {
    let mut o = String::new();
    o.push_str(
        "/// A Kafka error code (Kafka's `Errors`), generated from `schemas/errors/errors.tsv`.\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n\
         #[repr(i16)]\n\
         pub enum ErrorCode {\n",
    );
    for r in rows {
        let doc = if r.message.is_empty() {
            "No error.".to_string()
        } else {
            r.message.clone()
        };
        let _ = writeln!(
            o,
            "    /// `{}`: {}\n    {} = {},",
            r.name,
            doc.replace('\n', " "),
            variant_name(&r.name),
            r.code
        );
    }
    o.push_str("}\n\nimpl ErrorCode {\n    /// Every error, in table order.\n    pub const ALL: &'static [ErrorCode] = &[\n");
    for r in rows {
        let _ = writeln!(o, "        ErrorCode::{},", variant_name(&r.name));
    }
    o.push_str(
        "    ];\n\n    /// The code on the wire.\n    pub const fn code(self) -> i16 {\n        self as i16\n    }\n\n\
         /// The error with this code, None for a code Kafka does not define.\n    \
         pub const fn from_code(code: i16) -> Option<ErrorCode> {\n        match code {\n",
    );
    for r in rows {
        let _ = writeln!(
            o,
            "            {} => Some(ErrorCode::{}),",
            r.code,
            variant_name(&r.name)
        );
    }
    o.push_str(
        "            _ => None,\n        }\n    }\n\n\
         /// Kafka's name of the error (`NOT_COORDINATOR`).\n    \
         pub const fn name(self) -> &'static str {\n        match self {\n",
    );
    for r in rows {
        let _ = writeln!(
            o,
            "            ErrorCode::{} => {:?},",
            variant_name(&r.name),
            r.name
        );
    }
    o.push_str(
        "        }\n    }\n\n\
         /// Whether Kafka's exception for the error is a `RetriableException`.\n    \
         pub const fn is_retriable(self) -> bool {\n        matches!(\n            self,\n",
    );
    let retriable: Vec<String> = rows
        .iter()
        .filter(|r| r.retriable)
        .map(|r| format!("ErrorCode::{}", variant_name(&r.name)))
        .collect();
    if retriable.is_empty() {
        o.push_str("            ErrorCode::None if false\n");
    } else {
        let _ = writeln!(o, "            {}", retriable.join("\n                | "));
    }
    o.push_str(
        "        )\n    }\n\n\
         /// Kafka's `Errors.message()`: the exception's default message, or the name for an\n    \
         /// error without exception (NONE).\n    \
         pub const fn default_message(self) -> &'static str {\n        match self {\n",
    );
    for r in rows {
        let m = if r.message.is_empty() {
            &r.name
        } else {
            &r.message
        };
        let _ = writeln!(
            o,
            "            ErrorCode::{} => {:?},",
            variant_name(&r.name),
            m
        );
    }
    o.push_str("        }\n    }\n}\n\n");
    o.push_str("// The codes as plain i16s, for the response fields that carry them raw.\n");
    for r in rows {
        let _ = writeln!(
            o,
            "/// [`ErrorCode::{v}`].\npub const {}: i16 = ErrorCode::{v}.code();",
            r.name,
            v = variant_name(&r.name)
        );
    }
    o
}

/// Reads the table at `tsv` and writes `errors.rs` into `out_dir`.
pub fn generate_errors_file(tsv: &Path, out_dir: &Path) -> Result<(), String> {
    let src =
        std::fs::read_to_string(tsv).map_err(|e| format!("reading {}: {e}", tsv.display()))?;
    let rows = parse_error_table(&src)?;
    std::fs::write(out_dir.join("errors.rs"), generate_errors(&rows))
        .map_err(|e| format!("writing errors.rs: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_and_names_variants() {
        let rows = parse_error_table(
            "# c\ncode\tname\tretriable\texception\tmessage\n\
             0\tNONE\tno\t-\t\n16\tNOT_COORDINATOR\tyes\tNotCoordinatorException\tThis is not the correct coordinator.\n",
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].code, 16);
        assert!(rows[1].retriable && !rows[0].retriable);
        assert_eq!(rows[0].exception, None);
        assert_eq!(variant_name(&rows[1].name), "NotCoordinator");
        let code = generate_errors(&rows);
        assert!(code.contains("NotCoordinator = 16,"));
        assert!(code.contains("pub const NOT_COORDINATOR: i16 = ErrorCode::NotCoordinator.code();"));
    }

    #[test]
    fn rejects_bad_tables() {
        let ok = "1\tA\tno\tAException\tm\n";
        for bad in [
            "1\tA\tno\tAException\n",                  // missing column
            "x\tA\tno\tAException\tm\n",               // code not a number
            "1\ta\tno\tAException\tm\n",               // name not Kafka's upper snake case
            "1\tA\tmaybe\tAException\tm\n",            // retriable not yes/no
            "1\tA\tno\t-\tm\n",                        // message without exception
            &format!("{ok}1\tB\tno\tBException\tm\n"), // duplicate code
            &format!("{ok}2\tA\tno\tAException\tm\n"), // duplicate name
            "# only comments\n",
        ] {
            assert!(parse_error_table(bad).is_err(), "{bad:?}");
        }
        assert!(parse_error_table(ok).is_ok());
    }
}
