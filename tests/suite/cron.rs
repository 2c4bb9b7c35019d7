//! The scheduler (issue 40), as OpenClaw 2026.9.6 answers it (`tools-cron-2026.9.6.md`
//! section 6): jobs added, listed, run and removed over the Gateway, `cron` events in
//! OpenClaw's order, and every due occurrence run exactly once, across a stop, a crash and
//! an agent that is gone.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loopgate_tests::{hold, reply, Client, Gateway};
use serde_json::{json, Value};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn iso(ms: u64) -> String {
    ipc::calendar::iso_millis(ms)
}

/// Adds a job; its answer.
async fn add(c: &mut Client, job: Value) -> Value {
    let r = c.call("cron.add", job).await;
    assert_eq!(r["ok"], true, "{r}");
    r["payload"].clone()
}

/// The next `cron` event of `job` with `action`.
async fn cron_event(c: &mut Client, job: &str, action: &str) -> Value {
    let (job, action) = (job.to_owned(), action.to_owned());
    let f = c
        .wait_for(move |f| {
            f["event"] == "cron" && f["payload"]["jobId"] == job && f["payload"]["action"] == action
        })
        .await;
    f["payload"].clone()
}

async fn runs(c: &mut Client, job: &str) -> Vec<Value> {
    let r = c.call("cron.runs", json!({"id": job})).await;
    assert_eq!(r["ok"], true, "{r}");
    r["payload"]["entries"].as_array().unwrap().clone()
}

/// Requests the model got whose last message mentions `needle`.
fn asked(gw: &Gateway, needle: &str) -> usize {
    gw.model
        .requests()
        .iter()
        .filter(|r| {
            r.body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .is_some_and(|t| t.contains(needle))
        })
        .count()
}

/// Acceptance of issue 40: an `at` job fires once within 1 s of its time, in OpenClaw's
/// event order (`started`, `finished`, `removed`), and its run is in `cron.runs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_at_job_fires_once_within_a_second_of_its_time_r_f1() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    gw.model.push(reply("reminded"));
    let at = now_ms() + 1500;
    let job = add(
        &mut c,
        json!({"name": "tc-at", "schedule": {"kind": "at", "at": iso(at)}, "sessionTarget": "isolated",
               "payload": {"kind": "agentTurn", "message": "at-job-ping"}, "delivery": {"mode": "none"}}),
    )
    .await;
    let id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (job["enabled"].as_bool(), job["deleteAfterRun"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(job["state"]["nextRunAtMs"].as_u64(), Some(at));
    assert_eq!(job["wakeMode"], "now");
    let started = cron_event(&mut c, &id, "started").await;
    let lag = started["runAtMs"].as_u64().unwrap() - at;
    assert!(lag < 1000, "fired {lag} ms late");
    let finished = cron_event(&mut c, &id, "finished").await;
    assert_eq!(finished["status"], "ok", "{finished}");
    assert_eq!(finished["job"]["state"]["lastRunStatus"], "ok");
    cron_event(&mut c, &id, "removed").await;
    let entries = runs(&mut c, &id).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["summary"], "reminded");
    assert_eq!(entries[0]["runId"], format!("cron:{id}:{at}"));
    assert_eq!(
        entries[0]["sessionKey"],
        format!("agent:main:cron:{id}:run:{at}")
    );
    assert_eq!(asked(&gw, "at-job-ping"), 1);
    let r = c.call("cron.get", json!({"id": id})).await;
    assert_eq!(r["error"]["details"]["code"], "CRON_JOB_NOT_FOUND", "{r}");
    gw.logs.assert_clean(&[]);
}

/// Acceptance of issue 40: an `every` job fires again and again, each run from the last
/// one's start, and `cron.remove` stops it: a later job fires and the removed one no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_job_fires_repeatedly_and_stops_on_remove_r_f1() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let job = add(
        &mut c,
        json!({"name": "tc-every", "schedule": {"kind": "every", "everyMs": 1000}, "sessionTarget": "session:agent:main:tl-cron",
               "payload": {"kind": "agentTurn", "message": "every-ping"}}),
    )
    .await;
    let id = job["id"].as_str().unwrap().to_owned();
    let anchor = job["schedule"]["anchorMs"].as_u64().unwrap();
    assert_eq!(job["state"]["nextRunAtMs"].as_u64(), Some(anchor + 1000));
    let first = cron_event(&mut c, &id, "started").await["runAtMs"]
        .as_u64()
        .unwrap();
    cron_event(&mut c, &id, "finished").await;
    let scheduled = cron_event(&mut c, &id, "scheduled").await;
    assert_eq!(scheduled["nextRunAtMs"].as_u64(), Some(first + 1000));
    cron_event(&mut c, &id, "started").await;
    cron_event(&mut c, &id, "finished").await;
    let r = c.call("cron.remove", json!({"id": id})).await;
    assert_eq!(r["payload"], json!({"ok": true, "removed": true}), "{r}");
    let r = c.call("cron.remove", json!({"id": id})).await;
    assert_eq!(
        r["error"]["message"],
        format!("Automation not found: {id}. List automations and retry with a current job id.")
    );
    let before = asked(&gw, "every-ping");
    assert_eq!(before, 2);
    // A witness due after two more periods: once it ran, the removed job had its chance.
    let witness = add(
        &mut c,
        json!({"name": "w", "schedule": {"kind": "at", "at": iso(now_ms() + 2500)}, "sessionTarget": "isolated",
               "payload": {"kind": "agentTurn", "message": "witness-ping"}}),
    )
    .await;
    cron_event(&mut c, witness["id"].as_str().unwrap(), "finished").await;
    assert_eq!(asked(&gw, "every-ping"), before, "the removed job fired");
    assert_eq!(runs(&mut c, &id).await.len(), 2, "history outlives the job");
    // The session target holds the runs.
    let h = c
        .call("chat.history", json!({"sessionKey": "agent:main:tl-cron"}))
        .await;
    assert!(
        h["payload"]["messages"].as_array().unwrap().len() >= 4,
        "{h}"
    );
    gw.logs.assert_clean(&[]);
}

/// Acceptance of issue 40: jobs that came due while the gateway was stopped run once after
/// it starts: the one-shot once, the recurring one once for all its missed slots, then on
/// its period again. Jobs, state and history survive the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_due_while_stopped_run_once_after_start_r_f1() {
    let mut gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let at = now_ms() + 1000;
    let one = add(
        &mut c,
        json!({"name": "missed-at", "schedule": {"kind": "at", "at": iso(at)}, "sessionTarget": "isolated",
               "payload": {"kind": "agentTurn", "message": "missed-at-ping"}}),
    )
    .await;
    let every = add(
        &mut c,
        json!({"name": "missed-every", "schedule": {"kind": "every", "everyMs": 1000}, "sessionTarget": "isolated",
               "payload": {"kind": "agentTurn", "message": "missed-every-ping"}}),
    )
    .await;
    let one_id = one["id"].as_str().unwrap().to_owned();
    let every_id = every["id"].as_str().unwrap().to_owned();
    let first_slot = every["state"]["nextRunAtMs"].as_u64().unwrap();
    drop(c);
    gw.stop(nix::sys::signal::Signal::SIGTERM).await;
    // Stopped across the one-shot's time and three of the other's slots.
    tokio::time::sleep_until(tokio::time::Instant::now() + Duration::from_millis(3500)).await;
    assert_eq!(asked(&gw, "missed-"), 0);
    gw.spawn().await;
    let mut c = gw.connect().await;
    let l = c.call("cron.list", json!({"includeDisabled": true})).await;
    assert_eq!(l["payload"]["total"], 2, "{l}");
    let f = cron_event(&mut c, &one_id, "finished").await;
    assert_eq!(f["runId"], format!("cron:{one_id}:{at}"));
    let e1 = cron_event(&mut c, &every_id, "finished").await;
    assert_eq!(
        e1["runId"],
        format!("cron:{every_id}:{first_slot}"),
        "the first missed slot, once"
    );
    let first_run = e1["runId"].clone();
    let next = c
        .wait_for(move |f| {
            f["event"] == "cron"
                && f["payload"]["action"] == "started"
                && f["payload"]["jobId"] == every_id.as_str()
                && f["payload"]["runId"] != first_run
        })
        .await["payload"]
        .clone();
    let caught_up = e1["runAtMs"].as_u64().unwrap();
    assert!(
        next["runAtMs"].as_u64().unwrap() >= caught_up + 1000,
        "one catch-up, then the period: {next}"
    );
    assert_eq!(runs(&mut c, &one_id).await.len(), 1);
    assert_eq!(asked(&gw, "missed-at-ping"), 1);
    gw.logs.assert_clean(&[]);
}

/// Acceptance of issue 40: a gateway killed (SIGKILL) while a fired job's run is in flight
/// never runs that occurrence again after restart: the run's key is in the database before
/// the job's next occurrence is, the restarted gateway records how the run ended (it died
/// with the gateway), and the job goes on with its next occurrence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_fire_and_record_never_runs_an_occurrence_twice_r_f1() {
    let mut gw = Gateway::start().await;
    let mut c = gw.connect().await;
    gw.model.push(hold("never finished"));
    let job = add(
        &mut c,
        json!({"name": "crash", "schedule": {"kind": "every", "everyMs": 60000, "anchorMs": now_ms() - 59_000},
               "sessionTarget": "isolated", "payload": {"kind": "agentTurn", "message": "crash-ping"}}),
    )
    .await;
    let id = job["id"].as_str().unwrap().to_owned();
    let due = job["state"]["nextRunAtMs"].as_u64().unwrap();
    cron_event(&mut c, &id, "started").await;
    // Readiness: the model got the run's request (and holds its answer).
    for _ in 0..1000 {
        if asked(&gw, "crash-ping") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(asked(&gw, "crash-ping"), 1);
    drop(c);
    gw.stop(nix::sys::signal::Signal::SIGKILL).await;
    gw.spawn().await;
    let mut c = gw.connect().await;
    // The run that died is recorded once, as the restarted gateway found it.
    let mut entries = Vec::new();
    for _ in 0..500 {
        entries = runs(&mut c, &id).await;
        if !entries.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["runId"], format!("cron:{id}:{due}"));
    assert_eq!(entries[0]["status"], "error");
    let job = c.call("cron.get", json!({"id": id})).await["payload"].clone();
    assert!(job["state"]["nextRunAtMs"].as_u64().unwrap() > due, "{job}");
    assert_eq!(asked(&gw, "crash-ping"), 1, "the occurrence ran once");
    gw.logs
        .assert_clean(&["Ended runs left open by a previous gateway"]);
}

/// A job whose agent is gone is disabled with a clear run error, and the gateway goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_agent_is_gone_is_disabled_not_a_crash_r_f1() {
    let gw = Gateway::start_with("[agents.list.ops]\nname = \"Ops\"\n").await;
    let mut c = gw.connect().await;
    let job = add(
        &mut c,
        json!({"name": "orphan", "agentId": "ops", "schedule": {"kind": "every", "everyMs": 1000}, "sessionTarget": "isolated",
               "payload": {"kind": "agentTurn", "message": "orphan-ping"}}),
    )
    .await;
    let id = job["id"].as_str().unwrap().to_owned();
    let r = c.call("agents.delete", json!({"agentId": "ops"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let f = cron_event(&mut c, &id, "finished").await;
    assert_eq!(f["status"], "error");
    assert_eq!(
        f["error"],
        "agent \"ops\" no longer exists; the job is disabled"
    );
    let got = c.call("cron.get", json!({"id": id})).await["payload"].clone();
    assert_eq!(got["enabled"], false, "{got}");
    assert_eq!(asked(&gw, "orphan-ping"), 0);
    let (_, fin) = c
        .turn(json!({"message": "still serving", "idempotencyKey": "after-orphan"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
}

/// A job changed while its run is in flight keeps the change: the run's end records its
/// state into the job as it is then (review of 139c0bd: a rescheduled one-shot was deleted
/// when the old run ended). The Control UI's compact rows and its all-jobs run list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_changed_during_its_run_keeps_the_change_r_f1() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    gw.model.push(hold("held"));
    let at = now_ms() + 1000;
    let job = add(
        &mut c,
        json!({"name": "moved", "schedule": {"kind": "at", "at": iso(at)}, "sessionTarget": "isolated",
               "payload": {"kind": "agentTurn", "message": "moved-ping"}}),
    )
    .await;
    let id = job["id"].as_str().unwrap().to_owned();
    cron_event(&mut c, &id, "started").await;
    let later = now_ms() + 3_600_000;
    let r = c
        .call(
            "cron.update",
            json!({"id": id, "patch": {"schedule": {"kind": "at", "at": iso(later)}}}),
        )
        .await;
    assert_eq!(
        r["payload"]["state"]["nextRunAtMs"].as_u64(),
        Some(later),
        "{r}"
    );
    gw.model.release();
    let f = cron_event(&mut c, &id, "finished").await;
    assert_eq!(f["status"], "ok", "{f}");
    let got = c.call("cron.get", json!({"id": id})).await;
    assert_eq!(got["payload"]["enabled"], true, "{got}");
    assert_eq!(
        got["payload"]["state"]["nextRunAtMs"].as_u64(),
        Some(later),
        "{got}"
    );
    assert_eq!(got["payload"]["state"]["lastRunStatus"], "ok", "{got}");
    // The Control UI's Automations page: compact rows with every field, and all runs.
    let l = c
        .call("cron.list", json!({"compact": true, "enabled": "all"}))
        .await;
    let row = &l["payload"]["jobs"][0];
    assert_eq!(row["nextRunAtMs"].as_u64(), Some(later), "{l}");
    assert_eq!(
        (row["scheduleKind"].as_str(), row["lastRunStatus"].as_str()),
        (Some("at"), Some("ok")),
        "{l}"
    );
    assert!(row.get("lastRunError").is_some_and(Value::is_null), "{l}");
    let all = c
        .call(
            "cron.runs",
            json!({"scope": "all", "limit": 50, "offset": 0, "sortDir": "desc"}),
        )
        .await;
    assert_eq!(all["payload"]["total"], 1, "{all}");
    gw.logs.assert_clean(&[]);
}

/// Isolated runs' sessions go once older than `[cron] session_retention_seconds` (OpenClaw's
/// `cron.sessionRetention`): a job every second would otherwise leave 86 400 a day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_run_sessions_expire_r_f1() {
    let gw = Gateway::start_with("[cron]\nsession_retention_seconds = 2\n").await;
    let mut c = gw.connect().await;
    let job = add(
        &mut c,
        json!({"name": "chatty", "schedule": {"kind": "every", "everyMs": 1000}, "sessionTarget": "isolated",
               "payload": {"kind": "agentTurn", "message": "chatty-ping"}}),
    )
    .await;
    let id = job["id"].as_str().unwrap().to_owned();
    cron_event(&mut c, &id, "finished").await;
    cron_event(&mut c, &id, "scheduled").await;
    cron_event(&mut c, &id, "finished").await;
    c.call("cron.remove", json!({"id": id})).await;
    let run_sessions = |r: &Value| {
        r["payload"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| {
                s["key"]
                    .as_str()
                    .is_some_and(|k| k.contains(":cron:") && k.contains(":run:"))
            })
            .count()
    };
    let listed = c.call("sessions.list", json!({})).await;
    assert!(run_sessions(&listed) >= 2, "{listed}");
    // Readiness: the pruner's rounds, a second apart, take them all.
    let mut left = usize::MAX;
    for _ in 0..200 {
        left = run_sessions(&c.call("sessions.list", json!({})).await);
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0, "expired run sessions are gone");
    assert_eq!(runs(&mut c, &id).await.len(), 2, "the run history stays");
    gw.logs.assert_clean(&[]);
}
