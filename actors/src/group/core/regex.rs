//! The regular expressions of KIP-848 subscriptions (`SubscribedTopicRegex`). Kafka compiles
//! them with RE2/J and requires the whole topic name to match. This is a small backtracking
//! matcher for the RE2 subset topic patterns use (literals, `.`, classes, `\d\w\s`, groups,
//! alternation, greedy `* + ? {n,m}`, anchors), with a step budget so a hostile pattern
//! costs bounded time.

use std::cell::Cell;

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Char(char),
    Any,
    /// (ranges, negated)
    Class(Vec<(char, char)>, bool),
    Group(Alt),
    Start,
    End,
}

#[derive(Debug, Clone, PartialEq)]
struct Piece {
    node: Node,
    min: usize,
    max: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct Alt(Vec<Vec<Piece>>);

/// A compiled subscription pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicRegex {
    root: Alt,
}

/// The pattern does not compile (INVALID_REGULAR_EXPRESSION).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexError(pub String);

const MAX_STEPS: usize = 200_000;
const MAX_REPEAT: usize = 1000;

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    _src: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.pos += 1;
        c
    }
    /// `what` is the RE2/J (1.8) error description Kafka puts into its message.
    fn err<T>(&self, what: &str) -> Result<T, RegexError> {
        Err(RegexError(what.to_string()))
    }

    fn alt(&mut self) -> Result<Alt, RegexError> {
        let mut branches = vec![self.seq()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            branches.push(self.seq()?);
        }
        Ok(Alt(branches))
    }

    fn seq(&mut self) -> Result<Vec<Piece>, RegexError> {
        let mut pieces = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let node = self.atom()?;
            let (min, max) = self.quantifier()?;
            pieces.push(Piece { node, min, max });
        }
        Ok(pieces)
    }

    fn quantifier(&mut self) -> Result<(usize, usize), RegexError> {
        let q = match self.peek() {
            Some('*') => (0, usize::MAX),
            Some('+') => (1, usize::MAX),
            Some('?') => (0, 1),
            Some('{') => {
                self.pos += 1;
                let min = self.number()?;
                let max = if self.peek() == Some(',') {
                    self.pos += 1;
                    if self.peek() == Some('}') {
                        usize::MAX
                    } else {
                        self.number()?
                    }
                } else {
                    min
                };
                if self.peek() != Some('}') || max < min || min > MAX_REPEAT {
                    return self.err("invalid repeat count");
                }
                (min, max)
            }
            _ => return Ok((1, 1)),
        };
        self.pos += 1;
        // Lazy and possessive suffixes do not change whether a full match exists.
        if matches!(self.peek(), Some('?') | Some('+')) {
            self.pos += 1;
        }
        if matches!(self.peek(), Some('*') | Some('+') | Some('?') | Some('{')) {
            return self.err("invalid nested repetition operator");
        }
        Ok(q)
    }

    fn number(&mut self) -> Result<usize, RegexError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return self.err("invalid repeat count");
        }
        let s: String = self.chars[start..self.pos].iter().collect();
        s.parse().or_else(|_| self.err("invalid repeat count"))
    }

    fn escape_class(c: char) -> Option<(Vec<(char, char)>, bool)> {
        let digit = vec![('0', '9')];
        let word = vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
        let space = vec![(' ', ' '), ('\t', '\r')];
        match c {
            'd' => Some((digit, false)),
            'D' => Some((digit, true)),
            'w' => Some((word, false)),
            'W' => Some((word, true)),
            's' => Some((space, false)),
            'S' => Some((space, true)),
            _ => None,
        }
    }

    fn escaped_char(&self, c: char) -> Result<char, RegexError> {
        match c {
            'n' => Ok('\n'),
            't' => Ok('\t'),
            'r' => Ok('\r'),
            c if c.is_ascii_alphanumeric() => self.err("invalid escape sequence"),
            c => Ok(c),
        }
    }

    fn atom(&mut self) -> Result<Node, RegexError> {
        match self.next() {
            None => self.err("unexpected end"),
            Some('.') => Ok(Node::Any),
            Some('^') => Ok(Node::Start),
            Some('$') => Ok(Node::End),
            Some('(') => {
                if self.peek() == Some('?') {
                    self.pos += 1;
                    if self.next() != Some(':') {
                        return self.err("invalid or unsupported Perl syntax");
                    }
                }
                let alt = self.alt()?;
                if self.next() != Some(')') {
                    return self.err("missing closing )");
                }
                Ok(Node::Group(alt))
            }
            Some(')') => self.err("regexp/syntax: internal error"),
            Some('*') | Some('+') | Some('?') | Some('{') => {
                self.err("missing argument to repetition operator")
            }
            Some('[') => self.class(),
            Some('\\') => {
                let c = match self.next() {
                    Some(c) => c,
                    None => return self.err("trailing backslash at end of expression"),
                };
                if let Some((ranges, negated)) = Self::escape_class(c) {
                    Ok(Node::Class(ranges, negated))
                } else {
                    Ok(Node::Char(self.escaped_char(c)?))
                }
            }
            Some(c) => Ok(Node::Char(c)),
        }
    }

    fn class(&mut self) -> Result<Node, RegexError> {
        let negated = if self.peek() == Some('^') {
            self.pos += 1;
            true
        } else {
            false
        };
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let c = match self.next() {
                None => return self.err("missing closing ]"),
                Some(']') if !first => break,
                Some(c) => c,
            };
            first = false;
            let lo = if c == '\\' {
                let e = match self.next() {
                    Some(e) => e,
                    None => return self.err("trailing backslash at end of expression"),
                };
                if let Some((rs, false)) = Self::escape_class(e) {
                    ranges.extend(rs);
                    continue;
                }
                self.escaped_char(e)?
            } else {
                c
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|c| *c != ']') {
                self.pos += 1;
                let hi = match self.next() {
                    Some('\\') => {
                        let e = self.next().unwrap_or('\\');
                        self.escaped_char(e)?
                    }
                    Some(h) => h,
                    None => return self.err("missing closing ]"),
                };
                if hi < lo {
                    return self.err("invalid character class range");
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(Node::Class(ranges, negated))
    }
}

impl TopicRegex {
    pub fn new(pattern: &str) -> Result<Self, RegexError> {
        let mut p = Parser {
            chars: pattern.chars().collect(),
            pos: 0,
            _src: pattern,
        };
        let root = p.alt()?;
        if p.pos < p.chars.len() {
            return p.err("regexp/syntax: internal error");
        }
        Ok(TopicRegex { root })
    }

    /// Whether the whole of `text` matches (Java's `Matcher.matches`).
    pub fn full_match(&self, text: &str) -> bool {
        let s: Vec<char> = text.chars().collect();
        let steps = Cell::new(0usize);
        let m = Matcher {
            s: &s,
            steps: &steps,
        };
        m.alt(&self.root, 0, &mut |p| p == s.len())
    }
}

struct Matcher<'a> {
    s: &'a [char],
    steps: &'a Cell<usize>,
}

impl Matcher<'_> {
    fn budget(&self) -> bool {
        let n = self.steps.get() + 1;
        self.steps.set(n);
        n <= MAX_STEPS
    }

    fn alt(&self, alt: &Alt, pos: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        alt.0.iter().any(|seq| self.seq(seq, pos, k))
    }

    fn seq(&self, pieces: &[Piece], pos: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        if !self.budget() {
            return false;
        }
        match pieces.split_first() {
            None => k(pos),
            Some((piece, rest)) => self.piece(piece, 0, pos, &mut |next| self.seq(rest, next, k)),
        }
    }

    fn piece(
        &self,
        piece: &Piece,
        count: usize,
        pos: usize,
        k: &mut dyn FnMut(usize) -> bool,
    ) -> bool {
        if !self.budget() {
            return false;
        }
        if count < piece.max
            && self.node(&piece.node, pos, &mut |next| {
                // An empty iteration beyond the minimum cannot make progress: stop there.
                (next != pos || count < piece.min) && self.piece(piece, count + 1, next, k)
            })
        {
            return true;
        }
        count >= piece.min && k(pos)
    }

    fn node(&self, node: &Node, pos: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        let at = self.s.get(pos).copied();
        match node {
            Node::Char(c) => at == Some(*c) && k(pos + 1),
            Node::Any => at.is_some_and(|c| c != '\n') && k(pos + 1),
            Node::Class(ranges, negated) => match at {
                Some(c) => {
                    let inside = ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi);
                    inside != *negated && k(pos + 1)
                }
                None => false,
            },
            Node::Group(alt) => self.alt(alt, pos, k),
            Node::Start => pos == 0 && k(pos),
            Node::End => pos == self.s.len() && k(pos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        TopicRegex::new(p).unwrap().full_match(t)
    }

    #[test]
    fn full_match_semantics() {
        assert!(m("foo.*", "foo-bar"));
        assert!(!m("foo", "foo-bar"), "must match the whole name");
        assert!(m("orders|payments", "payments"));
        assert!(m("t[0-9]+", "t42"));
        assert!(!m("t[0-9]+", "t"));
        assert!(m("t\\d{2,3}", "t123"));
        assert!(!m("t\\d{2,3}", "t1234"));
        assert!(m("(a|b)*c", "ababc"));
        assert!(m("[^_].*", "x_"));
        assert!(!m("[^_].*", "_x"));
        assert!(m("^events\\.v1$", "events.v1"));
        assert!(!m("events\\.v1", "eventsXv1"));
        assert!(m("a?b", "b"));
        assert!(m(".*", ""));
        assert!(m("(?:ab)+", "abab"));
    }

    #[test]
    fn invalid_patterns() {
        for p in ["(", "a)", "[a", "*a", "a{2,1}", "a**", "\\"] {
            assert!(TopicRegex::new(p).is_err(), "{p}");
        }
    }

    #[test]
    fn errors_are_described_as_re2j_does() {
        let why = |p: &str| TopicRegex::new(p).unwrap_err().0;
        assert_eq!(why("(unclosed"), "missing closing )");
        assert_eq!(why("[a"), "missing closing ]");
        assert_eq!(why("*a"), "missing argument to repetition operator");
        assert_eq!(why("a**"), "invalid nested repetition operator");
        assert_eq!(why("a{2,1}"), "invalid repeat count");
        assert_eq!(why("\\"), "trailing backslash at end of expression");
        assert_eq!(why("[z-a]"), "invalid character class range");
    }

    #[test]
    fn pathological_pattern_is_bounded() {
        let r = TopicRegex::new("(a*)*b").unwrap();
        assert!(!r.full_match(&"a".repeat(200)));
    }
}
