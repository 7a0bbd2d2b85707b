//! `memcmp` for plugins, 8 bytes at a time.
//!
//! Rust compares strings and byte slices of unknown length (`==` on `String`s, map keys,
//! sorting) by calling `memcmp`. On `wasm32-wasip2` that is wasi-libc's, which compares
//! one byte per loop iteration, and in a component every iteration also checks the epoch
//! (the host's deadline): over the plugin benchmark's 99 KB cargo output it was a quarter
//! of the cargo extractor's time in the component, against a fiftieth natively. Linking
//! the SDK replaces it with [`compare`]: a linker takes a symbol from an archive (libc)
//! only when no object defines it.
//!
//! [`compare`] is plain Rust over `u64` words, so the SDK's native tests check it against
//! the standard library's slice order; the symbol itself is only defined for WASM, where
//! it replaces the byte loop (natively the platform's `memcmp` is already vectorised).

/// The C `memcmp` of two equally long byte strings: negative, zero or positive as the
/// first differing byte (unsigned) of `a` is below, equal to or above `b`'s.
///
/// Only loads and integer compares: a slice comparison here would call `memcmp` itself.
#[inline(always)]
pub(crate) fn compare(a: &[u8], b: &[u8]) -> i32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    if n >= 8 {
        let mut i = 0;
        while i + 8 <= n {
            if let Some(d) = word_difference(a, b, i) {
                return d;
            }
            i += 8;
        }
        // The last 8 bytes, overlapping ones already known equal.
        if i < n {
            if let Some(d) = word_difference(a, b, n - 8) {
                return d;
            }
        }
        0
    } else {
        for i in 0..n {
            if a[i] != b[i] {
                return i32::from(a[i]) - i32::from(b[i]);
            }
        }
        0
    }
}

/// The difference of the first differing bytes of `a[i..i + 8]` and `b[i..i + 8]`.
#[inline(always)]
fn word_difference(a: &[u8], b: &[u8], i: usize) -> Option<i32> {
    let word = |s: &[u8]| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let (x, y) = (word(a), word(b));
    if x == y {
        return None;
    }
    // Little-endian: the lowest differing bit lies in the first differing byte.
    let j = i + ((x ^ y).trailing_zeros() / 8) as usize;
    Some(i32::from(a[j]) - i32::from(b[j]))
}

/// The C `memcmp`, replacing wasi-libc's in every plugin built with the SDK.
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes (the C contract).
#[cfg(target_arch = "wasm32")]
#[no_mangle]
pub unsafe extern "C" fn memcmp(
    a: *const core::ffi::c_void,
    b: *const core::ffi::c_void,
    n: usize,
) -> i32 {
    if n == 0 {
        // C allows dangling pointers with a zero length; a slice does not.
        return 0;
    }
    // SAFETY: the caller guarantees `n` readable bytes at each pointer.
    let (a, b) = unsafe {
        (
            core::slice::from_raw_parts(a.cast::<u8>(), n),
            core::slice::from_raw_parts(b.cast::<u8>(), n),
        )
    };
    compare(a, b)
}

#[cfg(test)]
mod tests {
    use super::compare;
    use std::cmp::Ordering;

    fn sign(d: i32) -> Ordering {
        d.cmp(&0)
    }

    /// Every length up to 40 (the byte loop, one word, overlapping words, several
    /// words), with the first difference at every position and of both signs.
    #[test]
    fn compare_orders_like_slices() {
        for n in 0..=40usize {
            let a: Vec<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
            assert_eq!(compare(&a, &a.clone()), 0, "equal, n = {n}");
            for at in 0..n {
                for delta in [1u8, 128, 255] {
                    let mut b = a.clone();
                    b[at] = b[at].wrapping_add(delta);
                    // Later bytes differ too: only the first difference may count.
                    for later in b.iter_mut().skip(at + 1) {
                        *later = !*later;
                    }
                    let want = a.cmp(&b);
                    assert_eq!(sign(compare(&a, &b)), want, "n = {n}, at = {at}, +{delta}");
                    assert_eq!(sign(compare(&b, &a)), want.reverse(), "n = {n}, at = {at}");
                    assert_eq!(
                        compare(&a, &b),
                        i32::from(a[at]) - i32::from(b[at]),
                        "the difference of the first differing bytes, n = {n}, at = {at}"
                    );
                }
            }
        }
    }
}
