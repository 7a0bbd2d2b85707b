//! Parsed copies of the task files every step reads back (`task.yaml`, `state.yaml`,
//! the working memory, the log's tail), keyed by the files' exact bytes.
//!
//! A step still reads each file from the disk; only when the bytes are those it parsed
//! (or wrote) before does it skip the parse and clone the value. What a step sees is
//! therefore always what is on the disk, and an edit by anyone else simply misses.

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// How many parsed log lines are kept (more than a step's tail reads).
const MAX_LINES: usize = 96;

/// One file's parsed value, with the bytes it was parsed from (or written as).
pub(crate) struct Parsed<T>(Mutex<Option<(Vec<u8>, T)>>);

impl<T> Default for Parsed<T> {
    fn default() -> Self {
        Parsed(Mutex::new(None))
    }
}

impl<T: Clone> Parsed<T> {
    /// The value of `bytes`: the kept one when `bytes` are the kept bytes, else
    /// `parse`'s (then kept).
    pub(crate) fn get_or_parse<E>(
        &self,
        bytes: &[u8],
        parse: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some((kept, value)) = &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            if kept == bytes {
                return Ok(value.clone());
            }
        }
        let value = parse(bytes)?;
        self.wrote(bytes, &value);
        Ok(value)
    }

    /// The bytes kept for `value`, when `value` is the value kept.
    pub(crate) fn bytes_of(&self, value: &T) -> Option<Vec<u8>>
    where
        T: PartialEq,
    {
        match &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((bytes, kept)) if kept == value => Some(bytes.clone()),
            _ => None,
        }
    }

    /// Keeps `value` as the value of `bytes` (just written, or just parsed).
    pub(crate) fn wrote(&self, bytes: &[u8], value: &T) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((bytes.to_vec(), value.clone()));
    }
}

/// Log lines and their records (boxed `Arc<ActionRecord<S>>`), of the record type named.
type Lines = (Option<TypeId>, VecDeque<(Box<[u8]>, Box<dyn Any + Send>)>);

/// The parsed copies of one task folder's files.
#[derive(Default)]
pub(crate) struct ParseCache {
    /// `task.yaml`.
    pub(crate) spec: Parsed<agentforge_core::task::TaskSpec>,
    /// `state.yaml`.
    pub(crate) state: Parsed<agentforge_core::state::TaskState>,
    /// The working memory.
    pub(crate) memory: Parsed<agentforge_core::working_memory::WorkingMemory>,
    /// Log lines and their records, of one record type at a time (the last asked for).
    lines: Mutex<Lines>,
}

impl std::fmt::Debug for ParseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParseCache").finish_non_exhaustive()
    }
}

impl ParseCache {
    /// The record of the log line `line` (its bytes, as in the file), as `R`: shared with
    /// the cache, because a step reads a few dozen records of which it changes none.
    pub(crate) fn line<R: Send + Sync + 'static, E>(
        &self,
        line: &[u8],
        parse: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<Arc<R>, E> {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.0 != Some(TypeId::of::<R>()) {
            *lines = (Some(TypeId::of::<R>()), VecDeque::new());
        }
        // Newest first: a step asks for the lines it parsed last step, and one more.
        let hit = lines
            .1
            .iter()
            .rev()
            .find(|(l, _)| l.len() == line.len() && **l == *line)
            .and_then(|(_, r)| r.downcast_ref::<Arc<R>>().cloned());
        if let Some(record) = hit {
            return Ok(record);
        }
        let record = Arc::new(parse(line)?);
        if lines.1.len() >= MAX_LINES {
            lines.1.pop_front();
        }
        lines.1.push_back((line.into(), Box::new(record.clone())));
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_bytes_are_parsed_again() {
        let cache = ParseCache::default();
        let mut parses = 0;
        let mut parse = |b: &[u8]| -> Result<String, ()> {
            parses += 1;
            Ok(String::from_utf8(b.to_vec()).unwrap())
        };
        let entry: Parsed<String> = Parsed::default();
        assert_eq!(entry.get_or_parse(b"a", &mut parse).unwrap(), "a");
        assert_eq!(entry.get_or_parse(b"a", &mut parse).unwrap(), "a");
        assert_eq!(entry.get_or_parse(b"b", &mut parse).unwrap(), "b");
        assert_eq!(parses, 2);
        let mut line_parses = 0;
        let mut line = |l: &[u8]| {
            cache.line::<String, ()>(l, |l| {
                line_parses += 1;
                Ok(String::from_utf8_lossy(l).to_uppercase())
            })
        };
        assert_eq!(*line(b"x").unwrap(), "X");
        assert_eq!(*line(b"x").unwrap(), "X");
        assert_eq!(*line(b"y").unwrap(), "Y");
        assert_eq!(line_parses, 2);
        // Another record type for the same line is parsed as that type.
        let n = cache.line::<usize, ()>(b"x", |l| Ok(l.len())).unwrap();
        assert_eq!(*n, 1);
    }
}
