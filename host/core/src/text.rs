//! The one way the host shortens text for a summary, a fact, a reason or a message.

use std::borrow::Cow;

/// `s` when it has at most `max` characters; else its first `max` characters followed by
/// `…`. Counts characters, so a cut never splits a UTF-8 sequence.
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((end, _)) => {
            let mut t = String::with_capacity(end + '…'.len_utf8());
            t.push_str(&s[..end]);
            t.push('…');
            Cow::Owned(t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_kept_long_text_is_marked() {
        assert_eq!(cut("abc", 3), "abc");
        assert!(matches!(cut("abc", 3), Cow::Borrowed(_)));
        assert_eq!(cut("abcd", 3), "abc…");
        assert_eq!(cut("", 0), "");
        assert_eq!(cut("x", 0), "…");
        // Multi-byte characters count as one and are never split.
        assert_eq!(cut("héllo wörld", 7), "héllo w…");
        assert_eq!(cut("🦀🦀🦀", 2), "🦀🦀…");
    }

    proptest! {
        #[test]
        fn cut_is_a_prefix_within_bounds(s in "\\PC{0,40}", max in 0usize..50) {
            let c = cut(&s, max);
            let n = s.chars().count();
            if n <= max {
                prop_assert_eq!(c.as_ref(), s.as_str());
            } else {
                prop_assert_eq!(c.chars().count(), max + 1);
                prop_assert!(c.ends_with('…'));
                prop_assert!(s.starts_with(&c[..c.len() - '…'.len_utf8()]));
            }
        }
    }
}
