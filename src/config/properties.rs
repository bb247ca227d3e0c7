//! A `java.util.Properties` text reader (Kafka reads `server.properties` with it): `key=value`,
//! `key: value` or `key value`, `#`/`!` comments, `\` line continuation and the usual escapes.
//! Keys stay flat strings; nothing here interprets dots.

use std::collections::BTreeMap;

/// Parses properties text; a later duplicate key wins, as in Java.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(first) = lines.next() {
        let mut logical = first.trim_start().to_string();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        // An odd number of trailing backslashes continues the line.
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some(next) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        out.insert(unescape(&key), unescape(value.trim_start()));
    }
    out
}

fn ends_with_continuation(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

fn split_key_value(line: &str) -> (String, &str) {
    let mut key = String::new();
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                key.push('\\');
                if let Some((_, n)) = chars.next() {
                    key.push(n);
                }
            }
            '=' | ':' => return (key, &line[i + 1..]),
            c if c.is_whitespace() => {
                // Whitespace ends the key; one following '=' or ':' is still a separator.
                let rest = line[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                return (key, rest);
            }
            c => key.push(c),
        }
    }
    (key, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_comments_and_continuations() {
        let p = parse(
            "# comment\n! also comment\nlog.dirs=/a,/b\nnode.id: 3\nlisteners PLAINTEXT://x:1\n\
             long.value=a,\\\n    b\nescaped\\=key=v\\tx\nempty=\n  spaced.key = spaced value  \n",
        );
        assert_eq!(p["log.dirs"], "/a,/b");
        assert_eq!(p["node.id"], "3");
        assert_eq!(p["listeners"], "PLAINTEXT://x:1");
        assert_eq!(p["long.value"], "a,b");
        assert_eq!(p["escaped=key"], "v\tx");
        assert_eq!(p["empty"], "");
        assert_eq!(p["spaced.key"], "spaced value  ");
    }

    #[test]
    fn dotted_prefixes_stay_separate_keys() {
        let p = parse("log.dir=/x\nlog.dir.failure.timeout.ms=30000\n");
        assert_eq!(p["log.dir"], "/x");
        assert_eq!(p["log.dir.failure.timeout.ms"], "30000");
    }
}
