//! The engine's guarantees against three real NATS servers on loopback, each gateway
//! connected to a different one (R-A3, R-C1, G1 in `../shared/design/cluster.md`).

use std::time::{Duration, Instant};

use cluster::journal::Kind as JournalKind;
use cluster::local::LocalCluster;
use cluster::{Accepted, Acquired, Ended, Engine, Lease, Refused, RunRecord, Settings, Start};
use serde_json::value::RawValue;

struct Fixture {
    nats: LocalCluster,
    _dir: tempfile::TempDir,
}

fn cluster() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let nats = LocalCluster::start(3, dir.path()).unwrap();
    Fixture { nats, _dir: dir }
}

/// Gateway `node`, connected first to server `first` (the client knows them all).
async fn gateway(f: &Fixture, node: &str, first: usize) -> Engine {
    let mut urls = f.nats.urls();
    urls.rotate_left(first);
    Engine::connect(&settings(urls, node), &|_| None)
        .await
        .unwrap()
}

pub(crate) fn settings(nats: Vec<String>, node: &str) -> Settings {
    Settings {
        nats,
        node: node.into(),
        lease_ttl: Duration::from_secs(2),
        replicas: 3,
        workspace_max_bytes: 1 << 20,
        auth: Default::default(),
    }
}

/// Servers that require a token: a gateway without it, or with another, is refused at
/// connect with the reason; with it, it works. The token comes from the environment
/// variable `cluster.token_env` names, never from the config file.
#[tokio::test]
async fn a_cluster_with_a_token_refuses_gateways_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let nats = LocalCluster::start_with(3, dir.path(), Some("s3cret")).unwrap();
    let mut s = settings(nats.urls(), "h1");
    let refused = Engine::connect(&s, &|_| None).await.err().unwrap();
    assert!(
        matches!(refused, cluster::ClusterError::Connect { .. }),
        "{refused}"
    );
    s.auth.token_env = Some("NATS_TOKEN".into());
    let unset = Engine::connect(&s, &|_| None).await.err().unwrap();
    assert!(unset.to_string().contains("NATS_TOKEN"), "{unset}");
    let wrong = Engine::connect(&s, &|_| Some("nope".into())).await;
    assert!(wrong.is_err());
    let e = Engine::connect(&s, &|n| (n == "NATS_TOKEN").then(|| "s3cret".into()))
        .await
        .unwrap();
    assert_eq!(
        e.accept(&record("t1", "h1", "x")).await.unwrap(),
        Accepted::New
    );
}

fn record(run: &str, node: &str, hash: &str) -> RunRecord {
    RunRecord {
        run_id: run.into(),
        agent_id: "main".into(),
        session_key: "agent:main:main".into(),
        accepted_at: 1,
        request_hash: hash.into(),
        node: node.into(),
        started: None,
    }
}

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

async fn held(e: &Engine, agent: &str) -> Lease {
    match e.acquire(agent).await.unwrap() {
        Acquired::Held(l) => l,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_key_is_claimed_once_and_a_run_ends_once_cluster_wide_r_a3() {
    let f = cluster();
    let (a, b, c) = (
        gateway(&f, "h1", 0).await,
        gateway(&f, "h2", 1).await,
        gateway(&f, "h3", 2).await,
    );
    assert_eq!(
        a.accept(&record("k1", "h1", "x")).await.unwrap(),
        Accepted::New
    );
    // Its own retry (the first answer lost) is still its own.
    assert_eq!(
        a.accept(&record("k1", "h1", "x")).await.unwrap(),
        Accepted::New
    );
    assert_eq!(
        c.accept(&record("k1", "h3", "x")).await.unwrap(),
        Accepted::Existing(record("k1", "h1", "x")),
        "a retry on another gateway finds the first run"
    );
    assert!(matches!(
        b.accept(&record("k1", "h2", "other")).await.unwrap(),
        Accepted::Conflict(_)
    ));

    // A waiter on the third gateway, started before the run ends.
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.wait_outcome("k1").await })
    };
    // Two writers race; exactly one terminal is the run's.
    let (ea, eb) = tokio::join!(
        a.end("k1", raw(r#"{"status":"ok"}"#)),
        b.end("k1", raw(r#"{"status":"error"}"#))
    );
    let (ea, eb) = (ea.unwrap(), eb.unwrap());
    let winner = match (&ea, &eb) {
        (Ended::First, Ended::Already(o)) => {
            assert_eq!(o.node, "h1");
            r#"{"status":"ok"}"#
        }
        (Ended::Already(o), Ended::First) => {
            assert_eq!(o.node, "h2");
            r#"{"status":"error"}"#
        }
        other => panic!("not exactly one first writer: {other:?}"),
    };
    let seen = waiter.await.unwrap().unwrap();
    assert_eq!(seen.terminal.get(), winner);
    for e in [&a, &b, &c] {
        let o = e.outcome("k1").await.unwrap().unwrap();
        assert_eq!(
            o.terminal.get(),
            winner,
            "every gateway reads the same outcome"
        );
    }
}

#[tokio::test]
async fn one_owner_per_agent_epochs_grow_and_a_replaced_owner_learns_it() {
    let f = cluster();
    let (a, b) = (gateway(&f, "h1", 0).await, gateway(&f, "h2", 1).await);
    let mut la = held(&a, "a1").await;
    assert_eq!(
        b.acquire("a1").await.unwrap(),
        Acquired::Owned {
            node: "h1".into(),
            epoch: la.epoch
        }
    );
    assert!(a.renew(&mut la, Duration::from_secs(5)).await.unwrap());
    assert_eq!(b.owner("a1").await.unwrap(), Some(("h1".into(), la.epoch)));

    // h1 stops renewing: within the lease TTL (plus the engine's expiry sweep) h2 owns it.
    let deadline = Instant::now() + Duration::from_secs(15);
    let lb = loop {
        match b.acquire("a1").await.unwrap() {
            Acquired::Held(l) => break l,
            Acquired::Owned { .. } if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            other => panic!("h1's lease never lapsed: {other:?}"),
        }
    };
    assert!(lb.epoch > la.epoch, "a later owner has a larger epoch");
    assert!(
        !a.renew(&mut la, Duration::from_secs(5)).await.unwrap(),
        "the old owner learns it lost"
    );
    assert_eq!(b.owner("a1").await.unwrap(), Some(("h2".into(), lb.epoch)));

    // A gateway that gives an agent up lets another take it at once.
    b.release(&lb).await.unwrap();
    let la2 = held(&a, "a1").await;
    assert!(la2.epoch > lb.epoch);
}

#[tokio::test]
async fn a_run_starts_at_most_once_whichever_owner_gets_there_first() {
    let f = cluster();
    let (a, b) = (gateway(&f, "h1", 0).await, gateway(&f, "h2", 2).await);
    a.accept(&record("r1", "h1", "x")).await.unwrap();
    let la = held(&a, "main").await;
    assert_eq!(a.start("r1", &la).await.unwrap(), Start::Mine);
    assert_eq!(a.start("r1", &la).await.unwrap(), Start::Mine, "idempotent");
    a.release(&la).await.unwrap();
    let lb = held(&b, "main").await;
    match b.start("r1", &lb).await.unwrap() {
        Start::Taken(s) => assert_eq!((s.node.as_str(), s.epoch), ("h1", la.epoch)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        b.start("never-accepted", &lb).await.unwrap(),
        Start::Unknown
    );
}

/// The writer fence across hosts (R-C1): an agent's journal takes a write only after the
/// record its writer names; a takeover ends the previous owner's writes; a record too large
/// for one message is read back whole; a reader starts where it left off.
#[tokio::test]
async fn the_journal_refuses_a_writer_behind_it_and_an_owner_taken_over_r_c1() {
    let f = cluster();
    let (a, b) = (gateway(&f, "h1", 0).await, gateway(&f, "h2", 1).await);
    let la = held(&a, "main").await;
    let t1 = a.journal_takeover(&la).await.unwrap().unwrap();
    let s1 = a.journal_append(&la, t1, b"one").await.unwrap().unwrap();
    let s2 = a.journal_append(&la, s1, b"two").await.unwrap().unwrap();
    assert!(t1 < s1 && s1 < s2);
    assert_eq!(
        a.journal_append(&la, s1, b"behind").await.unwrap(),
        Err(Refused),
        "a writer that missed a record is refused"
    );
    // The same publish again (an answer lost) is stored once.
    assert_eq!(a.journal_append(&la, s1, b"two").await.unwrap(), Ok(s2));

    // h1 is paused past its lease; h2 takes the agent over: h1 can write nothing more.
    a.release(&la).await.unwrap();
    let lb = held(&b, "main").await;
    let t2 = b.journal_takeover(&lb).await.unwrap().unwrap();
    assert_eq!(
        a.journal_append(&la, s2, b"from the old owner")
            .await
            .unwrap(),
        Err(Refused)
    );
    // Nor can it take the journal back with a late takeover of its own (which would put
    // its records after the newer owner's), nor write after the newer owner's record.
    assert_eq!(a.journal_takeover(&la).await.unwrap(), Err(Refused));
    assert_eq!(
        a.journal_last("main").await.unwrap(),
        cluster::journal::Last {
            seq: t2,
            epoch: lb.epoch
        }
    );
    // A record over the engine's message size goes as parts and reads back whole.
    let big: Vec<u8> = (0..b.max_payload() * 2 + 10).map(|i| i as u8).collect();
    let s3 = b.journal_append(&lb, t2, &big).await.unwrap().unwrap();

    let all = a.journal_read("main", 0).await.unwrap();
    assert_eq!(all.last, s3);
    let seen: Vec<(JournalKind, String, u64, usize)> = all
        .records
        .iter()
        .map(|r| (r.kind, r.node.clone(), r.epoch, r.changes.len()))
        .collect();
    assert_eq!(
        seen,
        [
            (JournalKind::Takeover, "h1".into(), la.epoch, 0),
            (JournalKind::Changes, "h1".into(), la.epoch, 3),
            (JournalKind::Changes, "h1".into(), la.epoch, 3),
            (JournalKind::Takeover, "h2".into(), lb.epoch, 0),
            (JournalKind::Changes, "h2".into(), lb.epoch, big.len()),
        ]
    );
    assert_eq!(all.records[4].changes, big);
    // Read from where a cache stopped.
    let tail = b.journal_read("main", s2).await.unwrap();
    assert_eq!(tail.records.len(), 2);
    assert_eq!(tail.last, s3);
    let none = b.journal_read("main", s3).await.unwrap();
    assert!(none.records.is_empty());
    assert_eq!(none.last, s3);
    assert_eq!(b.journal_read("other", 0).await.unwrap().last, 0);
}

#[tokio::test]
async fn writes_go_on_with_one_server_of_three_killed() {
    let mut f = cluster();
    let a = gateway(&f, "h1", 0).await;
    let b = gateway(&f, "h2", 1).await;
    a.accept(&record("before", "h1", "x")).await.unwrap();
    f.nats.kill(0);
    // h1's client reconnects to a live server; the streams whose leader was lost elect
    // another (NATS takes a few seconds). Retried until a deadline, as a gateway would.
    let deadline = Instant::now() + Duration::from_secs(30);
    for (e, run) in [(&a, "after-a"), (&b, "after-b")] {
        loop {
            match e.accept(&record(run, e.node(), "x")).await {
                Ok(acc) => {
                    assert_eq!(acc, Accepted::New);
                    break;
                }
                Err(err) if Instant::now() < deadline => {
                    eprintln!("{}: {err}; retrying", e.node());
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(err) => panic!("no write within 30 s of losing one server: {err}"),
            }
        }
    }
    assert_eq!(
        b.run("before").await.unwrap().map(|r| r.node),
        Some("h1".into()),
        "what was recorded before the loss is still there"
    );
}
