//! The fleet library against a real `nats-server -js` on 127.0.0.1 (on PATH; under
//! `CI=true` these tests fail without it, elsewhere they say they are skipped): set-up twice, submission and its duplicate, leases under
//! compare-and-swap, checkpoints replaced whole.

#[path = "../../../tests/support/nats.rs"]
mod nats;

use std::time::Duration;

use agentforge_fleet::{Fleet, FleetError, FleetOptions, ItemKind};
use nats::{free_port, nats_present, Node};

/// A lease's lifetime: long enough that a lease is still held a few round-trips after it
/// was taken on a loaded machine, short enough to wait out once.
const ACK_WAIT: Duration = Duration::from_secs(6);

fn opts(s: &Node) -> FleetOptions {
    let mut o = FleetOptions::new(s.url());
    o.ack_wait = ACK_WAIT;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submission_leases_and_checkpoints_on_a_real_server() {
    if !nats_present() {
        return;
    }
    let s = Node::start(&[]);
    let fleet = Fleet::connect(opts(&s)).await.unwrap();
    // A second process opens what the first made.
    let other = Fleet::connect(opts(&s)).await.unwrap();
    let _ = fleet.consumer().await.unwrap();
    // A worker timed on another ack wait than the consumer's is refused, naming it.
    let mut slower = opts(&s);
    slower.ack_wait = ACK_WAIT + Duration::from_secs(3);
    let Err(e) = Fleet::connect(slower).await.unwrap().consumer().await else {
        panic!("another ack wait is refused");
    };
    let named = format!("--ack-wait {}", ACK_WAIT.as_secs());
    assert!(e.to_string().contains(&named), "{e}");

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
    tokio::time::sleep(ACK_WAIT + Duration::from_millis(200)).await;
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
    // Progress is core NATS, at most once by design (a lost event costs a line of a
    // watcher's display): published again, a bounded number of times, until one arrives,
    // so a connection hiccup on a loaded machine does not fail the test.
    let mut got = None;
    for _ in 0..10 {
        fleet.publish_progress(&ev).await;
        if let Ok(m) = tokio::time::timeout(
            Duration::from_secs(2),
            futures_util::StreamExt::next(&mut sub),
        )
        .await
        {
            got = m;
            break;
        }
    }
    let got = got.expect("a progress event within 10 publications");
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
    let url = format!("nats://127.0.0.1:{}", free_port());
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

/// The fleet's view lists every key, even while the keys are being rewritten: four
/// workers beat as fast as they can while the view is read again and again. A listing
/// that repeats or misses a key rewritten during the read (as a consumer over the
/// bucket's last message per subject does) fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_lists_every_worker_while_they_beat() {
    if !nats_present() {
        return;
    }
    let s = Node::start(&[]);
    let fleet = Fleet::connect(opts(&s)).await.unwrap();
    let names: Vec<String> = (1..=4).map(|i| format!("w{i}")).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut beaters = Vec::new();
    for name in &names {
        let (fleet, stop, name) = (
            Fleet::connect(opts(&s)).await.unwrap(),
            stop.clone(),
            name.clone(),
        );
        let beat = move |n: u64| agentforge_fleet::WorkerBeat {
            worker: name.clone(),
            host: "h".into(),
            pid: 1,
            started: String::new(),
            last_heartbeat: n.to_string(),
            items: vec![],
            concurrency: 1,
        };
        // Every worker has beaten once before the first view.
        fleet.put_beat(&beat(0)).await.unwrap();
        beaters.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                fleet.put_beat(&beat(n)).await.unwrap();
            }
            n
        }));
    }
    // Each view lists each worker once: no key missed, none twice.
    let mut wrong = None;
    for round in 0..300 {
        // A patience, not a measure: a listing that never ends fails here.
        let view = tokio::time::timeout(Duration::from_secs(30), fleet.view())
            .await
            .expect("a view of a busy bucket ends")
            .unwrap();
        let seen: Vec<&str> = view.workers.iter().map(|w| w.worker.as_str()).collect();
        if seen != names {
            wrong = Some(format!(
                "view {round} listed {} workers: {seen:?}",
                seen.len()
            ));
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut beats = 0;
    for b in beaters {
        beats += b.await.unwrap();
    }
    assert_eq!(wrong, None);
    assert!(
        beats > 300,
        "the workers hardly beat ({beats}), so nothing was raced"
    );
}
