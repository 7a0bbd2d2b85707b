//! Parsed copies of the task files every step reads back (`task.yaml`, `state.yaml`,
//! the working memory, the log's tail), keyed by the files' exact bytes.
//!
//! A step still reads each file from the disk; only when the bytes are those it parsed
//! (or wrote) before does it skip the parse and clone the value. What a step sees is
//! therefore always what is on the disk, and an edit by anyone else simply misses.

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::sync::Mutex;

/// How many parsed log lines are kept (more than a step's tail reads).
const MAX_LINES: usize = 96;

/// One file's bytes and its parsed value.
type Entry<T> = Mutex<Option<(Vec<u8>, T)>>;

/// Log lines and their records (boxed `ActionRecord<S>`), of the record type named.
type Lines = (Option<TypeId>, VecDeque<(String, Box<dyn Any + Send>)>);

/// The parsed copies of one task folder's files.
#[derive(Default)]
pub(crate) struct ParseCache {
    spec: Entry<agentforge_core::task::TaskSpec>,
    state: Entry<agentforge_core::state::TaskState>,
    memory: Entry<agentforge_core::working_memory::WorkingMemory>,
    /// Log lines and their records, of one record type at a time (the last asked for).
    lines: Mutex<Lines>,
}

impl std::fmt::Debug for ParseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParseCache").finish_non_exhaustive()
    }
}

/// The value of `bytes`: the cached one when `bytes` are the cached bytes, else `parse`'s
/// (then cached).
fn get_or_parse<T: Clone, E>(
    entry: &Entry<T>,
    bytes: &[u8],
    parse: impl FnOnce(&[u8]) -> Result<T, E>,
) -> Result<T, E> {
    if let Some((cached, value)) = &*entry.lock().unwrap_or_else(|p| p.into_inner()) {
        if cached == bytes {
            return Ok(value.clone());
        }
    }
    let value = parse(bytes)?;
    *entry.lock().unwrap_or_else(|p| p.into_inner()) = Some((bytes.to_vec(), value.clone()));
    Ok(value)
}

impl ParseCache {
    /// `task.yaml`'s value.
    pub(crate) fn spec<E>(
        &self,
        bytes: &[u8],
        parse: impl FnOnce(&[u8]) -> Result<agentforge_core::task::TaskSpec, E>,
    ) -> Result<agentforge_core::task::TaskSpec, E> {
        get_or_parse(&self.spec, bytes, parse)
    }

    /// `state.yaml`'s value.
    pub(crate) fn state<E>(
        &self,
        bytes: &[u8],
        parse: impl FnOnce(&[u8]) -> Result<agentforge_core::state::TaskState, E>,
    ) -> Result<agentforge_core::state::TaskState, E> {
        get_or_parse(&self.state, bytes, parse)
    }

    /// Remembers the bytes just written for `state`.
    pub(crate) fn wrote_state(&self, bytes: &[u8], state: &agentforge_core::state::TaskState) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((bytes.to_vec(), state.clone()));
    }

    /// The working memory's value.
    pub(crate) fn memory<E>(
        &self,
        bytes: &[u8],
        parse: impl FnOnce(&[u8]) -> Result<agentforge_core::working_memory::WorkingMemory, E>,
    ) -> Result<agentforge_core::working_memory::WorkingMemory, E> {
        get_or_parse(&self.memory, bytes, parse)
    }

    /// Remembers the bytes just written for `memory`.
    pub(crate) fn wrote_memory(
        &self,
        bytes: &[u8],
        memory: &agentforge_core::working_memory::WorkingMemory,
    ) {
        *self.memory.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((bytes.to_vec(), memory.clone()));
    }

    /// The record of the log line `line`, as `R`.
    pub(crate) fn line<R: Clone + Send + 'static, E>(
        &self,
        line: &str,
        parse: impl FnOnce(&str) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.0 != Some(TypeId::of::<R>()) {
            *lines = (Some(TypeId::of::<R>()), VecDeque::new());
        }
        // Newest first: a step asks for the lines it parsed last step, and one more.
        let hit = lines
            .1
            .iter()
            .rev()
            .find(|(l, _)| l.len() == line.len() && l == line)
            .and_then(|(_, r)| r.downcast_ref::<R>().cloned());
        if let Some(record) = hit {
            return Ok(record);
        }
        let record = parse(line)?;
        if lines.1.len() >= MAX_LINES {
            lines.1.pop_front();
        }
        lines
            .1
            .push_back((line.to_string(), Box::new(record.clone())));
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
        let entry: Entry<String> = Mutex::new(None);
        assert_eq!(get_or_parse(&entry, b"a", &mut parse).unwrap(), "a");
        assert_eq!(get_or_parse(&entry, b"a", &mut parse).unwrap(), "a");
        assert_eq!(get_or_parse(&entry, b"b", &mut parse).unwrap(), "b");
        assert_eq!(parses, 2);
        let line = |l: &str| cache.line::<String, ()>(l, |l| Ok(l.to_uppercase()));
        assert_eq!(line("x").unwrap(), "X");
        assert_eq!(line("x").unwrap(), "X");
        // Another record type for the same line is parsed as that type.
        let n = cache.line::<usize, ()>("x", |l| Ok(l.len())).unwrap();
        assert_eq!(n, 1);
    }
}
