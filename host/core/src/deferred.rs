//! Values made on first use: a run loads the plugins of a kind (extractors, gates, guards)
//! when a step first needs that kind, and each task type when a task of that type is first
//! opened, so `resume` reaches its next model request having loaded only the task type it
//! renders the prompt from.

use std::sync::{Mutex, OnceLock};

/// Makes the value.
type Make<T, E> = Box<dyn FnOnce() -> Result<T, E> + Send>;

/// Making the value panicked on an earlier use, so there is no value and nothing left to
/// run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a plugin registry's loading failed earlier (it panicked)")]
pub struct FillPanicked;

/// A value ready now or made on first [`Deferred::get`] (a registry of one plugin kind, a
/// task type); `E` is what making it fails with.
pub struct Deferred<T, E> {
    ready: OnceLock<Result<T, E>>,
    pending: Mutex<Option<Make<T, E>>>,
}

impl<T, E: Clone + From<FillPanicked>> Deferred<T, E> {
    /// A value that is ready already.
    pub fn ready(value: T) -> Deferred<T, E> {
        Deferred {
            ready: OnceLock::from(Ok(value)),
            pending: Mutex::new(None),
        }
    }

    /// A registry that starts as `base` and is completed by `fill` on first use.
    pub fn later(base: T, fill: impl FnOnce(&mut T) -> Result<(), E> + Send + 'static) -> Self
    where
        T: Send + 'static,
    {
        Deferred::on_first_use(move || {
            let mut value = base;
            fill(&mut value).map(|()| value)
        })
    }

    /// A value made by `make` on first use.
    pub fn on_first_use(make: impl FnOnce() -> Result<T, E> + Send + 'static) -> Self {
        Deferred {
            ready: OnceLock::new(),
            pending: Mutex::new(Some(Box::new(make))),
        }
    }

    /// Whether the value has been made, or failed to be (for tests and `--verbose` output).
    pub fn is_loaded(&self) -> bool {
        self.ready.get().is_some()
    }

    /// The value, making it first if needed. A failure is kept and returned again on every
    /// later call (a broken built-in does not heal).
    pub fn get(&self) -> Result<&T, E> {
        self.ready
            .get_or_init(|| {
                // The lock only serialises the one fill; a panic inside it leaves the
                // registry failed, not half-filled.
                let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                match pending.take() {
                    Some(make) => make(),
                    None => Err(FillPanicked.into()),
                }
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The value for changes at set-up, making it first if needed.
    pub fn get_mut(&mut self) -> Result<&mut T, E> {
        self.get()?;
        match self.ready.get_mut() {
            Some(Ok(value)) => Ok(value),
            Some(Err(e)) => Err(e.clone()),
            None => unreachable!("`get` initialised the registry"),
        }
    }
}

impl<T: Default, E: Clone + From<FillPanicked>> Default for Deferred<T, E> {
    fn default() -> Self {
        Deferred::ready(T::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[derive(Debug, Clone, PartialEq)]
    enum Failed {
        Fill(&'static str),
        Panicked,
    }
    impl From<FillPanicked> for Failed {
        fn from(_: FillPanicked) -> Self {
            Failed::Panicked
        }
    }

    #[test]
    fn fills_once_on_first_use_and_keeps_a_failure() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let d: Deferred<_, Failed> = Deferred::later(vec![1], move |v: &mut Vec<i32>| {
            c.fetch_add(1, Ordering::SeqCst);
            v.push(2);
            Ok(())
        });
        assert!(!d.is_loaded());
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(d.get().unwrap(), &vec![1, 2]);
        assert_eq!(d.get().unwrap(), &vec![1, 2]);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(d.is_loaded());

        let broken: Deferred<Vec<i32>, Failed> =
            Deferred::later(Vec::new(), |_| Err(Failed::Fill("boom")));
        assert_eq!(broken.get().unwrap_err(), Failed::Fill("boom"));
        assert_eq!(broken.get().unwrap_err(), Failed::Fill("boom"));
        // Completed, with its failure kept (the fill is not run again).
        assert!(broken.is_loaded());

        // A fill that panics leaves the registry failed, not half-filled or refilled.
        let panics: Deferred<Vec<i32>, Failed> = Deferred::later(Vec::new(), |_| panic!("fill"));
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| panics.get().is_ok()));
        assert!(first.is_err(), "the panic reaches the first caller");
        assert_eq!(panics.get().unwrap_err(), Failed::Panicked);
    }

    #[test]
    fn concurrent_first_uses_fill_once() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let d: Deferred<_, Failed> = Deferred::later(0u32, move |v: &mut u32| {
            c.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            *v = 7;
            Ok(())
        });
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| assert_eq!(*d.get().unwrap(), 7));
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
