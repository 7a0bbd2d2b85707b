//! Stable content hashes for what is persisted or compared across runs (file hashes in the
//! log, exact action signatures in the state, cache keys). SHA-256, whose output no Rust
//! release changes, unlike `std`'s `DefaultHasher`.
//!
//! Persisted values carry their algorithm (`sha256:<hex>`), so a value written by another
//! version is recognised as such instead of silently comparing unequal.

use sha2::{Digest, Sha256};

/// The tag of a current persisted hash.
pub const TAG: &str = "sha256:";

/// Hex digits kept of a tagged hash (128 bits: collisions are not a concern for
/// comparisons within one task).
const TAGGED_HEX: usize = 32;

/// The full SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `sha256:<first 128 bits as hex>` of `bytes`: the form persisted in logs and state.
pub fn tagged(bytes: &[u8]) -> String {
    tagged_parts(&[bytes])
}

/// [`tagged`] of the concatenation of `parts`, without building it.
pub fn tagged_parts(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    let mut s = String::with_capacity(TAG.len() + TAGGED_HEX);
    s.push_str(TAG);
    s.push_str(&hex(&h.finalize())[..TAGGED_HEX]);
    s
}

/// Whether `value` is a hash in the current persisted form ([`tagged`]).
pub fn is_tagged(value: &str) -> bool {
    value
        .strip_prefix(TAG)
        .is_some_and(|h| h.len() == TAGGED_HEX && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A [`std::hash::Hasher`] over SHA-256, for values that only offer `Hash` (an engine's
/// compatibility hash) but must give the same key in every build.
#[derive(Default)]
pub struct StableHasher(Sha256);

impl std::hash::Hasher for StableHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let d = self.0.clone().finalize();
        u64::from_le_bytes(d[..8].try_into().expect("a SHA-256 digest has 32 bytes"))
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors_do_not_change() {
        // FIPS 180-2 test vector: a change of algorithm or encoding fails here.
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(tagged(b"abc"), "sha256:ba7816bf8f01cfea414140de5dae2223");
        assert!(is_tagged(&tagged(b"")));
        assert!(!is_tagged("0123456789abcdef"), "a legacy SipHash value");
        assert!(!is_tagged("sha256:xyz"));
    }

    #[test]
    fn stable_hasher_is_deterministic() {
        use std::hash::{Hash, Hasher};
        let h = |v: &str| {
            let mut s = StableHasher::default();
            v.hash(&mut s);
            s.finish()
        };
        assert_eq!(h("engine"), h("engine"));
        assert_ne!(h("engine"), h("engines"));
    }
}
