//! Compression primitives (seed 001 "Token Budget Enforcement") and the search for the
//! least compression that fits a budget.
//!
//! A section is rendered from its data and a [`Params`] (how hard to compress); the
//! ladder of [`Stage`]s tightens one parameter at a time, in the seed's order:
//! 1. long multi-line text (file contents): first/last N lines around a
//!    `# ... X lines omitted ...` marker;
//! 2. recent actions: keep the last 2, then 1;
//! 3. tool results and summaries: one line;
//! 4. errors and long strings: first 500 chars, then fewer;
//! 5. lists: first N items and `... and X more`;
//!
//! then the same parameters past their usual floors, then leaving the section out.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// How hard a section is compressed. `None` means "not cut".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Params {
    /// Multi-line strings keep their first and last `lines` lines.
    pub lines: Option<usize>,
    /// Items kept (recent actions: the newest; working memory: all but the oldest).
    pub keep: Option<usize>,
    /// Summaries and tool results cut to their first line.
    pub single_line: bool,
    /// Strings cut to this many chars.
    pub chars: Option<usize>,
    /// Lists keep their first `items` items.
    pub items: Option<usize>,
    /// The section is replaced by a short placeholder.
    pub omit: bool,
}

/// Which parameter a [`Stage`] tightens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Knob {
    Lines,
    Keep,
    Chars,
    Items,
}

impl Params {
    pub(crate) fn get(&self, k: Knob) -> Option<usize> {
        match k {
            Knob::Lines => self.lines,
            Knob::Keep => self.keep,
            Knob::Chars => self.chars,
            Knob::Items => self.items,
        }
    }

    pub(crate) fn with(mut self, k: Knob, v: usize) -> Params {
        match k {
            Knob::Lines => self.lines = Some(v),
            Knob::Keep => self.keep = Some(v),
            Knob::Chars => self.chars = Some(v),
            Knob::Items => self.items = Some(v),
        }
        self
    }
}

/// One step of a section's compression ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stage {
    /// Tighten a knob: the largest value in `lo..=hi` that fits (tried from `hi` down).
    Range(Knob, usize, usize),
    /// Cut summaries / tool results to one line.
    SingleLine,
    /// Replace the section by a placeholder.
    Omit,
}

/// Kept lines at the first compression stage before later strategies are tried.
pub(crate) const LINES_FLOOR: usize = 5;
/// The seed's error cut.
pub(crate) const CHARS_STD: usize = 500;
/// Chars kept before later strategies are tried.
pub(crate) const CHARS_FLOOR: usize = 120;
/// Chars kept at the very least.
pub(crate) const CHARS_MIN: usize = 20;
/// List items kept before later strategies are tried.
pub(crate) const ITEMS_FLOOR: usize = 3;

/// What a render cut, and the sizes it saw (used to bound the searches).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    pub line_cuts: usize,
    pub lines_omitted: usize,
    pub char_cuts: usize,
    pub chars_omitted: usize,
    pub list_cuts: usize,
    pub items_omitted: usize,
    pub single_lined: usize,
    /// (kept, of) for sections whose items are dropped as a whole.
    pub kept: Option<(usize, usize)>,
    pub omitted: bool,
    /// Largest line count of a string subject to the line cut.
    pub max_lines: usize,
    /// Largest char count of a string subject to the char cut.
    pub max_chars: usize,
    /// Longest list subject to the item cut.
    pub max_items: usize,
    /// Items subject to `keep`.
    pub keepable: usize,
}

impl Stats {
    /// Whether anything was cut.
    pub(crate) fn compressed(&self) -> bool {
        self.line_cuts > 0
            || self.char_cuts > 0
            || self.list_cuts > 0
            || self.single_lined > 0
            || self.kept.is_some_and(|(k, of)| k < of)
            || self.omitted
    }

    /// Human-readable notes on what was cut, in ladder order.
    pub(crate) fn notes(
        &self,
        section: &str,
        p: &Params,
        keep_note: impl Fn(usize, usize) -> String,
    ) -> Vec<String> {
        let mut notes = Vec::new();
        if self.line_cuts > 0 {
            notes.push(format!(
                "{section}: {} cut to first/last {} lines ({} lines omitted)",
                plural(self.line_cuts, "long text", "long texts"),
                p.lines.unwrap_or(0),
                self.lines_omitted
            ));
        }
        if let Some((kept, of)) = self.kept.filter(|(k, of)| k < of) {
            notes.push(format!("{section}: {}", keep_note(kept, of)));
        }
        if self.single_lined > 0 {
            notes.push(format!(
                "{section}: {} cut to one line",
                plural(self.single_lined, "summary", "summaries")
            ));
        }
        if self.char_cuts > 0 {
            notes.push(format!(
                "{section}: {} cut to {} chars ({} chars omitted)",
                plural(self.char_cuts, "string", "strings"),
                p.chars.unwrap_or(0),
                self.chars_omitted
            ));
        }
        if self.list_cuts > 0 {
            notes.push(format!(
                "{section}: {} cut to {} items ({} items omitted)",
                plural(self.list_cuts, "list", "lists"),
                p.items.unwrap_or(0),
                self.items_omitted
            ));
        }
        if self.omitted {
            notes.push(format!("{section}: left out"));
        }
        notes
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The marker that replaces omitted lines (seed 001).
pub(crate) fn lines_marker(n: usize) -> String {
    format!("# ... {n} lines omitted ...")
}

/// The marker that ends a cut list.
pub(crate) fn more_marker(n: usize) -> String {
    format!("... and {n} more")
}

/// Applies the line cut then the char cut to a string.
pub(crate) fn text<'s>(s: &'s str, p: &Params, st: &mut Stats) -> Cow<'s, str> {
    let s = cut_lines(s, p.lines, st);
    if let Cow::Owned(cut) = cut_chars(&s, p.chars, st) {
        return Cow::Owned(cut);
    }
    s
}

/// Keeps the first and last `n` lines of a multi-line string, with the omission
/// marker between them. Strings of at most `2n + 1` lines are unchanged.
pub(crate) fn cut_lines<'s>(s: &'s str, n: Option<usize>, st: &mut Stats) -> Cow<'s, str> {
    if !s.contains('\n') {
        return Cow::Borrowed(s);
    }
    let (body, trail) = match s.strip_suffix('\n') {
        Some(b) => (b, "\n"),
        None => (s, ""),
    };
    let total = body.bytes().filter(|&b| b == b'\n').count() + 1;
    st.max_lines = st.max_lines.max(total);
    let Some(n) = n else {
        return Cow::Borrowed(s);
    };
    if total <= 2 * n + 1 {
        return Cow::Borrowed(s);
    }
    let head_end = if n == 0 {
        0
    } else {
        // Byte offset just after the n-th newline.
        let mut seen = 0;
        let mut end = 0;
        for (i, b) in body.bytes().enumerate() {
            if b == b'\n' {
                seen += 1;
                if seen == n {
                    end = i + 1;
                    break;
                }
            }
        }
        end
    };
    let tail_start = if n == 0 {
        body.len()
    } else {
        let mut seen = 0;
        let mut start = body.len();
        for (i, b) in body.bytes().enumerate().rev() {
            if b == b'\n' {
                seen += 1;
                if seen == n {
                    start = i + 1;
                    break;
                }
            }
        }
        start
    };
    let omitted = total - 2 * n;
    st.line_cuts += 1;
    st.lines_omitted += omitted;
    let mut out = String::with_capacity(head_end + (body.len() - tail_start) + 40);
    out.push_str(&body[..head_end]);
    out.push_str(&lines_marker(omitted));
    if n > 0 {
        out.push('\n');
        out.push_str(&body[tail_start..]);
    }
    out.push_str(trail);
    Cow::Owned(out)
}

/// Cuts a string to its first `max` chars, noting how many were dropped.
pub(crate) fn cut_chars<'s>(s: &'s str, max: Option<usize>, st: &mut Stats) -> Cow<'s, str> {
    // No cut ever goes below CHARS_MIN chars, and chars <= bytes.
    if s.len() <= CHARS_MIN {
        return Cow::Borrowed(s);
    }
    let chars = s.chars().count();
    st.max_chars = st.max_chars.max(chars);
    let Some(max) = max else {
        return Cow::Borrowed(s);
    };
    if chars <= max {
        return Cow::Borrowed(s);
    }
    let end = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
    st.char_cuts += 1;
    st.chars_omitted += chars - max;
    Cow::Owned(format!(
        "{} ... [{} chars omitted]",
        s[..end].trim_end(),
        chars - max
    ))
}

/// The first non-blank line of a multi-line string, noting how many lines followed.
pub(crate) fn one_line<'s>(s: &'s str, on: bool, st: &mut Stats) -> Cow<'s, str> {
    let trimmed = s.trim();
    if !on || !trimmed.contains('\n') {
        return Cow::Borrowed(s);
    }
    let first = trimmed.lines().next().unwrap_or("").trim_end();
    let rest = trimmed.lines().count() - 1;
    st.single_lined += 1;
    Cow::Owned(format!("{first} [+{rest} more lines]"))
}

/// Keeps the first `p.items` items of a list, adding a `... and X more` marker item.
pub(crate) fn cut_list<T>(
    items: Vec<T>,
    p: &Params,
    st: &mut Stats,
    marker: impl FnOnce(String) -> T,
) -> Vec<T> {
    st.max_items = st.max_items.max(items.len());
    match p.items {
        Some(max) if items.len() > max => {
            let dropped = items.len() - max;
            st.list_cuts += 1;
            st.items_omitted += dropped;
            let mut kept: Vec<T> = items.into_iter().take(max).collect();
            kept.push(marker(more_marker(dropped)));
            kept
        }
        _ => items,
    }
}

/// Applies the line, char and list cuts to every string and list of a JSON tree
/// (the task-specific `current_state`).
pub(crate) fn shrink_value(v: &Value, p: &Params, st: &mut Stats) -> Value {
    match v {
        Value::String(s) => Value::String(text(s, p, st).into_owned()),
        Value::Array(a) => {
            let items: Vec<Value> = a.iter().map(|x| shrink_value(x, p, st)).collect();
            Value::Array(cut_list(items, p, st, Value::String))
        }
        Value::Object(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, x) in m {
                out.insert(k.clone(), shrink_value(x, p, st));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The result of measuring one candidate.
pub(crate) trait Candidate {
    /// Whether it fits the target.
    fn fits(&self, target: usize) -> bool;
    /// Its token count (a lower bound when counting stopped early).
    fn tokens(&self) -> usize;
    /// Whether [`Candidate::tokens`] is exact.
    fn exact(&self) -> bool;
}

/// Finds (nearly) the largest `v` in `lo..=hi` whose candidate fits `target`, given
/// that larger values never cost fewer tokens.
///
/// `above` is the token count at `hi + 1` when already known to be over (then `hi`
/// is not probed first). Otherwise `hi` is probed, then `lo`; between them the search
/// interpolates when the upper count is exact, else extrapolates from two fitting
/// points (galloping from `lo` first), and falls back to bisection after a few
/// probes. It stops once a fitting candidate uses at least 97% of the target.
/// Returns the chosen value and its candidate, or `Err` with the candidate for `lo`
/// when even `lo` does not fit.
pub(crate) fn search<C: Candidate>(
    lo: usize,
    hi: usize,
    target: usize,
    above: Option<(usize, bool)>,
    mut probe: impl FnMut(usize) -> C,
) -> Result<(usize, C), C> {
    debug_assert!(lo <= hi);
    let (mut b, mut tb, mut b_exact) = match above {
        Some((tokens, exact)) => (hi + 1, tokens, exact),
        None => {
            let top = probe(hi);
            if top.fits(target) {
                return Ok((hi, top));
            }
            if lo == hi {
                return Err(top);
            }
            (hi, top.tokens(), top.exact())
        }
    };
    let bottom = probe(lo);
    if !bottom.fits(target) {
        return Err(bottom);
    }
    let (mut a, mut ca) = (lo, bottom);
    let mut prev: Option<(usize, usize)> = None;
    let mut probes = 0;
    while b - a > 1 && ca.tokens() * 100 < target * 97 {
        let ta = ca.tokens();
        let room = (target - ta) as f64;
        let guess = if probes >= 6 {
            a + (b - a) / 2
        } else if b_exact && tb > ta {
            a + ((b - a) as f64 * room / (tb - ta) as f64) as usize
        } else if let Some((pa, pta)) = prev.filter(|&(_, pta)| ta > pta) {
            a + ((a - pa) as f64 * room / (ta - pta) as f64) as usize
        } else {
            a.saturating_mul(2).max(a + 1)
        };
        let guess = guess.clamp(a + 1, b - 1);
        let c = probe(guess);
        probes += 1;
        if c.fits(target) {
            prev = Some((a, ta));
            a = guess;
            ca = c;
        } else {
            b = guess;
            tb = c.tokens().max(ta + 1);
            b_exact = c.exact();
        }
    }
    Ok((a, ca))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_and_tail_lines_with_marker() {
        let s: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let mut st = Stats::default();
        let out = cut_lines(&s, Some(3), &mut st);
        assert_eq!(
            out,
            "line 1\nline 2\nline 3\n# ... 94 lines omitted ...\nline 98\nline 99\nline 100\n"
        );
        assert_eq!((st.line_cuts, st.lines_omitted, st.max_lines), (1, 94, 100));
        let out = cut_lines(&s, Some(0), &mut st);
        assert_eq!(out, "# ... 100 lines omitted ...\n");
        let out = cut_lines("a\nb\nc", Some(1), &mut st);
        assert_eq!(out, "a\nb\nc");
        let out = cut_lines("a\nb\nc\nd", Some(1), &mut st);
        assert_eq!(out, "a\n# ... 2 lines omitted ...\nd");
    }

    #[test]
    fn chars_cut_on_char_boundaries() {
        let mut st = Stats::default();
        let s = "é".repeat(600);
        let out = cut_chars(&s, Some(500), &mut st);
        assert!(out.starts_with(&"é".repeat(500)));
        assert!(out.ends_with("... [100 chars omitted]"), "{out}");
        assert_eq!(cut_chars("short", Some(500), &mut st), "short");
    }

    #[test]
    fn lists_keep_first_items() {
        let mut st = Stats::default();
        let p = Params {
            items: Some(2),
            ..Params::default()
        };
        let out = cut_list(
            vec!["a", "b", "c", "d"]
                .into_iter()
                .map(String::from)
                .collect(),
            &p,
            &mut st,
            |m| m,
        );
        assert_eq!(out, ["a", "b", "... and 2 more"]);
        assert_eq!((st.list_cuts, st.items_omitted), (1, 2));
    }

    /// A measured candidate; counts over 2000 are cut short like `count_capped`.
    #[derive(Debug)]
    struct Fake(usize);
    impl Candidate for Fake {
        fn fits(&self, target: usize) -> bool {
            self.0 <= target
        }
        fn tokens(&self) -> usize {
            self.0.min(2000)
        }
        fn exact(&self) -> bool {
            self.0 <= 2000
        }
    }

    #[test]
    fn search_finds_largest_fitting_value_in_few_probes() {
        let cost = |v: usize| 50 + v * 3 + (v % 7);
        for target in [100, 537, 1000, 1999] {
            for above in [None, Some((2000, false))] {
                let mut probes = 0;
                let (v, c) = search(0, 5000, target, above, |v| {
                    probes += 1;
                    Fake(cost(v))
                })
                .unwrap();
                assert!(c.0 <= target);
                // Close to the best: within 3% of the target or the next value is over.
                assert!(c.0 * 100 >= target * 97 || cost(v + 1) > target);
                assert!(probes <= 7, "{probes} probes for {target}");
            }
        }
        assert!(search(10, 20, 5, None, Fake).is_err());
        assert_eq!(search(1, 2, 10, None, |v| Fake(v * 6)).unwrap().0, 1);
        assert_eq!(
            search(1, 2, 12, Some((18, true)), |v| Fake(v * 6))
                .unwrap()
                .0,
            2
        );
    }
}
