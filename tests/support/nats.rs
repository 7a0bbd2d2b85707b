//! A real `nats-server -js` for the tests and benches that need one: where it is,
//! whether a test can run without it (under `CI=true` it fails, elsewhere it says it is
//! skipped), free ports on 127.0.0.1, and one server process killed when dropped.
//!
//! The workspace's tests reach it as `support::nats`; the fleet crate's test and bench
//! include it by path:
//!
//! ```ignore
//! #[path = "../../../tests/support/nats.rs"]
//! mod nats;
//! ```
// Every includer uses only part of it.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `nats-server` on PATH, or else in /usr/sbin or /usr/local/sbin (where Debian's
/// package puts it, which is not on every user's PATH).
pub fn find_nats_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// Whether `nats-server` is here. Under `CI=true` (`.ci/run` installs it) a missing one
/// fails the test; elsewhere the test says it is skipped, as the browser test does.
pub fn nats_present() -> bool {
    if find_nats_server().is_some() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "nats-server is not on PATH: these tests start real NATS JetStream servers; install it (Debian/Ubuntu: apt-get install nats-server) and run them again"
    );
    eprintln!("SKIPPED: nats-server is not on PATH (Debian/Ubuntu: apt-get install nats-server); under CI=true this fails");
    false
}

/// A port on 127.0.0.1 that nothing listened on when asked (the system's pick).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One `nats-server -js` process on 127.0.0.1 with its own port and store, killed
/// (SIGKILL) when dropped.
pub struct Node {
    child: Option<Child>,
    /// The client port.
    pub port: u16,
    store: tempfile::TempDir,
}

impl Node {
    /// Starts `nats-server -js` on 127.0.0.1, a free port and a fresh store, with `extra`
    /// arguments after those (a server name, a cluster's routes), and waits until it
    /// listens; panics when it cannot be started or has not listened within 20 s.
    pub fn start(extra: &[String]) -> Node {
        let server = find_nats_server()
            .expect("nats-server is not on PATH (Debian/Ubuntu: apt-get install nats-server)");
        let store = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(server)
            .args(["-js", "-a", "127.0.0.1"])
            .arg("-p")
            .arg(port.to_string())
            .arg("-sd")
            .arg(store.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        // Made before the wait, so a server that never listens is still killed.
        let node = Node {
            child: Some(child),
            port,
            store,
        };
        wait_port(port);
        node
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's store folder (`-sd`).
    pub fn store(&self) -> &Path {
        self.store.path()
    }

    /// Whether the process has not been killed by `kill9`.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the process (SIGKILL) and reaps it; once only.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Waits until something listens on 127.0.0.1:`port`; panics after 20 s.
fn wait_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nats-server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
