//! Redis glob patterns (`SCAN ... MATCH`): `*`, `?`, `[abc]`, `[^a-z]` and `\` escapes, matched
//! byte by byte as Redis's `stringmatchlen` does, but without its recursion: one backtracking
//! point for the last `*` seen, so matching takes at most (key length × pattern length) steps
//! whatever the pattern.

/// One element of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// `*`: any run of bytes (consecutive stars are one).
    Star,
    /// `?`: any one byte.
    Any,
    /// A byte matched exactly.
    Literal(u8),
    /// `[...]`: one byte in (or, negated, not in) the inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
}

/// A compiled glob pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    /// Compiles `pattern`. Every byte string is a pattern: an unterminated class ends at the
    /// end of the pattern, and a trailing `\` is a literal backslash, as in Redis.
    pub fn new(pattern: &[u8]) -> Glob {
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < pattern.len() {
            match pattern[i] {
                b'*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                    i += 1;
                }
                b'?' => {
                    tokens.push(Token::Any);
                    i += 1;
                }
                b'\\' if i + 1 < pattern.len() => {
                    tokens.push(Token::Literal(pattern[i + 1]));
                    i += 2;
                }
                b'[' => {
                    i += 1;
                    let negated = pattern.get(i) == Some(&b'^');
                    if negated {
                        i += 1;
                    }
                    let mut ranges = Vec::new();
                    while i < pattern.len() && pattern[i] != b']' {
                        if pattern[i] == b'\\' && i + 1 < pattern.len() {
                            ranges.push((pattern[i + 1], pattern[i + 1]));
                            i += 2;
                        } else if i + 2 < pattern.len()
                            && pattern[i + 1] == b'-'
                            && pattern[i + 2] != b']'
                        {
                            let (a, b) = (pattern[i], pattern[i + 2]);
                            ranges.push((a.min(b), a.max(b)));
                            i += 3;
                        } else {
                            ranges.push((pattern[i], pattern[i]));
                            i += 1;
                        }
                    }
                    // Skip the closing bracket (absent when the class runs to the end).
                    i += 1;
                    tokens.push(Token::Class { negated, ranges });
                }
                b => {
                    tokens.push(Token::Literal(b));
                    i += 1;
                }
            }
        }
        Glob { tokens }
    }

    /// True when the pattern is `*` alone (every key matches; callers skip matching).
    pub fn matches_everything(&self) -> bool {
        self.tokens == [Token::Star]
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &[u8]) -> bool {
        let tokens = &self.tokens;
        let (mut t, mut s) = (0usize, 0usize);
        // After a star: the token after it, and where in `text` its run would end next.
        let mut backtrack: Option<(usize, usize)> = None;
        while s < text.len() {
            match tokens.get(t) {
                Some(Token::Star) => {
                    backtrack = Some((t + 1, s));
                    t += 1;
                    continue;
                }
                Some(token) if single_matches(token, text[s]) => {
                    t += 1;
                    s += 1;
                    continue;
                }
                _ => {}
            }
            match backtrack {
                // Let the last star swallow one more byte and retry from there.
                Some((after_star, star_end)) => {
                    t = after_star;
                    s = star_end + 1;
                    backtrack = Some((after_star, star_end + 1));
                }
                None => return false,
            }
        }
        tokens[t..].iter().all(|token| *token == Token::Star)
    }
}

fn single_matches(token: &Token, b: u8) -> bool {
    match token {
        Token::Star => false,
        Token::Any => true,
        Token::Literal(l) => *l == b,
        Token::Class { negated, ranges } => {
            ranges.iter().any(|&(lo, hi)| lo <= b && b <= hi) != *negated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    fn m(pattern: &str, text: &str) -> bool {
        Glob::new(pattern.as_bytes()).matches(text.as_bytes())
    }

    #[test]
    fn redis_glob_semantics() {
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("user:*", "user:1"));
        assert!(!m("user:*", "usr:1"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"), "reversed ranges are swapped");
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(m("a*b", "aXbXb"));
        assert!(m("[abc", "b"), "an unterminated class runs to the end");
        assert!(m("ab\\", "ab\\"), "a trailing backslash is literal");
        assert!(Glob::new(b"**").matches_everything());
    }

    #[test]
    fn pathological_patterns_are_fast() {
        let text = "a".repeat(4096);
        let pattern = format!("{}b", "*a".repeat(200));
        // Quadratic at worst: this finishes at once instead of backtracking exponentially.
        assert!(!m(&pattern, &text));
    }
}
