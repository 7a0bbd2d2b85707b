//! Working memory: a bounded rolling buffer of context the agent asked for (seed 001).
//!
//! Items are evicted oldest first when the buffer is full, except pinned ones, and an
//! item with `expires_after_steps` disappears that many steps after it was added.

use serde::{Deserialize, Serialize};

/// Default number of items kept.
pub const DEFAULT_MAX_ITEMS: usize = 5;

/// What kind of item this is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// The result of an action.
    ActionResult,
    /// Content loaded with `load_context`.
    LoadedContext,
}

/// One item of working memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryItem {
    /// Item kind.
    #[serde(rename = "type")]
    pub kind: ItemKind,
    /// Key identifying the content (`full_file:src/lib.rs`); a new item with the same key replaces the old.
    pub key: String,
    /// Step at which it was added.
    pub step: u64,
    /// The content shown to the model.
    pub content: String,
    /// RFC 3339 time it was added.
    pub added_at: String,
    /// Removed this many steps after `step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_after_steps: Option<u64>,
    /// Never evicted by FIFO.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
}

/// The rolling buffer, as stored in `working_memory.yaml`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkingMemory {
    /// Capacity.
    pub max_items: usize,
    /// The step after which it was saved (0: before any step, or an older file). On
    /// resume, a memory stamped before the log's last step was lost in a power cut
    /// and is cleared rather than shown stale.
    #[serde(default)]
    pub step: u64,
    /// Items, oldest first.
    #[serde(default)]
    pub items: Vec<MemoryItem>,
}

impl Default for WorkingMemory {
    fn default() -> Self {
        WorkingMemory {
            max_items: DEFAULT_MAX_ITEMS,
            step: 0,
            items: Vec::new(),
        }
    }
}

impl WorkingMemory {
    /// An empty buffer of the given capacity.
    pub fn with_capacity(max_items: usize) -> WorkingMemory {
        WorkingMemory {
            max_items: max_items.max(1),
            step: 0,
            items: Vec::new(),
        }
    }

    /// Adds an item, replacing one with the same key, then evicts to capacity.
    pub fn push(&mut self, item: MemoryItem) {
        self.items.retain(|i| i.key != item.key);
        self.items.push(item);
        while self.items.len() > self.max_items {
            // Oldest unpinned goes first; if all are pinned, the oldest pinned goes.
            let idx = self.items.iter().position(|i| !i.pinned).unwrap_or(0);
            self.items.remove(idx);
        }
    }

    /// Drops items whose lifetime has passed at `current_step`.
    pub fn expire(&mut self, current_step: u64) {
        self.items.retain(|i| match i.expires_after_steps {
            Some(n) => current_step < i.step + n,
            None => true,
        });
    }

    /// Removes the item with `key`; returns whether one was there.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.items.len();
        self.items.retain(|i| i.key != key);
        before != self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, step: u64) -> MemoryItem {
        MemoryItem {
            kind: ItemKind::LoadedContext,
            key: key.into(),
            step,
            content: format!("content of {key}"),
            added_at: String::new(),
            expires_after_steps: None,
            pinned: false,
        }
    }

    #[test]
    fn fifo_eviction_spares_pinned_items() {
        let mut wm = WorkingMemory::with_capacity(3);
        let mut pinned = item("pinned", 0);
        pinned.pinned = true;
        wm.push(pinned);
        for s in 1..=5 {
            wm.push(item(&format!("k{s}"), s));
        }
        let keys: Vec<_> = wm.items.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["pinned", "k4", "k5"]);
    }

    #[test]
    fn same_key_replaces() {
        let mut wm = WorkingMemory::default();
        wm.push(item("a", 1));
        wm.push(item("a", 2));
        assert_eq!(wm.items.len(), 1);
        assert_eq!(wm.items[0].step, 2);
    }

    #[test]
    fn items_expire_after_their_steps() {
        let mut wm = WorkingMemory::default();
        let mut i = item("a", 4);
        i.expires_after_steps = Some(3);
        wm.push(i);
        wm.expire(6);
        assert_eq!(wm.items.len(), 1);
        wm.expire(7);
        assert!(wm.items.is_empty());
    }
}
