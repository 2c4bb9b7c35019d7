use super::*;

fn run(id: &str) -> NewRun {
    NewRun {
        run_id: id.into(),
        agent_id: "main".into(),
        session_key: "agent:main:main".into(),
        accepted_at: 1,
        request_hash: "h".into(),
    }
}

/// A database a newer build wrote is refused with a message saying so (the check used to
/// name the wrong failure, and a schema bump forgot to move it).
#[tokio::test]
async fn a_newer_database_is_refused_by_name_and_the_current_one_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.sqlite");
    drop(GatewayDb::open(&path, 10).unwrap());
    drop(GatewayDb::open(&path, 11).expect("this build's own schema reopens"));
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!("PRAGMA user_version = {};", SCHEMA_VERSION + 1))
        .unwrap();
    let Err(e) = GatewayDb::open(&path, 12) else {
        panic!("a newer schema opened")
    };
    assert!(e.to_string().contains("newer than this build"), "{e}");
}

/// A v3 database (before labels, device tokens and session settings) opens as the newest version with
/// its sessions intact.
#[tokio::test]
async fn a_v3_database_migrates_and_patches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.sqlite");
    let (db, _) = GatewayDb::open(&path, 10).unwrap();
    db.accept(run("a")).await.unwrap();
    drop(db);
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "ALTER TABLE sessions DROP COLUMN label;
                 ALTER TABLE sessions DROP COLUMN last_read_at;
                 ALTER TABLE sessions DROP COLUMN model_override;
                 ALTER TABLE sessions DROP COLUMN thinking_level;
                 ALTER TABLE sessions DROP COLUMN reasoning_level;
                 ALTER TABLE sessions DROP COLUMN queue_mode;
                 ALTER TABLE sessions DROP COLUMN verbose_level;
                 DROP TABLE device_tokens;
                 DROP TABLE exec_allowlist;
                 DROP INDEX sessions_by_id;
                 DROP TABLE usage_days;
                 DROP TABLE usage_session_days;
                 DROP TABLE usage_rollup;
                 ALTER TABLE sessions DROP COLUMN queue_debounce_ms;
                 ALTER TABLE sessions DROP COLUMN queue_cap;
                 ALTER TABLE sessions DROP COLUMN queue_drop;
                 ALTER TABLE sessions DROP COLUMN response_usage;
                 ALTER TABLE sessions DROP COLUMN trace_level;
                 PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    let (db, _) = GatewayDb::open(&path, 10).unwrap();
    let patch = SessionPatch {
        label: Some(Some("L".into())),
        last_read_at: Some(Some(7)),
        model_override: Some(Some("second/big-2".into())),
        thinking_level: Some(Some("high".into())),
        reasoning_level: None,
        queue_mode: Some(Some("collect".into())),
        verbose_level: Some(Some("full".into())),
        response_usage: Some(Some("tokens".into())),
        trace_level: Some(Some("raw".into())),
        queue_options: Some(Some(StoredQueueOptions {
            debounce_ms: Some(2000),
            cap: None,
            drop: Some("old".into()),
        })),
    };
    let row = db
        .patch_session("agent:main:main".into(), "main".into(), patch, 9)
        .await
        .unwrap();
    assert_eq!(
        (row.label.as_deref(), row.last_read_at),
        (Some("L"), Some(7))
    );
    assert_eq!(row.model_override.as_deref(), Some("second/big-2"));
    assert_eq!(
        db.session_overrides().await.unwrap(),
        vec![StoredOverrides {
            session_key: "agent:main:main".to_owned(),
            model: Some("second/big-2".to_owned()),
            thinking: Some("high".to_owned()),
            reasoning: None,
            queue_mode: Some("collect".to_owned()),
            verbose: Some("full".to_owned()),
            response_usage: Some("tokens".to_owned()),
            trace_level: Some("raw".to_owned()),
            queue_options: StoredQueueOptions {
                debounce_ms: Some(2000),
                cap: None,
                drop: Some("old".into()),
            },
        }]
    );
    assert_eq!(
        row.last_run_id.as_deref(),
        Some("a"),
        "the row from before is intact"
    );
    let (rows, total) = db
        .sessions(SessionQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((total, rows[0].label.as_deref()), (1, Some("L")));
}

#[tokio::test]
async fn accept_finish_replay_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.sqlite");
    let (db, recovered) = GatewayDb::open(&path, 10).unwrap();
    assert_eq!(recovered, 0);
    assert!(matches!(
        db.accept(run("a")).await.unwrap(),
        AcceptOutcome::Inserted
    ));
    assert!(matches!(
        db.accept(run("a")).await.unwrap(),
        AcceptOutcome::Existing(b) if matches!(*b, StoredRun::Active { .. })
    ));
    let t = StoredTerminal {
        status: "ok".into(),
        started_at: Some(2),
        ended_at: 3,
        error: None,
        stop_reason: None,
        final_json: "{\"ok\":true}".into(),
        session_id: Some("sid".into()),
        usage: Some((3, 2, 5)),
        spend: None,
    };
    db.finish("a".into(), t.clone()).await.unwrap();
    match db.accept(run("a")).await.unwrap() {
        AcceptOutcome::Existing(b) => {
            let StoredRun::Terminal { terminal, .. } = *b else {
                panic!("not terminal")
            };
            assert_eq!(
                (terminal.status.as_str(), terminal.final_json.as_str()),
                ("ok", t.final_json.as_str())
            );
            assert_eq!(terminal.started_at, Some(2));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        db.accept(run("b")).await.unwrap(),
        AcceptOutcome::Inserted
    ));
    drop(db);
    // A new gateway ends what the old one left open.
    let (db, recovered) = GatewayDb::open(&path, 20).unwrap();
    assert_eq!(recovered, 1);
    match db.lookup("b".into()).await.unwrap() {
        Some(StoredRun::Terminal { terminal, .. }) => {
            assert_eq!(terminal.status, "error");
            assert!(terminal.error.unwrap().contains("interrupted"));
            // The replay has the shape of any other failure.
            let fin: serde_json::Value = serde_json::from_str(&terminal.final_json).unwrap();
            assert_eq!(fin["payload"]["error"], INTERRUPTED, "{fin}");
            let meta = &fin["payload"]["result"]["meta"];
            assert_eq!(meta["error"]["kind"], "error", "{fin}");
            assert_eq!(meta["agentMeta"]["agentId"], run("b").agent_id, "{fin}");
            assert_eq!(
                meta["agentMeta"]["sessionKey"],
                run("b").session_key,
                "{fin}"
            );
        }
        other => panic!("{other:?}"),
    }
    let (rows, total) = db
        .sessions(SessionQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(total, 1);
    assert_eq!(rows[0].session_id.as_deref(), Some("sid"));
    assert_eq!(rows[0].total_tokens, 5);
    assert_eq!(
        rows[0].last_status.as_deref(),
        Some("error"),
        "b ended by recovery"
    );
    assert_eq!(db.prune(4).await.unwrap(), 1);
    assert!(db.delete_session("agent:main:main".into()).await.unwrap());
}

/// A migrated connection of a fresh gateway db in `dir`, for the command functions alone.
fn migrated(dir: &tempfile::TempDir) -> Connection {
    let conn = Connection::open(dir.path().join("g.sqlite")).unwrap();
    migrate(&conn).unwrap();
    conn
}

/// `allow-always` patterns: kept once each per agent, oldest first, forgotten on request, and
/// refused past the per-agent cap (the other agents' unaffected).
#[test]
fn exec_allowlist_keeps_lists_forgets_and_caps_per_agent() {
    let dir = tempfile::tempdir().unwrap();
    let conn = migrated(&dir);
    exec_allowlist::allow(&conn, "main", "ls *", 2).unwrap();
    exec_allowlist::allow(&conn, "main", "git status", 1).unwrap();
    exec_allowlist::allow(&conn, "main", "ls *", 3).unwrap();
    assert_eq!(
        exec_allowlist::list(&conn).unwrap(),
        [
            ("main".to_owned(), "git status".to_owned()),
            ("main".to_owned(), "ls *".to_owned())
        ]
    );
    assert!(exec_allowlist::disallow(&conn, "main", "ls *").unwrap());
    assert!(!exec_allowlist::disallow(&conn, "main", "ls *").unwrap());
    conn.execute_batch("BEGIN").unwrap();
    for i in 1..MAX_ALLOWED_PER_AGENT {
        exec_allowlist::allow(&conn, "main", &format!("cmd {i}"), 5).unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    let Err(e) = exec_allowlist::allow(&conn, "main", "one more", 6) else {
        panic!("allowed past the cap")
    };
    assert_eq!(
        e.to_string(),
        format!(
            "gateway database commit failed: agent \"main\" already has {MAX_ALLOWED_PER_AGENT} allow-always patterns"
        )
    );
    exec_allowlist::allow(&conn, "ops", "one more", 6).unwrap();
}

/// A transcript id names the most recently updated session holding it; deleting a session
/// says whether it was there; only sessions with a setting of their own have overrides.
#[test]
fn sessions_by_transcript_id_deleted_and_their_own_settings() {
    let dir = tempfile::tempdir().unwrap();
    let conn = migrated(&dir);
    conn.execute_batch(
        "INSERT INTO sessions(session_key, agent_id, created_at, updated_at, session_id)
         VALUES ('agent:main:old', 'main', 1, 1, 't1'), ('agent:main:new', 'main', 1, 5, 't1'),
                ('agent:ops:x', 'ops', 1, 3, 't2');",
    )
    .unwrap();
    assert_eq!(
        sessions::by_id(&conn, "t1").unwrap(),
        Some(("agent:main:new".to_owned(), "main".to_owned()))
    );
    assert_eq!(sessions::by_id(&conn, "t3").unwrap(), None);
    let patch = SessionPatch {
        queue_mode: Some(Some("collect".into())),
        ..SessionPatch::default()
    };
    sessions::patch(&conn, "agent:ops:x", "ops", &patch, 7).unwrap();
    let o = sessions::overrides(&conn).unwrap();
    assert_eq!(o.len(), 1, "{o:?}");
    assert_eq!(o[0].session_key, "agent:ops:x");
    assert_eq!(o[0].queue_mode.as_deref(), Some("collect"));
    assert!(sessions::delete(&conn, "agent:main:new").unwrap());
    assert!(!sessions::delete(&conn, "agent:main:new").unwrap());
    assert_eq!(
        sessions::by_id(&conn, "t1").unwrap(),
        Some(("agent:main:old".to_owned(), "main".to_owned()))
    );
}

/// A finished run as the control core records it: its outcome built from the worker's
/// terminal, so the stored final result is the real shape the rebuild reads.
fn finished(
    id: &str,
    session: &str,
    agent: &str,
    ended_at: u64,
    (input, output): (u64, u64),
    carried: bool,
) -> (NewRun, StoredTerminal) {
    let mut t = ipc::control::RunTerminal::without_work(
        id,
        ipc::control::RunStatus::Ok,
        ended_at,
        String::new(),
        None,
    );
    t.error = None;
    t.started_at = Some(ended_at - 40);
    t.duration_ms = 40;
    t.provider = Some("p".into());
    t.model = Some("m".into());
    t.tool_calls = 2;
    t.usage = Some(ipc::control::Usage {
        input,
        output,
        cache_read: 0,
        cache_write: 0,
        total: input + output,
    });
    t.carried_by = carried.then(|| "a".to_owned());
    let run = NewRun {
        run_id: id.into(),
        agent_id: agent.into(),
        session_key: session.into(),
        accepted_at: 1,
        request_hash: "h".into(),
    };
    let outcome = crate::outcome::Outcome::from_terminal(&t, session, agent);
    (run, outcome.stored())
}

/// Each outcome adds its run to the rollups once (a carried run's turn is its carrier's, a
/// second outcome for a run changes nothing), and a database from before the rollups gets
/// them built from its kept runs.
#[tokio::test]
async fn usage_rolls_up_at_each_outcome_and_is_rebuilt_from_kept_runs() {
    use usage::{SessionsUsageQuery, UsageQuery};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.sqlite");
    let (db, _) = GatewayDb::open(&path, 10).unwrap();
    let day = 20_000u64;
    let at = |d: u64| d * usage::DAY_MS + 1000;
    for (id, session, agent, ended, tokens, carried) in [
        ("a", "agent:main:s1", "main", at(day), (100, 10), false),
        ("b", "agent:main:s1", "main", at(day + 1), (200, 20), false),
        ("c", "agent:ops:s2", "ops", at(day + 1), (400, 40), false),
        ("d", "agent:main:s1", "main", at(day + 1), (800, 80), true),
    ] {
        let (run, t) = finished(id, session, agent, ended, tokens, carried);
        db.accept(run).await.unwrap();
        db.finish(id.into(), t.clone()).await.unwrap();
        // A second outcome for the same run is not counted again.
        db.finish(id.into(), t).await.unwrap();
    }
    let all = UsageQuery {
        first_day: day as i64,
        last_day: day as i64 + 1,
        agent_id: None,
    };
    let summed = |rows: &[usage::DayRow]| {
        rows.iter().fold(usage::Counts::default(), |mut c, r| {
            c.add(&r.counts);
            c
        })
    };
    let rows = db.usage_days(all.clone()).await.unwrap();
    let c = summed(&rows);
    assert_eq!((c.runs, c.input, c.output, c.total), (3, 700, 70, 770));
    assert_eq!((c.tool_calls, c.min_ms, c.max_ms), (6, 40, 40));
    let main = UsageQuery {
        agent_id: Some("main".into()),
        ..all.clone()
    };
    assert_eq!(
        summed(&db.usage_days(main.clone()).await.unwrap()).input,
        300
    );
    let page = db
        .usage_sessions(SessionsUsageQuery {
            range: main.clone(),
            key: None,
            limit: 10,
            max_day_rows: 1000,
        })
        .await
        .unwrap();
    assert_eq!(page.count, 1);
    assert_eq!(page.sessions[0].session_key, "agent:main:s1");
    assert_eq!(page.sessions[0].days.len(), 2);
    let one = db
        .usage_sessions(SessionsUsageQuery {
            range: all.clone(),
            key: Some("agent:ops:s2".into()),
            limit: 10,
            max_day_rows: 1000,
        })
        .await
        .unwrap();
    assert_eq!(one.sessions[0].agent_id, "ops");
    // The listed sessions' day rows are bounded; the ones past the bound are counted.
    let bounded = db
        .usage_sessions(SessionsUsageQuery {
            range: all.clone(),
            key: None,
            limit: 10,
            max_day_rows: 1,
        })
        .await
        .unwrap();
    assert_eq!((bounded.sessions.len(), bounded.count), (1, 2));
    assert_eq!(one.sessions[0].days[0].counts.input, 400);
    drop(db);
    // A database from before the rollups: built from the runs it keeps (no tool counts).
    Connection::open(&path)
        .unwrap()
        .execute_batch("DELETE FROM usage_rollup; DELETE FROM usage_days;")
        .unwrap();
    let (db, _) = GatewayDb::open(&path, 11).unwrap();
    let c = summed(&db.usage_days(all).await.unwrap());
    assert_eq!((c.runs, c.input, c.output, c.total), (3, 700, 70, 770));
    assert_eq!((c.tool_calls, c.duration_ms), (0, 120));
    let page = db
        .usage_sessions(SessionsUsageQuery {
            range: main,
            key: None,
            limit: 10,
            max_day_rows: 1000,
        })
        .await
        .unwrap();
    assert_eq!(
        page.sessions[0]
            .days
            .iter()
            .map(|d| d.counts.input)
            .sum::<u64>(),
        300
    );
}

/// A provider's absurd token report is counted as at most `MAX_PER_RUN`: the rollup's sums
/// stay integers, and every later outcome of that agent, day and model is still recorded.
#[tokio::test]
async fn absurd_token_counts_are_bounded_and_later_outcomes_still_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.sqlite");
    let (db, _) = GatewayDb::open(&path, 10).unwrap();
    let at = 20_000 * usage::DAY_MS + 5;
    for id in ["x1", "x2", "x3"] {
        let (run, t) = finished(id, "agent:main:s", "main", at, (u64::MAX / 2, 1), false);
        db.accept(run).await.unwrap();
        db.finish(id.into(), t).await.unwrap();
    }
    let (run, t) = finished("x4", "agent:main:s", "main", at, (10, 1), false);
    db.accept(run).await.unwrap();
    db.finish("x4".into(), t).await.unwrap();
    let rows = db
        .usage_days(usage::UsageQuery {
            first_day: 20_000,
            last_day: 20_000,
            agent_id: None,
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].counts.runs, 4);
    assert_eq!(rows[0].counts.input, 3 * usage::MAX_PER_RUN + 10);
    assert!(matches!(
        db.lookup("x4".into()).await.unwrap(),
        Some(StoredRun::Terminal { .. })
    ));
}

/// A job's runs are recorded once per run id and listed newest first; a removed job's
/// history stays until it is old, then goes; an existing job's stays whatever its age.
#[test]
fn cron_history_is_once_per_run_and_outlives_its_job_for_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let conn = migrated(&dir);
    let entry = |job: &str, run: &str, ts: u64| ipc::gateway::CronRunEntry {
        ts,
        job_id: job.into(),
        action: "finished".into(),
        status: "ok".into(),
        summary: None,
        error: None,
        run_at_ms: ts,
        duration_ms: None,
        next_run_at_ms: None,
        delivered: false,
        delivery_status: "not-requested".into(),
        session_key: None,
        run_id: Some(run.into()),
        job_name: None,
    };
    assert!(cron::record(&conn, &entry("kept", "cron:kept:1", 1)).unwrap());
    assert!(
        !cron::record(&conn, &entry("kept", "cron:kept:1", 1)).unwrap(),
        "once per run id"
    );
    assert!(cron::record(&conn, &entry("kept", "cron:kept:2", 2)).unwrap());
    assert!(cron::record(&conn, &entry("gone", "cron:gone:1", 1)).unwrap());
    assert!(cron::record(&conn, &entry("gone", "cron:gone:9", 9)).unwrap());
    let (page, total) = cron::runs(&conn, Some("kept"), None, 10, 0).unwrap();
    assert_eq!((page[0].ts, total), (2, 2));
    conn.execute(
        "INSERT INTO cron_jobs(id, agent_id, job_json, updated_at) VALUES ('kept', 'main', '{}', 0)",
        [],
    )
    .unwrap();
    assert_eq!(
        cron::prune_removed(&conn, 5).unwrap(),
        1,
        "the removed job's old entry"
    );
    let (_, all) = cron::runs(&conn, None, None, 10, 0).unwrap();
    assert_eq!(all, 3);
}
