//! The fleet library against a real `nats-server -js` on 127.0.0.1 (on PATH; under
//! `CI=true` these tests fail without it, elsewhere they say they are skipped): set-up twice, submission and its duplicate, leases under
//! compare-and-swap, checkpoints replaced whole.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentforge_fleet::{Fleet, FleetError, FleetOptions, ItemKind};

/// The server process (killed when dropped), its port, its store.
struct Server {
    child: Child,
    port: u16,
    _store: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `nats-server` is on PATH. Under `CI=true` (`.ci/run` installs it) a missing
/// one fails the test; elsewhere the test says it is skipped, as the browser test does.
fn nats_present() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| d.join("nats-server").is_file()) {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "nats-server is not on PATH: install it (apt-get install nats-server)"
    );
    eprintln!("SKIPPED: nats-server is not on PATH (apt-get install nats-server); under CI=true this fails");
    false
}

fn server() -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new("nats-server")
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string()])
        .arg("-sd")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("nats-server is not on PATH ({e}): install it (apt-get install nats-server)")
        });
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Server {
        child,
        port,
        _store: dir,
    }
}

fn opts(s: &Server) -> FleetOptions {
    let mut o = FleetOptions::new(format!("nats://127.0.0.1:{}", s.port));
    o.ack_wait = Duration::from_secs(2);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submission_leases_and_checkpoints_on_a_real_server() {
    if !nats_present() {
        return;
    }
    let s = server();
    let fleet = Fleet::connect(opts(&s)).await.unwrap();
    // A second process opens what the first made.
    let other = Fleet::connect(opts(&s)).await.unwrap();
    let _ = fleet.consumer().await.unwrap();
    // A worker timed on another ack wait than the consumer's is refused, naming it.
    let mut slower = opts(&s);
    slower.ack_wait = Duration::from_secs(5);
    let Err(e) = Fleet::connect(slower).await.unwrap().consumer().await else {
        panic!("another ack wait is refused");
    };
    assert!(e.to_string().contains("--ack-wait 2"), "{e}");

    let kind = ItemKind::Task {
        spec_yaml: "id: a\n".into(),
    };
    fleet
        .submit("a", kind.clone(), vec![1, 2, 3])
        .await
        .unwrap();
    let e = other.submit("a", kind.clone(), vec![1]).await.unwrap_err();
    assert!(matches!(e, FleetError::Duplicate { .. }), "{e}");
    assert!(e.is_usage());
    // Large workspaces go to the object store.
    let big: Vec<u8> = (0..400_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fleet.submit("big", kind, big.clone()).await.unwrap();
    // A worker gets it back, checked against its hash.
    let item = agentforge_fleet::WorkItem {
        version: 1,
        id: "big".into(),
        kind: ItemKind::Task {
            spec_yaml: String::new(),
        },
        workspace: agentforge_fleet::Payload::Object {
            name: "input/big.tar.gz".into(),
            size: big.len() as u64,
            sha256: agentforge_fleet::archive::sha256(&big),
        },
        submitted_at: String::new(),
    };
    assert_eq!(other.input_archive(&item).await.unwrap(), big);
    let view = fleet.view().await.unwrap();
    assert_eq!(view.pending_messages, 2);
    assert_eq!(view.items.len(), 2);
    assert!(view.items.iter().all(|i| i.state == "queued"));

    // Leases: one holder at a time; an expired lease is taken over; the old holder's
    // renewal then fails.
    let mut l1 = fleet.acquire_lease("a", "w1").await.unwrap().unwrap();
    assert!(other.acquire_lease("a", "w2").await.unwrap().is_err());
    fleet.renew_lease(&mut l1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let l2 = other.acquire_lease("a", "w2").await.unwrap().unwrap();
    let lost = fleet.renew_lease(&mut l1).await.unwrap_err();
    assert!(matches!(lost, FleetError::LeaseLost { .. }), "{lost}");
    // A stale release does not free another's lease.
    fleet.release_lease(&l1).await;
    assert!(fleet.acquire_lease("a", "w3").await.unwrap().is_err());
    other.release_lease(&l2).await;
    assert!(fleet.acquire_lease("a", "w3").await.unwrap().is_ok());

    // Progress events reach a subscriber of `agentforge.progress.>`.
    let mut sub = other
        .client
        .subscribe("agentforge.progress.>")
        .await
        .unwrap();
    other.client.flush().await.unwrap();
    let ev = agentforge_fleet::ProgressEvent {
        item: "a".into(),
        worker: "w3".into(),
        step: 2,
        phase: "implement".into(),
        action: "edit_file".into(),
        result: "success".into(),
        input_tokens: 10,
        output_tokens: 2,
        cost_usd_micros: Some(7),
    };
    fleet.publish_progress(&ev).await;
    let got = tokio::time::timeout(
        Duration::from_secs(5),
        futures_util::StreamExt::next(&mut sub),
    )
    .await
    .expect("a progress event")
    .unwrap();
    assert_eq!(got.subject.as_str(), "agentforge.progress.a");
    let back: agentforge_fleet::ProgressEvent = serde_json::from_slice(&got.payload).unwrap();
    assert_eq!(back, ev);

    // Checkpoints replace each other whole.
    assert_eq!(fleet.checkpoint("a").await.unwrap(), None);
    fleet.put_checkpoint("a", &big).await.unwrap();
    fleet.put_checkpoint("a", b"second").await.unwrap();
    assert_eq!(
        other.checkpoint("a").await.unwrap().as_deref(),
        Some(&b"second"[..])
    );
}

#[tokio::test]
async fn an_unreachable_server_is_named() {
    if !nats_present() {
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let e = Fleet::connect(FleetOptions::new(url.clone()))
        .await
        .err()
        .expect("nothing listens there");
    let text = e.to_string();
    assert!(
        text.contains(&format!("no NATS server reachable at {url}")),
        "{text}"
    );
    assert!(text.contains("nats-server -js"), "{text}");
}
