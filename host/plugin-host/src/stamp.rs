//! Remembered component digests: a folder plugin's SHA-256 (its compile-cache key) kept
//! in the cache folder with the file's stamp (device, inode, size, modification and
//! change times), so a warm start that finds the same stamp neither reads nor hashes the
//! component again.
//!
//! A stamp stands for the bytes only if no write could have kept it: the change time
//! (`ctime`) is set by the kernel on every write and cannot be set by a user, and a
//! digest is only remembered when the file's times are [`SETTLED`] older than the moment
//! its bytes were read (and its stamp did not change while they were), so a later write
//! (even of the same size, within the file system's timestamp granularity) gets another
//! change time. Records live in the host's private cache folder next to the compiled
//! code they select, and are trusted no more than it is.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use sha2::Digest as _;

/// How much older than the read a file's times must be for its digest to be remembered:
/// beyond any file system's timestamp granularity (FAT's 2 s included).
pub(crate) const SETTLED: Duration = Duration::from_secs(3);

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of `meta` (from `stat`/`lstat`).
    pub(crate) fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    fn line(&self, path: &Path, digest: &[u8; 32]) -> String {
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "agentforge-stamp-1 {} {} {} {} {} {} {} {hex} {}\n",
            self.dev,
            self.ino,
            self.size,
            self.mtime.0,
            self.mtime.1,
            self.ctime.0,
            self.ctime.1,
            path.display()
        )
    }

    /// Whether both times are at least [`SETTLED`] before `read_at`.
    fn settled(&self, read_at: SystemTime) -> bool {
        let Ok(now) = read_at.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        let limit = now.saturating_sub(SETTLED);
        [self.mtime, self.ctime].iter().all(|&(s, ns)| {
            u64::try_from(s)
                .is_ok_and(|s| Duration::new(s, ns.clamp(0, 999_999_999) as u32) < limit)
        })
    }
}

/// The record file of the component at `path` (an absolute, resolved path).
fn record(cache: &Path, path: &Path) -> std::path::PathBuf {
    let h = sha2::Sha256::digest(path.as_os_str().as_encoded_bytes());
    let key: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    cache.join(format!("{key}.stamp"))
}

/// The digest remembered for `path` if its record matches `stamp` exactly.
pub(crate) fn remembered(cache: &Path, path: &Path, stamp: &Stamp) -> Option<[u8; 32]> {
    let text = std::fs::read_to_string(record(cache, path)).ok()?;
    let hex = text.split(' ').nth(8)?;
    // The whole line must be the one this stamp would write: same file, same times.
    let mut digest = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, b) in digest.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    (text == stamp.line(path, &digest)).then_some(digest)
}

/// Remembers `digest` for `path` when the bytes it was computed from are surely the ones
/// `stamp` stands for: `before` and `after` (stamps taken around the read) agree and the
/// file's times are settled at `read_at`. Best effort, like the cache itself.
pub(crate) fn remember(
    cache: &Path,
    path: &Path,
    before: &Stamp,
    after: &Stamp,
    read_at: SystemTime,
    digest: &[u8; 32],
) {
    if before != after || !before.settled(read_at) {
        return;
    }
    let file = record(cache, path);
    if remembered(cache, path, before) == Some(*digest) {
        return;
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = file.with_extension(format!("tmp{}-{n}", std::process::id()));
    if std::fs::write(&tmp, before.line(path, digest)).is_ok()
        && std::fs::rename(&tmp, &file).is_err()
    {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn old_stamp() -> Stamp {
        Stamp {
            dev: 1,
            ino: 42,
            size: 1000,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_000, 7),
        }
    }

    #[test]
    fn a_digest_is_served_only_for_the_exact_stamp_it_was_read_with() {
        let tmp = tempfile::tempdir().unwrap();
        let (cache, path) = (tmp.path(), Path::new("/plugins/x/x.wasm"));
        let s = old_stamp();
        let d = [7u8; 32];
        remember(cache, path, &s, &s, SystemTime::now(), &d);
        assert_eq!(remembered(cache, path, &s), Some(d));
        // Any other version of the file, or another file, finds nothing.
        for other in [
            Stamp { size: 1001, ..s },
            Stamp { ino: 43, ..s },
            Stamp { dev: 2, ..s },
            Stamp {
                ctime: (1_700_000_000, 8),
                ..s
            },
            Stamp {
                mtime: (1_700_000_001, 5),
                ..s
            },
        ] {
            assert_eq!(remembered(cache, path, &other), None, "{other:?}");
        }
        assert_eq!(remembered(cache, Path::new("/plugins/y/x.wasm"), &s), None);
        // A damaged record is no record.
        std::fs::write(record(cache, path), "agentforge-stamp-1 1 42").unwrap();
        assert_eq!(remembered(cache, path, &s), None);
    }

    #[test]
    fn a_file_written_recently_or_during_the_read_is_not_remembered() {
        let tmp = tempfile::tempdir().unwrap();
        let (cache, path) = (tmp.path(), Path::new("/plugins/x/x.wasm"));
        let now = SystemTime::now();
        let secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        // Changed a second ago: a write within the timestamp granularity could still
        // leave the same stamp.
        let fresh = Stamp {
            ctime: (secs - 1, 0),
            ..old_stamp()
        };
        remember(cache, path, &fresh, &fresh, now, &[1; 32]);
        assert_eq!(remembered(cache, path, &fresh), None);
        // Changed while it was read.
        let s = old_stamp();
        let during = Stamp { size: 999, ..s };
        remember(cache, path, &s, &during, now, &[1; 32]);
        assert_eq!(remembered(cache, path, &s), None);
    }

    #[test]
    fn a_real_file_is_stamped_by_inode_size_and_times() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("c.wasm");
        std::fs::write(&p, b"\0asm one").unwrap();
        let a = Stamp::of(&std::fs::symlink_metadata(&p).unwrap());
        std::fs::write(&p, b"\0asm two!").unwrap();
        let b = Stamp::of(&std::fs::symlink_metadata(&p).unwrap());
        assert_ne!(a, b);
        assert_eq!((a.ino, a.dev), (b.ino, b.dev));
    }
}
