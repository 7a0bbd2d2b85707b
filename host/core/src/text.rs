//! The one way the host shortens text for a summary, a fact, a reason or a message, and
//! the one way it numbers lines.

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

/// Appends `n` right-aligned in `width` columns (more when it has more digits), exactly
/// as `format!("{n:>width$}")` writes it. Numbered file views write one per line, every
/// step: the formatting machinery showed in a step's profile.
pub fn push_right_aligned(out: &mut String, n: usize, width: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = n;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let len = digits.len() - start;
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    // ASCII digits only.
    out.push_str(std::str::from_utf8(&digits[start..]).unwrap_or_default());
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
        fn right_aligned_numbers_are_what_format_writes(
            n in prop_oneof![0usize..200, any::<usize>()],
            width in 0usize..25,
        ) {
            let mut out = String::from("x");
            push_right_aligned(&mut out, n, width);
            prop_assert_eq!(out, format!("x{n:>width$}"));
        }

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
