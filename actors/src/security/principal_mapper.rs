//! `ssl.principal.mapping.rules` (Kafka's `SslPrincipalMapper`): a list of `DEFAULT` and
//! `RULE:pattern/replacement/[L|U]` entries tried in order on a certificate's RFC 2253 subject;
//! the first rule whose pattern matches the whole subject names the principal.

use regex::Regex;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<Case>,
    },
}

#[derive(Debug, Clone, Copy)]
enum Case {
    Lower,
    Upper,
}

#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

impl SslPrincipalMapper {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after)
                    .ok_or_else(|| format!("Invalid rule: `{rest}`: no `/` after the pattern"))?;
                let (replacement, after) = until_slash(after).ok_or_else(|| {
                    format!("Invalid rule: `{rest}`: no `/` after the replacement")
                })?;
                let (case, after) = match after.chars().next() {
                    Some('L') => (Some(Case::Lower), &after[1..]),
                    Some('U') => (Some(Case::Upper), &after[1..]),
                    _ => (None, after),
                };
                // The pattern must match the whole subject, as Java's `Matcher.matches`.
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("Invalid rule pattern {pattern:?}: {e}"))?;
                rules.push(Rule::Replace {
                    pattern,
                    replacement: java_replacement(&replacement),
                    case,
                });
                rest = after;
            } else {
                return Err(format!("Invalid rule: `{rest}`"));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(format!("Invalid rule: unmatched substring `{rest}`")),
            }
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(SslPrincipalMapper { rules })
    }

    /// The principal name for a subject; `None` = no rule applies (Kafka fails the
    /// connection's authentication then).
    pub fn name(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|r| match r {
            Rule::Default => Some(subject.to_string()),
            Rule::Replace {
                pattern,
                replacement,
                case,
            } => {
                if !pattern.is_match(subject) {
                    return None;
                }
                let out = pattern
                    .replace_all(subject, replacement.as_str())
                    .into_owned();
                Some(match case {
                    Some(Case::Lower) => out.to_lowercase(),
                    Some(Case::Upper) => out.to_uppercase(),
                    None => out,
                })
            }
        })
    }
}

/// Splits at the first `/` not escaped by `\`, dropping the escape (Kafka's rule syntax).
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, next)) = chars.next() {
                    if next != '/' {
                        out.push('\\');
                    }
                    out.push(next);
                }
            }
            '/' => return Some((out, &s[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `$1` group references as the regex crate's `${1}` (so `$1@x` does not read a group
/// named `1@x`), `\$` as a literal dollar.
fn java_replacement(r: &str) -> String {
    let mut out = String::new();
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_keeps_the_subject() {
        let m = SslPrincipalMapper::parse("DEFAULT").unwrap();
        assert_eq!(m.name("CN=a,OU=b").as_deref(), Some("CN=a,OU=b"));
    }

    #[test]
    fn rules_apply_in_order_with_case_and_fall_back_to_default() {
        let m = SslPrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L, DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.name("CN=kafka,OU=ServiceUsers,O=x").as_deref(),
            Some("kafka")
        );
        assert_eq!(m.name("CN=Bob,OU=Eng,O=Org").as_deref(), Some("bob@eng"));
        assert_eq!(m.name("C=US").as_deref(), Some("C=US"));
    }

    #[test]
    fn no_matching_rule_is_none_and_bad_rules_are_refused() {
        let m = SslPrincipalMapper::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(m.name("CN=abc").as_deref(), Some("ABC"));
        assert_eq!(m.name("OU=abc"), None);
        assert!(SslPrincipalMapper::parse("RULE:abc").is_err());
        assert!(SslPrincipalMapper::parse("NOPE").is_err());
    }

    #[test]
    fn escaped_slash_belongs_to_the_pattern() {
        let m = SslPrincipalMapper::parse(r"RULE:^CN=(.*)\/x$/$1/").unwrap();
        assert_eq!(m.name("CN=a/x").as_deref(), Some("a"));
    }
}
