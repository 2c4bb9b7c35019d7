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

/// Loads the jobs before the gateway serves: settles runs a previous gateway left in
/// flight, and skips missed recurring occurrences when `skip_missed` says so (otherwise
/// what came due while the gateway was stopped is due now, and fires once per job).
pub async fn load(gw: &Arc<Gateway>) -> Result<(), crate::gatewaydb::DbError> {
    let jobs = gw.db.cron_jobs().await?;
    let now = now_ms();
    let skip_missed = gw.config().cron.skip_missed;
    let mut loaded = Vec::with_capacity(jobs.len());
    let mut settling = Vec::new();
    for mut j in jobs {
        if let Some(run_id) = j.state.running_run_id.clone() {
            // A run the previous gateway started: settled as any run (it ended `error` if
            // that gateway died with it), the job's state and a one-shot's end included.
            settling.push((j.clone(), run_id));
        }
        let missed = j.state.next_run_at_ms.is_some_and(|at| at < now);
        if missed && skip_missed && j.enabled && j.state.running_run_id.is_none() {
            if let Some(s) = job::schedule_of(&j, now).filter(|s| !s.is_one_shot()) {
                j.state.next_run_at_ms = s.next_after(now);
                j.next_run_at_ms = j.state.next_run_at_ms;
                if let Err(e) = gw.db.cron_put(j.clone()).await {
                    tracing::warn!(job = %j.id, error = %e, "Cannot store a cron job.");
                }
                tell(gw, event(&j, "scheduled"));
            }
        }
        loaded.push(j);
    }
    gw.cron.load(loaded);
    for (j, run_id) in settling {
        gw.cron.try_start(&j.id);
        let gw = gw.clone();
        tokio::spawn(async move { settle_stored(&gw, j, run_id).await });
    }
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
pub async fn fire(gw: &Arc<Gateway>, job: CronJob, why: Fire) {
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
        if let SelfStart::Unavailable(why_not) = &started {
            // Not run, not consumed: it stays due, looked at again a little later.
            tracing::warn!(job = %job.id, reason = %why_not, "A due cron job cannot start now; it is tried again in 30 s.");
            defer(gw, &job).await;
            return;
        }
        // The occurrence is taken: the next one is stored only now (see the module doc),
        // into the job as it is now (changed or removed meanwhile: theirs wins).
        let next = job::schedule_of(&job, started_at).and_then(|s| s.after_run(due, started_at));
        let written = gw.cron.write.lock().await;
        let current = gw.cron.update(&job.id, |j| {
            if why == Fire::Due && j.updated_at_ms == job.updated_at_ms {
                j.state.next_run_at_ms = next;
                j.next_run_at_ms = next;
            }
            j.state.running_at_ms = Some(started_at);
            j.state.running_run_id = Some(run_id.clone());
        });
        if let Some(current) = &current {
            store(gw, current).await;
        }
        drop(written);
        tell(
            gw,
            CronEvent {
                run_at_ms: Some(started_at),
                run_id: Some(run_id.clone()),
                ..event(current.as_ref().unwrap_or(&job), "started")
            },
        );
        outcome(gw, &job, &run_id, &session_key, started_at, started).await
    };
    let agent_gone = gw.config().agent(&job.agent_id).is_none();
    finish(gw, &job, entry, why, agent_gone).await;
}

/// A due job that could not start now: due again in 30 s (a new occurrence: the refused one
/// never ran).
async fn defer(gw: &Gateway, fired: &CronJob) {
    let at = now_ms() + 30_000;
    let written = gw.cron.write.lock().await;
    let current = gw.cron.update(&fired.id, |j| {
        if j.updated_at_ms == fired.updated_at_ms {
            j.state.next_run_at_ms = Some(at);
            j.next_run_at_ms = Some(at);
        }
    });
    if let Some(current) = &current {
        store(gw, current).await;
    }
    drop(written);
    gw.cron.done(&fired.id);
}

/// Stores `job` (a store that fails is logged: the memory copy still fires, and the run's
/// key keeps it from running twice).
async fn store(gw: &Gateway, job: &CronJob) {
    if let Err(e) = gw.db.cron_put(job.clone()).await {
        tracing::warn!(job = %job.id, error = %e, "Cannot store a cron job.");
    }
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
        SelfStart::Refused(why) | SelfStart::Unavailable(why) => {
            return failed_entry(job, run_id, at, why)
        }
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

/// A run a previous gateway left in flight (`cron:<job>:<occurrence>` or
/// `manual:<job>:<ms>:1`): its outcome recorded once, the job's state updated as after any
/// run (a one-shot's end included).
async fn settle_stored(gw: &Arc<Gateway>, job: CronJob, run_id: String) {
    let at = job.state.running_at_ms.unwrap_or_else(now_ms);
    let occurrence = |prefix: &str| {
        run_id
            .strip_prefix(prefix)
            .and_then(|rest| rest.split(':').next())
            .and_then(|ms| ms.parse::<u64>().ok())
    };
    let why = match occurrence(&format!("manual:{}:", job.id)) {
        Some(ms) => Fire::Manual(ms),
        None => Fire::Due,
    };
    let due = match why {
        Fire::Manual(ms) => ms,
        Fire::Due => occurrence(&format!("cron:{}:", job.id)).unwrap_or(at),
    };
    let (session_key, _) = job::run_of(&job, due);
    let entry = stored_outcome(gw, &job, &run_id, &session_key, at).await;
    finish(gw, &job, entry, why, false).await;
}

/// Records the run, updates the job's state as it is now (a one-shot whose schedule did not
/// change meanwhile is removed, or disabled when its run failed; `disable`: its agent is
/// gone) and tells operators: `finished`, then `scheduled` or `removed`.
async fn finish(gw: &Gateway, fired: &CronJob, mut entry: CronRunEntry, why: Fire, disable: bool) {
    let id = fired.id.clone();
    let written = gw.cron.write.lock().await;
    let mut remove = false;
    let current = gw.cron.update(&id, |j| {
        j.state.running_at_ms = None;
        j.state.running_run_id = None;
        j.state.last_run_at_ms = Some(entry.run_at_ms);
        j.state.last_run_status = Some(entry.status.clone());
        j.state.last_error = entry.error.clone();
        j.state.last_duration_ms = entry.duration_ms;
        j.state.last_delivery_status = Some(entry.delivery_status.clone());
        if disable {
            j.enabled = false;
        }
        let unchanged = j.updated_at_ms == fired.updated_at_ms;
        let one_shot = job::schedule_of(j, entry.run_at_ms).is_some_and(|s| s.is_one_shot());
        if why == Fire::Due && unchanged && one_shot {
            remove = entry.status == "ok" && j.delete_after_run == Some(true);
            j.enabled = false;
        }
    });
    entry.next_run_at_ms = current.as_ref().and_then(|j| j.state.next_run_at_ms);
    if let Err(e) = gw.db.cron_record(entry.clone()).await {
        tracing::warn!(job = %id, error = %e, "Cannot record a cron run.");
    }
    // Stored before it is told: a client that reads the job on `finished` sees its end.
    match &current {
        Some(_) if remove => {
            let _ = gw.db.cron_remove(id.clone()).await;
            gw.cron.remove(&id);
        }
        Some(job) => store(gw, job).await,
        None => {}
    }
    drop(written);
    gw.cron.done(&id);
    let Some(job) = current else {
        return;
    };
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
