//! Test fixture for the host's sandbox: misbehaves on purpose, chosen by the tool name.
//! Not a plugin to install (it has no `plugin.toml`); the host's tests give it one.
//!
//! Tools: `loop` (endless), `bomb` (eats memory), `panic`, `recurse` (unbounded
//! recursion), `shout` (floods stderr), `flood` (returns megabytes of facts),
//! `read:<path>` (asks the host for a file; the answer or the refusal becomes the fact),
//! `print` (one line to stdout and one to stderr, then a fact), `clock` (reads the
//! monotonic clock), `tcp` / `udp` / `dns` (tries the network; the error becomes the
//! fact), `exit` (`std::process::exit(3)`, which WASI reports as 1), `escape` (a fact full of terminal escapes
//! and control characters), `many` (100,000 tiny facts, most of them duplicates),
//! `remember` (counts its calls in a static and leaves 6 MiB of its memory dirty: a fresh
//! instance must see neither).
//!
//! Its config (`[config]` in the manifest) can make `handles()` panic: `panic_in =
//! "handles"`.

use agentforge_plugin_sdk::{
    config, export_extractor, fact, log, read_file, run_check, Category, Extractor, Fact, Input,
    LogLevel,
};

/// Recurses until the call stack runs out; `black_box` keeps it from becoming a loop.
fn dive(depth: u64) -> u64 {
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    std::hint::black_box(dive(depth + 1)).wrapping_add(1)
}

/// The misbehaving extractor.
pub struct Hostile;

impl Extractor for Hostile {
    fn handles() -> Vec<String> {
        if config().get("panic_in").and_then(|v| v.as_str()) == Some("handles") {
            panic!("hostile plugin refuses to say what it handles");
        }
        vec!["*".into()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        match input.tool.as_str() {
            "loop" => {
                // Endless, but not optimised away: only fuel or the deadline stop it.
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            "panic" => panic!("hostile plugin gives up on {:?}", input.tool),
            "recurse" => vec![fact(Category::Inference, dive(0).to_string(), "recurse")],
            "shout" => loop {
                eprintln!("{}", "AAAA".repeat(256));
            },
            "flood" => (0..40_000)
                .map(|i| fact(Category::Inference, format!("{i:0>100}"), "flood"))
                .collect(),
            // Blocks in a WASI clock wait (not guest code: no epoch tick interrupts it).
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(600));
                vec![fact(Category::Inference, "slept", "sleep")]
            }
            "print" => {
                println!("hostile plugin prints to stdout");
                eprintln!("hostile plugin prints to stderr");
                vec![fact(Category::Inference, "printed", "print")]
            }
            "clock" => {
                let start = std::time::Instant::now();
                let mut n = 0u64;
                for i in 0..1000u64 {
                    n = std::hint::black_box(n.wrapping_add(i));
                }
                let since = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() > 0)
                    .unwrap_or(false);
                vec![fact(
                    Category::Inference,
                    format!(
                        "clock ok: {} {n} {since}",
                        start.elapsed().as_nanos() < u128::MAX
                    ),
                    "clock",
                )]
            }
            "tcp" => {
                let r = std::net::TcpStream::connect(("127.0.0.1", 9));
                vec![fact(
                    Category::Inference,
                    format!("tcp: {:?}", r.map(|_| ())),
                    "tcp",
                )]
            }
            "udp" => {
                let r = std::net::UdpSocket::bind(("127.0.0.1", 0));
                vec![fact(
                    Category::Inference,
                    format!("udp: {:?}", r.map(|_| ())),
                    "udp",
                )]
            }
            "dns" => {
                use std::net::ToSocketAddrs;
                let r = ("example.com", 80).to_socket_addrs().map(|a| a.count());
                vec![fact(Category::Inference, format!("dns: {r:?}"), "dns")]
            }
            "exit" => std::process::exit(3),
            "escape" => {
                log(
                    LogLevel::Warn,
                    "\u{1b}[2J\u{1b}]0;pwned\u{7}fake\nwarning: forged line\u{0}\u{202e}",
                );
                vec![fact(
                    Category::Error,
                    "\u{1b}[31mred\u{1b}[0m\u{0}nul\r\nerror: forged\u{202e}bidi\u{9b}31m",
                    "escape",
                )]
            }
            "remember" => {
                // A static in the data segment, and zeroed heap memory (`calloc` trusts
                // memory the instance has just grown to be zero): a previous call's
                // count or bytes show here if the host reused its memory uncleaned.
                static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let before = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut heap = vec![0u8; 6 << 20];
                let stale = heap.iter().filter(|&&b| b != 0).count();
                heap.fill(0xab);
                std::mem::forget(std::hint::black_box(heap));
                vec![fact(
                    Category::Inference,
                    format!("calls before: {before}; stale bytes: {stale}"),
                    "remember",
                )]
            }
            "many" => (0..100_000u32)
                .map(|i| fact(Category::Inference, format!("f{}", i % 1000), "many"))
                .collect(),
            // `checks:<n>:<name>`: asks the host to run check `name` n times.
            tool if tool.starts_with("checks:") => {
                let mut parts = tool["checks:".len()..].splitn(2, ':');
                let n: u32 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
                let name = parts.next().unwrap_or("");
                let mut ran = 0;
                let mut last_error = String::new();
                for _ in 0..n {
                    match run_check(name) {
                        Ok(_) => ran += 1,
                        Err(e) => last_error = e,
                    }
                }
                vec![fact(
                    Category::Inference,
                    format!("ran {ran}; last error: {last_error}"),
                    tool,
                )]
            }
            tool if tool.starts_with("read:") => {
                let text = match read_file(&tool["read:".len()..]) {
                    Ok(text) => format!("read ok: {text}"),
                    Err(e) => format!("read error: {e}"),
                };
                vec![fact(Category::Inference, text, tool)]
            }
            _ => vec![fact(
                Category::Inference,
                "hostile plugin was nice",
                &input.tool,
            )],
        }
    }
}

export_extractor!(Hostile);
