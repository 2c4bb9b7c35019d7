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
