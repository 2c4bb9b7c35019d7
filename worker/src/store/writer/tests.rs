use super::*;
use crate::store::Role;

fn begin_req(run: &str) -> BeginRun {
    BeginRun {
        run_id: run.into(),
        session_key: "agent:main:main".into(),
        accepted_at: 1,
        started_at: 2,
        attachments: Vec::new(),
        user_text: format!("hello from {run}"),
        carried: Vec::new(),
    }
}

fn assistant(text: &str) -> NewMessage {
    NewMessage {
        provider: Some("p".into()),
        model: Some("m".into()),
        stop_reason: Some("stop".into()),
        ..NewMessage::text(Role::Assistant, text, 3)
    }
}

fn finish_req(run: &str, text: &str) -> FinishRun {
    FinishRun {
        run_id: run.into(),
        session_key: "agent:main:main".into(),
        status: RunStatus::Ok,
        ended_at: 4,
        error: None,
        stop_reason: Some("stop".into()),
        provider: None,
        model: None,
        usage: None,
        assistant: Some(assistant(text)),
    }
}

fn count_rows(path: &Path, sql: &str) -> i64 {
    let c = Connection::open(path).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// R-D6: the ledger stays bounded however much is recorded.
#[tokio::test]
async fn audit_ledger_is_bounded_r_d6() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    let (w, _) = Writer::open(&path, 0).unwrap();
    let total = AUDIT_MAX_RECORDS + 3 * AUDIT_PRUNE_EVERY;
    for i in 0..total {
        let rec = AuditRecord {
            ts: i as u64,
            run_id: format!("r{i}"),
            session_key: "agent:main:main".into(),
            kind: "lifecycle",
            phase: "start".into(),
            tool_name: None,
            tool_call_id: None,
            result: None,
            duration_ms: None,
        };
        // Never drop a record here: wait for room like a slow producer would.
        while w.tx.send(Cmd::Audit(rec.clone())).is_err() {
            tokio::task::yield_now().await;
        }
    }
    // Any acknowledged command comes after every audit record queued before it.
    w.begin(begin_req("flush")).await.unwrap();
    let kept = count_rows(&path, "SELECT count(*) FROM audit");
    assert!(
        (AUDIT_MAX_RECORDS..AUDIT_MAX_RECORDS + AUDIT_PRUNE_EVERY).contains(&kept),
        "{kept}"
    );
    let newest = count_rows(&path, "SELECT max(ts) FROM audit");
    assert_eq!(newest, total - 1, "the newest records are the ones kept");
}

/// R-C1: a run whose claim was superseded cannot commit transcript data.
#[tokio::test]
async fn superseded_run_cannot_commit_r_c1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    let (w, _) = Writer::open(&path, 0).unwrap();
    let sid_a = w.begin(begin_req("run-a")).await.unwrap();
    // run-b claims the same session: run-a is now superseded.
    let sid_b = w.begin(begin_req("run-b")).await.unwrap();
    assert_eq!(sid_a, sid_b, "same session, same transcript");
    let err = w
        .append("agent:main:main".into(), "run-a".into(), assistant("stale"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::Fenced {
            expected: "run-a".into(),
            actual: Some("run-b".into())
        }
    );
    let err = w
        .finish(finish_req("run-a", "stale final"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }));
    // The current claimant commits fine.
    w.append("agent:main:main".into(), "run-b".into(), assistant("fresh"))
        .await
        .unwrap();
    w.finish(finish_req("run-b", "fresh final")).await.unwrap();
    assert_eq!(
        count_rows(
            &path,
            "SELECT count(*) FROM transcript WHERE entry_json LIKE '%stale%'"
        ),
        0
    );
    assert_eq!(
        count_rows(
            &path,
            "SELECT count(*) FROM transcript WHERE entry_json LIKE '%fresh%'"
        ),
        2
    );
    assert_eq!(
        count_rows(
            &path,
            "SELECT count(*) FROM runs WHERE run_id = 'run-a' AND status = 'error'"
        ),
        1
    );
    // run-b released its claim on finish.
    assert_eq!(
        count_rows(
            &path,
            "SELECT count(*) FROM sessions WHERE active_writer_run_id IS NULL"
        ),
        1
    );
}

#[tokio::test]
async fn transcript_is_a_parent_linked_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    let (w, _) = Writer::open(&path, 0).unwrap();
    w.begin(begin_req("r1")).await.unwrap();
    w.finish(finish_req("r1", "one")).await.unwrap();
    w.begin(begin_req("r2")).await.unwrap();
    w.finish(finish_req("r2", "two")).await.unwrap();
    let c = Connection::open(&path).unwrap();
    let mut stmt = c
        .prepare("SELECT seq, entry_id, parent_id FROM transcript ORDER BY seq")
        .unwrap();
    let rows: Vec<(i64, String, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0].2, None);
    for pair in rows.windows(2) {
        assert_eq!(pair[1].2.as_deref(), Some(pair[0].1.as_str()));
        assert_eq!(pair[1].0, pair[0].0 + 1);
    }
}

/// R-C5: rewrites (reset, delete) go through the same fence: refused while a run holds
/// the claim.
#[tokio::test]
async fn reset_and_delete_respect_the_claim_r_c5() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    let (w, _) = Writer::open(&path, 0).unwrap();
    let sid = w.begin(begin_req("r1")).await.unwrap();
    assert!(matches!(
        w.reset("agent:main:main".into(), "reset".into(), 5).await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(matches!(
        w.delete("agent:main:main".into(), true).await,
        Err(StoreError::Fenced { .. })
    ));
    w.finish(finish_req("r1", "done")).await.unwrap();
    let info = w
        .reset("agent:main:main".into(), "new".into(), 6)
        .await
        .unwrap();
    assert_eq!(info.session_id, sid, "reset keeps the session id");
    assert_eq!(
        count_rows(
            &path,
            "SELECT count(*) FROM transcript WHERE role = 'reset'"
        ),
        1
    );
    assert!(w.delete("agent:main:main".into(), true).await.unwrap());
    assert!(!w.delete("agent:main:main".into(), true).await.unwrap());
    assert_eq!(count_rows(&path, "SELECT count(*) FROM transcript"), 0);
}

#[tokio::test]
async fn recovery_ends_open_runs_and_releases_claims() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    {
        let (w, _) = Writer::open(&path, 0).unwrap();
        w.begin(begin_req("crashed")).await.unwrap();
    }
    let (w, recovered) = Writer::open(&path, 99).unwrap();
    assert_eq!(recovered, 1);
    assert_eq!(
        count_rows(
            &path,
            "SELECT count(*) FROM runs WHERE status = 'error' AND error LIKE 'interrupted%'"
        ),
        1
    );
    // The next turn on the session works.
    w.begin(begin_req("next")).await.unwrap();
    w.finish(finish_req("next", "ok")).await.unwrap();
}
