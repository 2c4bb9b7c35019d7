//! Firing: the loop that wakes at the next due job, and one job's run from its start to
//! its recorded outcome. Every due occurrence is a run admitted under the key
//! `cron:<job>:<occurrence>` before the job's next occurrence is stored, so a crash between
//! the two fires the same occurrence again under the same key, which starts nothing and
//! answers the first run's outcome: each occurrence runs once.

use std::sync::Arc;
use std::time::Duration;

use ipc::gateway::{CronEvent, CronJob, CronPayload, CronRunEntry};

use crate::backend::local::Started;
use crate::control::WaitReply;
use crate::cron::job;
use crate::events::{now_ms, Deferred};
use crate::gateway::Gateway;
use crate::gatewaydb::StoredRun;
use crate::outcome::StoredTerminal;

use super::super::{admit_self, Route, SelfStart};

/// Most characters of a run's reply kept as its history entry's summary.
const SUMMARY_CHARS: usize = 2_000;
/// The loop looks again at least this often (a clock that jumped, a missed wakeup).
const MAX_NAP: Duration = Duration::from_secs(60);

/// Why a job runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fire {
    /// Its occurrence came due.
    Due,
    /// `cron.run` asked (`force`): its schedule stays as it is.
    Manual(u64),
}

/// Tells every operator connection of a job's change.
pub fn tell(gw: &Gateway, event: CronEvent) {
    gw.hub
        .publish_deferred(&Deferred::event(ipc::gateway::events::CRON, &event));
}

pub fn event(job: &CronJob, action: &str) -> CronEvent {
    CronEvent {
        job_id: job.id.clone(),
        action: action.into(),
        job: Some(job.clone()),
        run_at_ms: None,
        next_run_at_ms: job.state.next_run_at_ms,
        run_id: None,
        status: None,
        error: None,
    }
}

/// Stores `job` and keeps it in memory; a store that fails is logged (the memory copy
/// still fires, and the run's key keeps it from running twice).
pub async fn keep(gw: &Gateway, job: &CronJob) {
    if let Err(e) = gw.db.cron_put(job.clone()).await {
        tracing::warn!(job = %job.id, error = %e, "Cannot store a cron job.");
    }
    gw.cron.put(job.clone());
}

/// Loads the jobs before the gateway serves: settles runs a previous gateway left in
/// flight, and skips missed recurring occurrences when `skip_missed` says so (otherwise
/// what came due while the gateway was stopped is due now, and fires once per job).
pub async fn load(gw: &Arc<Gateway>) -> Result<(), crate::gatewaydb::DbError> {
    let jobs = gw.db.cron_jobs().await?;
    let now = now_ms();
    let skip_missed = gw.config().cron.skip_missed;
    let mut loaded = Vec::with_capacity(jobs.len());
    for mut j in jobs {
        if let Some(run_id) = j.state.running_run_id.clone() {
            // A run the previous gateway started: its outcome, recorded (it ended `error`
            // if that gateway died with it).
            let due = j.state.running_at_ms.unwrap_or(now);
            let (gw, job) = (gw.clone(), j.clone());
            tokio::spawn(async move { settle_stored(&gw, job, run_id, due).await });
            j.state.running_run_id = None;
            j.state.running_at_ms = None;
        }
        let missed = j.state.next_run_at_ms.is_some_and(|at| at < now);
        if missed && skip_missed && j.enabled {
            if let Some(s) = job::schedule_of(&j, now).filter(|s| !s.is_one_shot()) {
                j.state.next_run_at_ms = s.next_after(now);
                j.next_run_at_ms = j.state.next_run_at_ms;
                keep(gw, &j).await;
                tell(gw, event(&j, "scheduled"));
            }
        }
        loaded.push(j);
    }
    gw.cron.load(loaded);
    Ok(())
}

/// The scheduler: fires each job as it comes due until the gateway stops.
pub async fn scheduler(gw: Arc<Gateway>) {
    loop {
        let wait = gw.cron.next_due().map_or(MAX_NAP, |at| {
            Duration::from_millis(at.saturating_sub(now_ms())).min(MAX_NAP)
        });
        tokio::select! {
            _ = gw.stopping.cancelled() => return,
            _ = gw.cron.changed.notified() => continue,
            _ = tokio::time::sleep(wait) => {}
        }
        // A draining gateway starts nothing: what is due fires after the restart.
        if gw.draining.load(std::sync::atomic::Ordering::Relaxed) {
            tokio::select! {
                _ = gw.stopping.cancelled() => return,
                _ = tokio::time::sleep(MAX_NAP) => continue,
            }
        }
        for job in gw.cron.take_due(now_ms()) {
            let gw = gw.clone();
            tokio::spawn(async move { fire(&gw, job, Fire::Due).await });
        }
    }
}

/// Runs `job` once (it is marked running already) and records how it went.
pub async fn fire(gw: &Arc<Gateway>, mut job: CronJob, why: Fire) {
    let started_at = now_ms();
    let (due, run_id) = match why {
        Fire::Due => {
            let due = job.state.next_run_at_ms.unwrap_or(started_at);
            (due, format!("cron:{}:{due}", job.id))
        }
        Fire::Manual(at) => (at, format!("manual:{}:{at}:1", job.id)),
    };
    let (session_key, message) = job::run_of(&job, due);
    let (model, thinking, timeout_ms) = match &job.payload {
        CronPayload::AgentTurn {
            model,
            thinking,
            timeout_seconds,
            ..
        } => (
            model.clone(),
            thinking.clone(),
            timeout_seconds.map(|s| s.saturating_mul(1000)),
        ),
        CronPayload::SystemEvent { .. } => (None, None, None),
    };
    let entry = if gw.config().agent(&job.agent_id).is_none() {
        // Its agent is gone: the job stops here, told, never a crash on every tick.
        job.enabled = false;
        failed_entry(
            &job,
            &run_id,
            started_at,
            format!(
                "agent {:?} no longer exists; the job is disabled",
                job.agent_id
            ),
        )
    } else {
        let route = Route {
            agent_id: job.agent_id.clone(),
            session_key: session_key.clone(),
        };
        let started = admit_self(
            gw,
            route,
            run_id.clone(),
            message,
            timeout_ms,
            model,
            thinking,
        )
        .await;
        // The occurrence is taken: the next one is stored only now (see the module doc).
        if why == Fire::Due {
            let next =
                job::schedule_of(&job, started_at).and_then(|s| s.after_run(due, started_at));
            job.state.next_run_at_ms = next;
            job.next_run_at_ms = next;
        }
        job.state.running_at_ms = Some(started_at);
        job.state.running_run_id = Some(run_id.clone());
        keep(gw, &job).await;
        tell(
            gw,
            CronEvent {
                run_at_ms: Some(started_at),
                run_id: Some(run_id.clone()),
                ..event(&job, "started")
            },
        );
        outcome(gw, &job, &run_id, &session_key, started_at, started).await
    };
    finish(gw, job, entry, why).await;
}

/// A history entry of a run that did not run.
fn failed_entry(job: &CronJob, run_id: &str, at: u64, error: String) -> CronRunEntry {
    CronRunEntry {
        ts: at,
        job_id: job.id.clone(),
        action: "finished".into(),
        status: "error".into(),
        summary: None,
        error: Some(error),
        run_at_ms: at,
        duration_ms: Some(0),
        next_run_at_ms: None,
        delivered: false,
        delivery_status: job::delivery_status(&job.delivery).into(),
        session_key: None,
        run_id: Some(run_id.to_owned()),
        job_name: Some(job.name.clone()),
    }
}

/// A run's history entry from its stored outcome.
fn entry_of(
    job: &CronJob,
    run_id: &str,
    session_key: &str,
    at: u64,
    t: &StoredTerminal,
) -> CronRunEntry {
    let final_json: serde_json::Value = serde_json::from_str(&t.final_json).unwrap_or_default();
    let texts: Vec<&str> = final_json["payload"]["result"]["payloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect();
    let summary: String = texts.join("\n").chars().take(SUMMARY_CHARS).collect();
    let ok = t.status == "ok";
    CronRunEntry {
        ts: t.ended_at,
        job_id: job.id.clone(),
        action: "finished".into(),
        status: if ok { "ok" } else { "error" }.into(),
        summary: (!summary.is_empty()).then_some(summary),
        error: if ok {
            None
        } else {
            t.error.clone().or_else(|| Some(t.status.clone()))
        },
        run_at_ms: at,
        duration_ms: Some(t.ended_at.saturating_sub(at)),
        next_run_at_ms: None,
        delivered: false,
        delivery_status: job::delivery_status(&job.delivery).into(),
        session_key: Some(session_key.to_owned()),
        run_id: Some(run_id.to_owned()),
        job_name: Some(job.name.clone()),
    }
}

/// Waits for the run's outcome, however its start went, as a history entry.
async fn outcome(
    gw: &Gateway,
    job: &CronJob,
    run_id: &str,
    session_key: &str,
    at: u64,
    started: SelfStart,
) -> CronRunEntry {
    let done = match started {
        SelfStart::Started(Started::New(rx)) => rx.await.ok(),
        SelfStart::Started(Started::Finished(t)) => {
            return entry_of(job, run_id, session_key, at, &t)
        }
        SelfStart::Started(Started::InFlight { .. }) | SelfStart::KeyUsed => {
            return stored_outcome(gw, job, run_id, session_key, at).await;
        }
        SelfStart::Refused(why) => return failed_entry(job, run_id, at, why),
    };
    match done {
        Some(o) => entry_of(job, run_id, session_key, at, &o.stored()),
        None => stored_outcome(gw, job, run_id, session_key, at).await,
    }
}

/// The outcome of a run recorded before (a crash between fire and record), waited for if
/// it is still running.
async fn stored_outcome(
    gw: &Gateway,
    job: &CronJob,
    run_id: &str,
    session_key: &str,
    at: u64,
) -> CronRunEntry {
    match gw.control.wait(run_id.to_owned()).await {
        Ok(WaitReply::Done(o)) => return entry_of(job, run_id, session_key, at, &o.stored()),
        Ok(WaitReply::Pending(rx)) => {
            if let Ok(o) = rx.await {
                return entry_of(job, run_id, session_key, at, &o.stored());
            }
        }
        _ => {}
    }
    match gw.db.lookup(run_id.to_owned()).await {
        Ok(Some(StoredRun::Terminal { terminal, .. })) => {
            entry_of(job, run_id, session_key, at, &terminal)
        }
        _ => failed_entry(job, run_id, at, "the run's outcome is not known".into()),
    }
}

/// A run a previous gateway left in flight: its outcome recorded once.
async fn settle_stored(gw: &Arc<Gateway>, job: CronJob, run_id: String, at: u64) {
    let (session_key, _) = job::run_of(&job, at);
    let entry = stored_outcome(gw, &job, &run_id, &session_key, at).await;
    if let Err(e) = gw.db.cron_record(entry).await {
        tracing::warn!(job = %job.id, error = %e, "Cannot record a cron run.");
    }
}

/// Records the run, updates the job's state (a one-shot that ran is removed or disabled)
/// and tells operators: `finished`, then `scheduled` or `removed`.
async fn finish(gw: &Gateway, fired: CronJob, mut entry: CronRunEntry, why: Fire) {
    let id = fired.id.clone();
    // The job as it is now: it may have been changed or removed while it ran.
    let Some(mut job) = gw.cron.get(&id).map(|mut j| {
        j.state.next_run_at_ms = fired
            .state
            .next_run_at_ms
            .filter(|_| why == Fire::Due)
            .or(j.state.next_run_at_ms);
        j.next_run_at_ms = j.state.next_run_at_ms;
        j.enabled = j.enabled && fired.enabled;
        j
    }) else {
        let _ = gw.db.cron_record(entry).await;
        gw.cron.done(&id);
        return;
    };
    entry.next_run_at_ms = job.state.next_run_at_ms;
    job.state.running_at_ms = None;
    job.state.running_run_id = None;
    job.state.last_run_at_ms = Some(entry.run_at_ms);
    job.state.last_run_status = Some(entry.status.clone());
    job.state.last_error = entry.error.clone();
    job.state.last_duration_ms = entry.duration_ms;
    job.state.last_delivery_status = Some(entry.delivery_status.clone());
    if let Err(e) = gw.db.cron_record(entry.clone()).await {
        tracing::warn!(job = %id, error = %e, "Cannot record a cron run.");
    }
    let one_shot = job::schedule_of(&job, now_ms()).is_some_and(|s| s.is_one_shot());
    let remove =
        why == Fire::Due && one_shot && entry.status == "ok" && job.delete_after_run == Some(true);
    if why == Fire::Due && one_shot && !remove {
        job.enabled = false;
    }
    // Stored before it is told: a client that reads the job on `finished` sees its end.
    if remove {
        let _ = gw.db.cron_remove(id.clone()).await;
        gw.cron.remove(&id);
    } else {
        keep(gw, &job).await;
    }
    gw.cron.done(&id);
    tell(
        gw,
        CronEvent {
            run_at_ms: Some(entry.run_at_ms),
            run_id: entry.run_id.clone(),
            status: Some(entry.status.clone()),
            error: entry.error.clone(),
            ..event(&job, "finished")
        },
    );
    if remove {
        tell(gw, event(&job, "removed"));
    } else if job.enabled {
        tell(gw, event(&job, "scheduled"));
    }
}
