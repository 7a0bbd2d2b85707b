//! The fits found in earlier builds, remembered by what decided them.
//!
//! From one step to the next a section's input is often the same (the file the agent
//! works on, its working memory), and so is its budget. Finding the cut that fits is a
//! search of several renderings; when the section's input, its starting parameters, its
//! target and its ladder are all the same as in an earlier build, the rendering that
//! search ended with is used again, unrendered and uncounted.
//!
//! The key is a 128-bit digest of the section's *input*, not of its rendered text:
//! some inputs that decide a cut are not shown (a fact's rank comes from its
//! confidence and step, a working-memory item's pinning decides which go first), and two
//! inputs can render alike when nothing is cut yet differently once cut (key order, CRLF
//! line ends). The digest covers everything [`crate::Prepared::render`] reads for the
//! section; a section without a digest is always searched.
//!
//! The search's result is one rendering, deterministic in those inputs, so a build with
//! the memo gives the same prompt as one without it.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{LazyLock, Mutex};

use serde_json::Value;
use xxhash_rust::xxh3::Xxh3;

use crate::compress::Params;
use crate::Rendered;

/// Remembered fits, and the bytes of their texts; past either the memo starts over.
const ENTRIES: usize = 1024;
const TEXT_BYTES: usize = 16 << 20;

#[derive(Default)]
struct Fits {
    by_key: HashMap<u128, Rendered>,
    text_bytes: usize,
}

static FITS: LazyLock<Mutex<Fits>> = LazyLock::new(Mutex::default);

thread_local! {
    /// Off for the tests that compare builds with and without the memo.
    static OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The rendering an earlier fit with this key ended with.
pub(crate) fn get(key: u128) -> Option<Rendered> {
    if OFF.with(std::cell::Cell::get) {
        return None;
    }
    FITS.lock().ok()?.by_key.get(&key).cloned()
}

/// Remembers the rendering a fit with this key ended with.
pub(crate) fn put(key: u128, fitted: &Rendered) {
    if OFF.with(std::cell::Cell::get) {
        return;
    }
    let bytes = fitted.text.as_ref().map_or(0, String::len);
    if bytes > TEXT_BYTES {
        return;
    }
    if let Ok(mut fits) = FITS.lock() {
        if fits.by_key.len() >= ENTRIES || fits.text_bytes + bytes > TEXT_BYTES {
            *fits = Fits::default();
        }
        if let Some(old) = fits.by_key.insert(key, fitted.clone()) {
            fits.text_bytes -= old.text.as_ref().map_or(0, String::len);
        }
        fits.text_bytes += bytes;
    }
}

/// Runs `f` without the memo on this thread (nothing read or remembered).
#[cfg(test)]
pub(crate) fn without<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            OFF.with(|o| o.set(false));
        }
    }
    OFF.with(|o| o.set(true));
    let _reset = Reset;
    f()
}

/// A digest of the inputs of one fit. Every piece is written with its length or a tag
/// first, so two different sequences of pieces never write the same bytes.
pub(crate) struct Digest(Xxh3);

impl Digest {
    /// Starts a digest with what every fit has: the section, where the search starts,
    /// its target and its ladder.
    pub(crate) fn new(
        section: impl Hash,
        start: &Params,
        target: usize,
        ladder: impl Hash,
    ) -> Self {
        let mut d = Digest(Xxh3::new());
        section.hash(&mut d.0);
        start.hash(&mut d.0);
        target.hash(&mut d.0);
        ladder.hash(&mut d.0);
        d
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.0.update(&(s.len() as u64).to_le_bytes());
        self.0.update(s.as_bytes());
    }

    pub(crate) fn u64(&mut self, n: u64) {
        self.0.update(&n.to_le_bytes());
    }

    /// A JSON value in its order (which is the order it is rendered in): std's `Hash`
    /// for a map with `preserve_order` sorts the keys, which would make two differently
    /// rendered values alike.
    pub(crate) fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.u64(0),
            Value::Bool(b) => self.u64(1 + u64::from(*b)),
            Value::Number(n) => {
                self.u64(3);
                self.str(&n.to_string());
            }
            Value::String(s) => {
                self.u64(4);
                self.str(s);
            }
            Value::Array(a) => {
                self.u64(5);
                self.u64(a.len() as u64);
                for x in a {
                    self.value(x);
                }
            }
            Value::Object(m) => {
                self.u64(6);
                self.u64(m.len() as u64);
                for (k, x) in m {
                    self.str(k);
                    self.value(x);
                }
            }
        }
    }

    pub(crate) fn finish(self) -> u128 {
        self.0.digest128()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn digest(v: &Value) -> u128 {
        let mut d = Digest::new(0u8, &Params::default(), 10, 0u8);
        d.value(v);
        d.finish()
    }

    #[test]
    fn values_that_render_differently_digest_differently() {
        let pairs = [
            (json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1})),
            (json!("1"), json!(1)),
            (json!(["ab"]), json!(["a", "b"])),
            (json!({"a": "b"}), json!(["a", "b"])),
            (json!("a\r\nb"), json!("a\nb")),
            (json!(1.0), json!(1)),
            (json!(null), json!(false)),
            (json!(false), json!(true)),
        ];
        for (a, b) in pairs {
            assert_ne!(digest(&a), digest(&b), "{a} vs {b}");
            assert_eq!(digest(&a), digest(&a.clone()));
        }
    }
}
