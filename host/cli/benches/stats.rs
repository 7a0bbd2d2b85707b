//! Summaries the benches print: every figure is min / median / max over several runs, so
//! noise can be told from a regression, and a ratio to native is computed pair by pair
//! (each plugin sample against the native sample taken right before it).

#![allow(dead_code, reason = "shared by the benches; each uses part of it")]

use std::fmt;
use std::time::Duration;

/// Runs per figure (at least 5, as the README's table promises).
pub const RUNS: usize = 7;

/// Min, median and max of a set of samples.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    /// The summary of `samples` (not empty).
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Summary {
        let mut v: Vec<f64> = samples.into_iter().collect();
        assert!(!v.is_empty(), "a figure needs samples");
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Summary {
            min: v[0],
            median,
            max: v[n - 1],
            n,
        }
    }

    /// The summary of durations, in seconds.
    pub fn of_times(samples: &[Duration]) -> Summary {
        Summary::of(samples.iter().map(Duration::as_secs_f64))
    }

    /// The summary of `plugin / native` for each pair.
    pub fn of_ratios(pairs: &[(Duration, Duration)]) -> Summary {
        Summary::of(
            pairs
                .iter()
                .map(|(native, plugin)| plugin.as_secs_f64() / native.as_secs_f64()),
        )
    }

    /// Formats as durations.
    pub fn time(self) -> Timed {
        Timed(self)
    }
}

/// A [`Summary`] of ratios: `1.08x (min 1.02x, max 1.31x, n=15)`.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.2}x (min {:.2}x, max {:.2}x, n={})",
            self.median, self.min, self.max, self.n
        )
    }
}

/// A [`Summary`] of seconds shown as durations: `14.3 ms (min 13.9 ms, max 15.2 ms, n=7)`.
pub struct Timed(Summary);

impl fmt::Display for Timed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        write!(
            f,
            "{} (min {}, max {}, n={})",
            human(s.median),
            human(s.min),
            human(s.max),
            s.n
        )
    }
}

/// `seconds` in the unit that keeps three significant digits readable.
pub fn human(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.1} us", seconds * 1e6)
    }
}

/// CPU time the calling thread has used so far: it leaves out the time the thread waits
/// (for the log's fsync, or descheduled), though another process on the other core
/// still slows it through the shared caches.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The median of `samples` (for a run's figure made of many calls).
pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The machine's load, printed before and after a bench: on a shared 2-core machine a
/// figure taken while something else ran is slower, and the reader should see that.
pub fn print_load(when: &str) {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| {
            let f: Vec<&str> = l.split_whitespace().take(3).collect();
            (f.len() == 3).then(|| f.join(" "))
        })
        .unwrap_or_else(|| "unknown".to_string());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("machine {when}: load average (1, 5, 15 min) {load} on {cpus} CPUs");
}
