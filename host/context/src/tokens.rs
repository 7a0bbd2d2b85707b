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
    if bounded() {
        BYTES_USED.with(|b| b.set(true));
        return text.len();
    }
    let n = bpe_openai::o200k_base().count(text);
    LOADED.store(true, std::sync::atomic::Ordering::Release);
    n
}

/// Set once the tokenizer has loaded (its first count returned).
static LOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the tokenizer is loaded, so that counting costs no wait.
pub(crate) fn is_loaded() -> bool {
    LOADED.load(std::sync::atomic::Ordering::Acquire)
}

thread_local! {
    /// Inside [`with_byte_bounds`]: counts are byte lengths.
    static BYTE_BOUNDS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Inside [`with_byte_bounds`]: some count was a byte length (no remembered count).
    static BYTES_USED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn bounded() -> bool {
    BYTE_BOUNDS.with(std::cell::Cell::get)
}

/// Whether counts are byte bounds here (inside [`with_byte_bounds`]).
pub(crate) fn is_bounded() -> bool {
    bounded()
}

/// Runs `f` with every count the tokenizer would make replaced by the text's length in
/// bytes, an upper bound of its token count (an o200k token is at least one byte), so
/// without the tokenizer. Counts remembered from earlier exact counting (in this process
/// or, see [`use_count_file`], an earlier one) are still used; none made here is
/// remembered. Also returns whether any count was a byte length: when none was, every
/// count was exact.
pub(crate) fn with_byte_bounds<R>(f: impl FnOnce() -> R) -> (R, bool) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BYTE_BOUNDS.with(|b| b.set(false));
        }
    }
    BYTE_BOUNDS.with(|b| b.set(true));
    BYTES_USED.with(|b| b.set(false));
    let _reset = Reset;
    let r = f();
    (r, BYTES_USED.with(std::cell::Cell::get))
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

/// Counts of pieces, keyed by a 128-bit digest of their bytes ([`digest`]), so a wrong
/// hit needs a 128-bit collision.
static PIECES: LazyLock<Mutex<std::collections::HashMap<(u64, u64), u32>>> =
    LazyLock::new(|| Mutex::new(std::collections::HashMap::new()));

/// The digest of a piece: XXH3-128, the same in every process and version (the counts
/// are kept on disk, see [`use_count_file`]), and one pass over the piece (two SipHash
/// passes, as before, were a tenth of a step's host time).
fn digest(piece: &str) -> (u64, u64) {
    let d = xxhash_rust::xxh3::xxh3_128(piece.as_bytes());
    ((d >> 64) as u64, d as u64)
}

fn count_piece(piece: &str) -> usize {
    let key = digest(piece);
    if let Some(n) = PIECES.lock().ok().and_then(|c| c.get(&key).copied()) {
        return n as usize;
    }
    let n = count_tokens(piece);
    if bounded() {
        return n;
    }
    let n32 = u32::try_from(n).unwrap_or(u32::MAX);
    if let Ok(mut cache) = PIECES.lock() {
        if cache.len() >= PIECE_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, n32);
    }
    if let Ok(mut file) = COUNT_FILE.lock() {
        if let Some(f) = file.as_mut() {
            f.new.push((key, n32));
        }
    }
    n
}

/// The file of piece counts this process reads and adds to ([`use_count_file`]).
struct CountFile {
    path: std::path::PathBuf,
    /// Counts made since the last [`save_counts`].
    new: Vec<((u64, u64), u32)>,
}

static COUNT_FILE: Mutex<Option<CountFile>> = Mutex::new(None);

/// The count file's first bytes: format, tokenizer and digest (a file of another digest
/// is started over).
const COUNT_FILE_MAGIC: &[u8; 16] = b"af-o200k-xxh3-v2";
/// One entry: the piece's digest (two u64) and its count (u32), little-endian.
const COUNT_ENTRY: usize = 20;
/// Entries a count file keeps; past twice this it is rewritten with this many.
const COUNT_FILE_ENTRIES: usize = 1 << 16;

/// Remembers piece counts across processes in `path` (a cache: created when missing,
/// ignored when unreadable or not this format): the counts it holds are used as if this
/// process had made them, and those this process makes are appended by [`save_counts`].
/// A `run` or `resume` then counts the pieces an earlier process counted (the task's
/// files, its history, the tool definitions) without the tokenizer, which takes tens of
/// milliseconds to load (see [`crate::build_for_step`]).
pub fn use_count_file(path: &std::path::Path) {
    let mut whole = true;
    let entries = match std::fs::read(path) {
        Ok(bytes) if bytes.starts_with(COUNT_FILE_MAGIC) => {
            // A torn last entry would shift every entry appended after it.
            whole = (bytes.len() - COUNT_FILE_MAGIC.len()).is_multiple_of(COUNT_ENTRY);
            let body = &bytes[COUNT_FILE_MAGIC.len()..];
            body.as_chunks::<COUNT_ENTRY>()
                .0
                .iter()
                .map(|e| {
                    let word =
                        |i: usize| u64::from_le_bytes(e[i..i + 8].try_into().expect("8 bytes"));
                    let n = u32::from_le_bytes(e[16..20].try_into().expect("4 bytes"));
                    ((word(0), word(8)), n)
                })
                .collect::<Vec<_>>()
        }
        _ => Vec::new(),
    };
    let too_long = entries.len() > 2 * COUNT_FILE_ENTRIES;
    if let Ok(mut cache) = PIECES.lock() {
        cache.extend(entries.iter().rev().take(COUNT_FILE_ENTRIES).copied());
    }
    if let Ok(mut file) = COUNT_FILE.lock() {
        *file = Some(CountFile {
            path: path.to_path_buf(),
            new: Vec::new(),
        });
    }
    if too_long || !whole || entries.is_empty() {
        // Start the file over with the newest entries (or with none).
        let keep: Vec<_> = entries
            .iter()
            .rev()
            .take(COUNT_FILE_ENTRIES)
            .rev()
            .copied()
            .collect();
        let mut bytes = COUNT_FILE_MAGIC.to_vec();
        for (key, n) in keep {
            push_entry(&mut bytes, key, n);
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &bytes).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

fn push_entry(bytes: &mut Vec<u8>, key: (u64, u64), n: u32) {
    bytes.extend_from_slice(&key.0.to_le_bytes());
    bytes.extend_from_slice(&key.1.to_le_bytes());
    bytes.extend_from_slice(&n.to_le_bytes());
}

/// Appends the counts made since the last call to the file of [`use_count_file`] (one
/// write, not flushed: a cache). Does nothing without such a file.
pub fn save_counts() {
    use std::io::Write;
    let Ok(mut file) = COUNT_FILE.lock() else {
        return;
    };
    let Some(f) = file.as_mut() else { return };
    if f.new.is_empty() {
        return;
    }
    let mut bytes = Vec::with_capacity(f.new.len() * COUNT_ENTRY);
    for (key, n) in f.new.drain(..) {
        push_entry(&mut bytes, key, n);
    }
    if let Ok(mut out) = std::fs::OpenOptions::new().append(true).open(&f.path) {
        let _ = out.write_all(&bytes);
    }
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
    if bounded() {
        return count;
    }
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

    /// The count file: started over when it is not this format, holds the digest and
    /// count of each piece counted (as counted), and drops a torn last entry rather than
    /// shifting the entries after it.
    #[test]
    fn counts_are_kept_in_the_count_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("counts.bin");
        std::fs::write(&path, b"not a count file").unwrap();
        use_count_file(&path);
        assert_eq!(std::fs::read(&path).unwrap(), COUNT_FILE_MAGIC);
        let piece = "count file check: a line no other test counts 5b1e9d\n";
        let n = count_capped(piece, usize::MAX).value();
        assert_eq!(n, count_tokens(piece));
        save_counts();
        let has = |bytes: &[u8]| {
            let key = digest(piece);
            bytes[COUNT_FILE_MAGIC.len()..]
                .as_chunks::<COUNT_ENTRY>()
                .0
                .iter()
                .any(|e| {
                    e[..8] == key.0.to_le_bytes()
                        && e[8..16] == key.1.to_le_bytes()
                        && e[16..] == (n as u32).to_le_bytes()
                })
        };
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(COUNT_FILE_MAGIC));
        assert!((bytes.len() - COUNT_FILE_MAGIC.len()).is_multiple_of(COUNT_ENTRY));
        assert!(has(&bytes), "the piece's count is in the file");
        // A torn entry (a kill mid-append): the file is rewritten with whole entries.
        let mut torn = bytes.clone();
        torn.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
        std::fs::write(&path, &torn).unwrap();
        use_count_file(&path);
        let bytes = std::fs::read(&path).unwrap();
        assert!((bytes.len() - COUNT_FILE_MAGIC.len()).is_multiple_of(COUNT_ENTRY));
        assert!(has(&bytes));
    }

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
