//! Globs: what alert scopes, silences and the poller's group and topic
//! filters are written in.

/// `*` matches any run of characters; everything else matches itself.
pub fn matches(pattern: &str, s: &str) -> bool {
    // The shapes scopes and filters mostly have, without the general walk (a
    // rule's scope is matched against every series of its signal each cycle).
    match pattern.find('*') {
        None => return pattern == s,
        Some(i) if i + 1 == pattern.len() => return s.starts_with(&pattern[..i]),
        _ => {}
    }
    glob_walk(pattern, s)
}

fn glob_walk(pattern: &str, s: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), s.as_bytes());
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && p[pi] != b'*' && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::{glob_walk, matches};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn shortcuts_agree_with_the_walk(pattern in "[ab*]{0,6}", s in "[ab]{0,6}") {
            prop_assert_eq!(matches(&pattern, &s), glob_walk(&pattern, &s));
        }
    }

    #[test]
    fn a_star_matches_any_run() {
        assert!(matches("billing*", "billing-eu"));
        assert!(matches("*-dlq", "orders-dlq"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("billing", "billing-eu"));
        assert!(matches("*", ""));
    }
}
