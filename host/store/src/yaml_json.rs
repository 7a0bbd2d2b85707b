//! Files rewritten every step, written as JSON, which is YAML: `working_memory.yaml` and
//! `state.yaml`.
//!
//! libyaml's emitter (behind `serde_yaml_ng`) analyses every scalar before it writes it:
//! on a working memory of a few KB of file contents that took 80-170 us per write,
//! against 7-10 us for `serde_json`, and both files are rewritten at almost every step.
//!
//! A type written here must not hold an enum variant with data: JSON writes it as
//! `{"Variant": ...}`, which `serde_yaml_ng` reads only as a `!Variant` tag (so older
//! binaries, and any YAML reader of ours, could not read the file back). The tests read
//! real runs' `state.yaml` as a typed `TaskState` with `serde_yaml_ng` to catch that.
//! JSON is a subset of YAML 1.2 and libyaml reads it, so the file keeps its name and any
//! YAML reader (ours included, for files written before) still reads it.
//!
//! One gap is closed here: JSON allows a few characters raw that YAML does not (DEL, the
//! C1 controls, U+FEFF, U+FFFE, U+FFFF) or reads as line breaks inside a quoted string
//! (NEL, U+2028, U+2029: YAML 1.1 folds those); they are written as `\uXXXX` escapes,
//! which both read back as the same character.

use std::io;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};

/// `value` as indented JSON that every YAML reader reads back as `value`.
pub(crate) fn to_string<T: Serialize>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(4096);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, YamlSafe::default());
    value.serialize(&mut ser)?;
    // Ends with a newline, as a text file (and the block YAML written before) does.
    out.push(b'\n');
    // The serializer writes only UTF-8 (strings are `str`, escapes are ASCII).
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// Reads a file of either form: JSON (as [`to_string`] writes it) with `serde_json`,
/// anything else (block YAML written by earlier versions or by a person) with
/// `serde_yaml_ng`. A JSON error falls back to YAML, whose message is the one returned
/// (a `{ a: 1 }` flow mapping is YAML but not JSON).
pub(crate) fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let json_like = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{');
    if json_like {
        if let Ok(v) = serde_json::from_slice(bytes) {
            return Ok(v);
        }
    }
    serde_yaml_ng::from_slice(bytes).map_err(|e| e.to_string())
}

/// Whether `c` reads back as itself unescaped inside a YAML double-quoted string: YAML's
/// `c-printable` set, less U+FEFF (libyaml takes it for a byte order mark) and the
/// characters YAML 1.1 reads as line breaks. Characters below U+0020 never reach here:
/// JSON escapes them all.
fn yaml_printable(c: char) -> bool {
    !matches!(
        c,
        '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
    )
}

/// serde_json's pretty printer, escaping what YAML does not allow raw.
#[derive(Default)]
struct YamlSafe(PrettyFormatter<'static>);

impl Formatter for YamlSafe {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some((i, c)) = rest.char_indices().find(|&(_, c)| !yaml_printable(c)) {
            w.write_all(&rest.as_bytes()[..i])?;
            write!(w, "\\u{:04x}", c as u32)?;
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentforge_core::working_memory::{ItemKind, MemoryItem, WorkingMemory};
    use proptest::prelude::*;

    fn memory(contents: Vec<String>) -> WorkingMemory {
        let mut wm = WorkingMemory::with_capacity(10);
        wm.step = 7;
        wm.items = contents
            .into_iter()
            .enumerate()
            .map(|(i, content)| MemoryItem {
                kind: ItemKind::ActionResult,
                key: format!("read_file:src/{i}.rs"),
                step: i as u64,
                content,
                added_at: "2026-11-27T00:00:00.000Z".into(),
                expires_after_steps: (i % 2 == 0).then_some(3),
                pinned: i == 1,
            })
            .collect();
        wm
    }

    #[test]
    fn characters_yaml_forbids_raw_are_escaped_and_read_back() {
        let tricky = "a\u{7f}b\u{85}c\u{9f}d\u{feff}e\u{fffe}\u{ffff}\t\r\n\u{1b}[0m é 😀 \u{2028}";
        let wm = memory(vec![tricky.into(), "plain: not a key\n- nor a list".into()]);
        let text = to_string(&wm).unwrap();
        assert!(
            text.contains(r"a\u007fb\u0085c\u009fd\ufeffe\ufffe\uffff"),
            "{text}"
        );
        assert!(text.contains(r"\u2028"), "{text}");
        assert!(text.contains('😀') && text.contains('é'), "{text}");
        assert_eq!(serde_yaml_ng::from_str::<WorkingMemory>(&text).unwrap(), wm);
        assert_eq!(from_slice::<WorkingMemory>(text.as_bytes()).unwrap(), wm);
    }

    #[test]
    fn block_yaml_of_earlier_versions_still_reads() {
        let wm = memory(vec!["fn main() {}\n".into()]);
        let yaml = serde_yaml_ng::to_string(&wm).unwrap();
        assert_eq!(from_slice::<WorkingMemory>(yaml.as_bytes()).unwrap(), wm);
        // A flow mapping that is YAML but not JSON falls back to the YAML reader.
        let flow = "{max_items: 3, step: 2, items: []}";
        let back = from_slice::<WorkingMemory>(flow.as_bytes()).unwrap();
        assert_eq!((back.max_items, back.step), (3, 2));
        let err = from_slice::<WorkingMemory>(b"{max_items: [").unwrap_err();
        assert!(!err.is_empty());
    }

    proptest! {
        #[test]
        fn any_memory_round_trips_through_both_readers(
            contents in proptest::collection::vec(
                prop_oneof![
                    any::<String>(),
                    // The characters YAML treats apart, often and next to line breaks.
                    "([a -~]|\n|\r|\t|\u{7f}|\u{85}|\u{a0}|\u{2028}|\u{2029}|\u{feff}|\u{fffd}|\u{ffff}){0,40}",
                ],
                0..4,
            )
        ) {
            let wm = memory(contents);
            let text = to_string(&wm).unwrap();
            prop_assert_eq!(&serde_yaml_ng::from_str::<WorkingMemory>(&text).unwrap(), &wm);
            prop_assert_eq!(&from_slice::<WorkingMemory>(text.as_bytes()).unwrap(), &wm);
        }
    }
}
