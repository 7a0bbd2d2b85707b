//! Token counting with the o200k_base BPE (prebuilt in `bpe-openai`, no download; the
//! same counts as OpenAI's tiktoken, cross-checked in the tests below).
//!
//! Counts are additive over pieces cut right after a `\n` when the next line has a
//! non-whitespace character (after optional horizontal whitespace) and does not start
//! with `/`: no pre-tokenizer match of the o200k pattern can span such a cut (the
//! newline is then always a pre-token of its own, or ends one). The context builder relies on this to count
//! sections one by one, and [`count_capped`] to stop early on huge text.

use std::sync::{LazyLock, Mutex};

/// Counts the tokens of `text` with the o200k_base tokenizer (GPT-4o family), as a
/// model would see it. Not an estimate: `count_tokens("hello world") == 2`.
///
/// The tokenizer is loaded once, on first use (or ahead of it by [`preload`]).
pub fn count_tokens(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    bpe_openai::o200k_base().count(text)
}

/// Loads the tokenizer on a background thread, so a command that will count tokens
/// (every run and resume) pays its load in parallel with its other start-up work.
pub fn preload() {
    let _ = std::thread::Builder::new()
        .name("tokenizer-load".into())
        .spawn(|| count_tokens("preload"));
}

/// A token count that may have been cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// The exact count.
    Exact(usize),
    /// Over the cap: at least this many (counting stopped early).
    Over(usize),
}

impl Count {
    /// Whether the text is known to fit in `budget` tokens.
    pub(crate) fn fits(self, budget: usize) -> bool {
        matches!(self, Count::Exact(n) if n <= budget)
    }

    /// The count, or the lower bound when cut short.
    pub(crate) fn value(self) -> usize {
        match self {
            Count::Exact(n) | Count::Over(n) => n,
        }
    }
}

/// Counts tokens but stops once the count is known to exceed `cap`: the text is
/// counted in pieces split where counts add up exactly, so the result is exact
/// whenever it is at most `cap`, and huge text is never fully tokenized.
///
/// Each piece (a line or a few, at least [`PIECE`] bytes) is looked up in a cache of
/// piece counts first: from one step to the next most of the context is the same lines
/// (file contents, history, the task), so a step tokenizes only what is new.
pub(crate) fn count_capped(text: &str, cap: usize) -> Count {
    let mut total = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let end = safe_split(rest, PIECE.min(rest.len()));
        let (piece, tail) = rest.split_at(end);
        total += count_piece(piece);
        rest = tail;
        if total > cap && !rest.is_empty() {
            return Count::Over(total);
        }
    }
    if total > cap {
        Count::Over(total)
    } else {
        Count::Exact(total)
    }
}

/// Smallest piece worth a cache entry (shorter lines are grouped with the next ones).
const PIECE: usize = 48;
/// Piece counts remembered; past it the cache starts over (a bound on memory: about
/// 16 bytes an entry).
const PIECE_CACHE_ENTRIES: usize = 1 << 18;

/// Counts of pieces, keyed by a 128-bit digest of their bytes (two independent 64-bit
/// hashes), so a wrong hit needs a collision of both.
static PIECES: LazyLock<Mutex<std::collections::HashMap<(u64, u64), u32>>> =
    LazyLock::new(|| Mutex::new(std::collections::HashMap::new()));

fn count_piece(piece: &str) -> usize {
    use std::hash::{BuildHasher, Hasher};
    // Fixed keys: the digest only needs to tell pieces apart within this process.
    static KEYS: LazyLock<(std::hash::RandomState, std::hash::RandomState)> =
        LazyLock::new(|| (std::hash::RandomState::new(), std::hash::RandomState::new()));
    let digest = |state: &std::hash::RandomState| {
        let mut h = state.build_hasher();
        h.write(piece.as_bytes());
        h.finish()
    };
    let key = (digest(&KEYS.0), digest(&KEYS.1));
    if let Some(n) = PIECES.lock().ok().and_then(|c| c.get(&key).copied()) {
        return n as usize;
    }
    let n = count_tokens(piece);
    if let Ok(mut cache) = PIECES.lock() {
        if cache.len() >= PIECE_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, u32::try_from(n).unwrap_or(u32::MAX));
    }
    n
}

/// A byte offset at or after `from`, right after a `\n`, where token counts add up:
/// the next line reaches a non-whitespace character through horizontal whitespace
/// only, and does not start with `/` (which the pre-tokenizer glues to a preceding
/// `punctuation + newline` run). `text.len()` when there is no such place.
fn safe_split(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = from;
    while let Some(pos) = bytes[i..].iter().position(|&b| b == b'\n') {
        let next = i + pos + 1;
        if next >= text.len() {
            return text.len();
        }
        if bytes[next] != b'/' {
            let solid = text[next..]
                .chars()
                .find(|c| !c.is_whitespace() || *c == '\r' || *c == '\n');
            if solid.is_some_and(|c| !c.is_whitespace()) {
                return next;
            }
        }
        i = next;
    }
    text.len()
}

/// Remembered counts of the parts that repeat from step to step (system prompt, tool
/// definitions, unchanged sections): compared by content, so a hit is always exact.
static CACHE: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
const CACHE_SIZE: usize = 32;

/// [`count_tokens`] with a small content-keyed cache for text that recurs across steps.
pub(crate) fn count_cached(text: &str) -> usize {
    count_capped_cached(text, usize::MAX).value()
}

/// [`count_capped`] with the cache of [`count_cached`] (exact counts only are kept).
pub(crate) fn count_capped_cached(text: &str, cap: usize) -> Count {
    if text.len() < 256 {
        return count_capped(text, cap);
    }
    if let Ok(cache) = CACHE.lock() {
        if let Some((_, n)) = cache.iter().find(|(t, _)| t == text) {
            return if *n <= cap {
                Count::Exact(*n)
            } else {
                Count::Over(*n)
            };
        }
    }
    let count = count_capped(text, cap);
    if let (Count::Exact(n), Ok(mut cache)) = (count, CACHE.lock()) {
        if cache.len() >= CACHE_SIZE {
            cache.remove(0);
        }
        cache.push((text.to_string(), n));
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_bpe_not_chars_over_four() {
        assert_eq!(count_tokens("hello world"), 2);
        assert_eq!(count_tokens(""), 0);
        // 44 chars of English: chars/4 would say 11.
        let s = "The quick brown fox jumps over the lazy dog.";
        assert_eq!(count_tokens(s), 10);
        // Code with many symbols tokenizes densely.
        assert!(count_tokens("fn f(x: &mut [u8]) -> Option<()> {}") > 10);
    }

    #[test]
    fn capped_count_is_exact_under_the_cap_and_stops_over_it() {
        let text: String = (0..3000)
            .map(|i| format!("    let x{i} = call(\"arg {i}\");\n}}\n/// doc\n\n"))
            .collect();
        let exact = count_tokens(&text);
        assert_eq!(count_capped(&text, exact), Count::Exact(exact));
        assert_eq!(count_capped(&text, exact + 10), Count::Exact(exact));
        match count_capped(&text, 100) {
            Count::Over(n) => assert!(n > 100 && n < exact, "{n}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn counts_add_up_over_safe_splits() {
        // YAML-like text: indentation, blank and whitespace-only lines, tabs, CR,
        // lines starting with `/`, punctuation before newlines, non-ASCII.
        let text: String = (0..300)
            .map(|i| {
                format!(
                    "k{i}:\n  a{i}: \"x\";\n\n/// c\n    - [x]\n\t\tt = {i}\n   \n\u{e9}t\u{e9}\n}}\n  /{i}\r\n \u{3000}z\n\n\n  \u{a0}y\n"
                )
            })
            .collect();
        let whole = count_tokens(&text);
        let mut sum = 0;
        let mut rest = text.as_str();
        let mut pieces = 0;
        while !rest.is_empty() {
            let end = safe_split(rest, 1.min(rest.len()));
            let (piece, tail) = rest.split_at(end);
            sum += count_tokens(piece);
            rest = tail;
            pieces += 1;
        }
        assert!(pieces > 2000, "{pieces}");
        assert_eq!(sum, whole);
        assert_eq!(
            count_capped(&text, 10),
            Count::Over(count_capped(&text, 10).value())
        );
        assert_eq!(count_capped(&text, whole), Count::Exact(whole));
    }

    #[test]
    fn piecewise_cached_counts_equal_whole_text_counts() {
        // Code, prose, YAML, CRLF, non-ASCII and long lines; counted twice (the second
        // time from the piece cache) and with a prefix changed (pieces shift).
        let base: String = (0..400)
            .map(|i| match i % 5 {
                0 => format!("fn f{i}(x: &mut [u8]) -> Option<()> {{ x.get({i})?; None }}\n"),
                1 => format!("  key{i}: \"value with spaces\"\r\n"),
                2 => format!("L'\u{e9}t\u{e9} {i} \u{3000} \u{1F600} fin.\n"),
                3 => "x".repeat(300 + i) + "\n",
                _ => format!("\n\n/// doc {i}\n\t\tindent\n"),
            })
            .collect();
        for text in [
            base.clone(),
            format!("prefix line\n{base}"),
            base[7..].to_string(),
        ] {
            let whole = count_tokens(&text);
            assert_eq!(count_capped(&text, usize::MAX), Count::Exact(whole));
            assert_eq!(count_capped(&text, usize::MAX), Count::Exact(whole));
        }
    }

    /// The counts are OpenAI's: equal to tiktoken's o200k_base (`encode_ordinary`) on
    /// the repository's own sources, prompts and tool outputs, and on edge cases.
    #[test]
    fn counts_equal_tiktoken_on_real_text() {
        let tiktoken = tiktoken_rs::o200k_base().unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut texts: Vec<String> = [
            "",
            " ",
            "\n\n\n",
            "hello world",
            "  indented\r\n\ttab\u{a0}nbsp \u{3000}ideographic",
            "\u{1F600}\u{1F9D1}\u{200D}\u{1F4BB} emoji, \u{e9}t\u{e9}, \u{4e2d}\u{6587}, \u{0627}\u{0644}",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ]
        .map(String::from)
        .to_vec();
        for dir in ["prompts", "tests/data/outputs", "host/context/src", "docs"] {
            let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            texts.extend(files.iter().filter_map(|p| std::fs::read_to_string(p).ok()));
        }
        assert!(texts.len() > 30, "{}", texts.len());
        for text in &texts {
            assert_eq!(
                count_tokens(text),
                tiktoken.encode_ordinary(text).len(),
                "{:?}",
                &text[..text.len().min(80)]
            );
        }
    }

    #[test]
    fn cached_count_matches() {
        let s = "word ".repeat(200);
        assert_eq!(count_cached(&s), count_tokens(&s));
        assert_eq!(count_cached(&s), count_tokens(&s));
    }
}
