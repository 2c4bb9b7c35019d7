//! Storage and state-dir attacks and accidents (issue 10): data left in WAL files after a
//! clean stop, a removed lock file, a state dir too long for sockets, empty or corrupt
//! databases, reused idempotency keys.

use loopgate_tests::{reply, Gateway, WAIT};
use serde_json::json;

/// After a clean stop all data was still in the `-wal` files (a copy of `agent.sqlite` alone
/// had no tables). Now both databases are checkpointed when the gateway stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_leaves_whole_database_files_r_c3() {
    let mut gw = Gateway::start().await;
    gw.model.push(reply("kept"));
    let mut c = gw.connect().await;
    c.turn(json!({"message": "remember", "idempotencyKey": "ck"}))
        .await;
    drop(c);
    assert!(gw.stop(nix::sys::signal::Signal::SIGTERM).await.success());
    let copies = tempfile::tempdir().unwrap();
    for (db, sql) in [
        (
            "agents/main/agent.sqlite",
            "SELECT count(*) FROM transcript",
        ),
        ("gateway.sqlite", "SELECT count(*) FROM runs"),
    ] {
        let copy = copies.path().join("copy.sqlite");
        std::fs::copy(gw.state().join(db), &copy).unwrap();
        let n: i64 = rusqlite::Connection::open(&copy)
            .unwrap()
            .query_row(sql, [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{db} alone: {e}"));
        assert!(n > 0, "{db} alone holds no rows");
        std::fs::remove_file(&copy).unwrap();
    }
}

/// Deleting `supervisor.lock` let a second gateway own the same state dir; a state dir path
/// too long for worker sockets started "ready" with no worker able to bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_dir_is_held_without_its_lock_file_and_long_paths_are_refused_r_c3() {
    let gw = Gateway::start().await;
    std::fs::remove_file(gw.state().join("supervisor.lock")).unwrap();
    let (code, stderr) = loopgate_tests::serve_refusal(gw.state()).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("already in use"), "{stderr}");
    assert!(gw.cli(&["status"]).await.status.success());

    let base = tempfile::tempdir().unwrap();
    let pad = 100usize.saturating_sub(base.path().as_os_str().len());
    let long = base.path().join("d".repeat(pad.max(1)));
    let (code, stderr) = loopgate_tests::serve_refusal(&long).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("too long for its unix sockets"), "{stderr}");
    gw.logs.assert_clean(&[]);
}

/// A 0-byte `agent.sqlite` silently became an empty database, and a corrupt one reached
/// clients only as `exited with status 1`. Now both are a named error and the file is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_or_corrupt_databases_are_named_never_replaced_r_c3() {
    let gw = Gateway::start_with("[workers]\ncrash_loop_max = 50\n").await;
    let db = gw.state().join("agents/main/agent.sqlite");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    for (bytes, says) in [
        (Vec::new(), "empty file"),
        (
            b"this is not sqlite at all, not at all...".repeat(200),
            "not a database",
        ),
    ] {
        std::fs::write(&db, &bytes).unwrap();
        let mut c = gw.connect().await;
        let (_, fin) = c
            .turn(json!({"message": "hi", "idempotencyKey": format!("db-{}", bytes.len())}))
            .await;
        let err = fin["payload"]["error"]
            .as_str()
            .or(fin["error"]["message"].as_str())
            .unwrap_or_default()
            .to_owned();
        let text = if err.is_empty() { fin.to_string() } else { err };
        assert!(
            text.contains(says) && text.contains("agent.sqlite"),
            "{says}: {text}"
        );
        assert_eq!(
            std::fs::read(&db).unwrap(),
            bytes,
            "the database file was replaced"
        );
    }
    gw.logs
        .assert_clean(&["agent.sqlite", "exited", "Worker", "worker"]);
}

/// Reusing an idempotency key with another session or message silently returned the other
/// request's reply. Now it is refused; the same request again still replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_idempotency_key_for_another_request_is_refused_r_a3() {
    let gw = Gateway::start().await;
    gw.model.push(reply("first reply"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "one", "idempotencyKey": "same"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let replay = c
        .call("agent", json!({"message": "one", "idempotencyKey": "same"}))
        .await;
    assert_eq!(replay["ok"], true, "{replay}");
    for params in [
        json!({"message": "two", "idempotencyKey": "same"}),
        json!({"message": "one", "idempotencyKey": "same", "sessionKey": "other"}),
    ] {
        let r = tokio::time::timeout(WAIT, c.call("agent", params))
            .await
            .unwrap();
        assert_eq!(r["ok"], false, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("already used for a different request"),
            "{r}"
        );
    }
    gw.logs.assert_clean(&[]);
}
