//! The scheduler's methods (`cron.status|list|get|add|update|remove|run|runs`, `wake`) in
//! OpenClaw 2026.9.6's shapes; the firing is [`fire`].

pub mod fire;
mod prune;

use std::sync::Arc;

use ipc::gateway::{
    m, CronAddParams, CronCompactJob, CronIdParams, CronJob, CronListEntry, CronListParams,
    CronListResult, CronRemoveResult, CronRunParams, CronRunResult, CronRunsParams, CronRunsResult,
    CronStatusResult, CronUpdateParams, Done, ErrorShape, Method, WakeParams,
};
use serde_json::json;

use super::request::Request;
use super::{misrouted, serve, Answer};
use crate::connection::out::Out;
use crate::cron::job;
use crate::events::now_ms;
use crate::gateway::Gateway;
use fire::{event, tell, Fire};

/// `cron.list`'s page size when the request names none.
const DEFAULT_LIMIT: u32 = 50;
/// Most jobs a gateway keeps.
pub const MAX_JOBS: usize = 100_000;

/// Serves one scheduler method.
pub(super) async fn method(gw: &Arc<Gateway>, method: Method, req: Request, out: &Out) {
    match method {
        Method::CronStatus => serve::<m::CronStatus, _>(req, out, |_| async { status(gw) }).await,
        Method::CronList => serve::<m::CronList, _>(req, out, |p| async { list(gw, p) }).await,
        Method::CronGet => serve::<m::CronGet, _>(req, out, |p| async move { get(gw, &p) }).await,
        Method::CronAdd => serve::<m::CronAdd, _>(req, out, |p| add(gw, p)).await,
        Method::CronUpdate => serve::<m::CronUpdate, _>(req, out, |p| update(gw, p)).await,
        Method::CronRemove => serve::<m::CronRemove, _>(req, out, |p| remove(gw, p)).await,
        Method::CronRun => serve::<m::CronRun, _>(req, out, |p| run(gw, p)).await,
        Method::CronRuns => serve::<m::CronRuns, _>(req, out, |p| runs(gw, p)).await,
        Method::Wake => serve::<m::Wake, _>(req, out, |p| wake(gw, p)).await,
        other => misrouted(other, req, out).await,
    }
}

/// OpenClaw's refusal of an unknown job id.
fn not_found(id: &str) -> ErrorShape {
    ErrorShape::invalid(format!(
        "Automation not found: {id}. List automations and retry with a current job id."
    ))
    .with_details(json!({"code": "CRON_JOB_NOT_FOUND", "jobId": id}))
}

fn job_of(gw: &Gateway, id: Option<&str>) -> Answer<CronJob> {
    let id = id.ok_or_else(|| ErrorShape::invalid("id is required"))?;
    gw.cron.get(id).ok_or_else(|| not_found(id))
}

fn status(gw: &Gateway) -> Answer<CronStatusResult> {
    Ok(CronStatusResult {
        enabled: gw.config().cron.enabled,
        triggers_enabled: gw.config().cron.enabled,
        storage: "sqlite".into(),
        store_path: gw.db.path().display().to_string(),
        jobs: gw.cron.len() as u64,
        next_wake_at_ms: gw.cron.next_due(),
    })
}

fn list(gw: &Gateway, p: CronListParams) -> Answer<CronListResult> {
    let limit = p.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=200).contains(&limit) {
        return Err(ErrorShape::invalid(
            "invalid cron.list params: limit must be 1..200",
        ));
    }
    let offset = p.offset.unwrap_or(0);
    let query = p.query.as_deref().map(str::to_lowercase);
    let agent = p.agent_id.as_deref().or(p.session_agent_id.as_deref());
    // `enabled`: the Control UI's filter (`enabled`, `disabled`, `all`), else
    // `includeDisabled` (OpenClaw's default leaves disabled jobs out).
    let wanted = |j: &CronJob| match p.enabled.as_ref().and_then(|e| e.as_str()) {
        Some("disabled") => !j.enabled,
        Some("all") => true,
        Some("enabled") => j.enabled,
        _ => j.enabled || p.include_disabled == Some(true),
    };
    let mut jobs: Vec<CronJob> = gw
        .cron
        .list()
        .into_iter()
        .filter(|j| wanted(j))
        .filter(|j| agent.is_none_or(|a| j.agent_id == a))
        .filter(|j| {
            query
                .as_deref()
                .is_none_or(|q| j.name.to_lowercase().contains(q))
        })
        .collect();
    jobs.sort_by_key(|j| (j.state.next_run_at_ms.unwrap_or(u64::MAX), j.created_at_ms));
    let revision = format!("{}:{}", gw.cron.revision(), jobs.len());
    let total = jobs.len() as u64;
    let compact = p.compact == Some(true);
    let page: Vec<CronListEntry> = jobs
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .map(|j| {
            if compact {
                CronListEntry::Compact(Box::new(compact_row(j)))
            } else {
                CronListEntry::Full(Box::new(j))
            }
        })
        .collect();
    let next = u64::from(offset) + page.len() as u64;
    let previews = !(p.compact == Some(true) || p.include_delivery_previews == Some(false));
    Ok(CronListResult {
        jobs: page,
        snapshot_revision: format!("sha256:{}", crate::secrets::sha256_hex(revision.as_bytes())),
        total,
        offset,
        limit,
        has_more: next < total,
        next_offset: (next < total).then(|| u32::try_from(next).unwrap_or(u32::MAX)),
        delivery_previews: previews.then(serde_json::Map::new),
    })
}

/// A job as `cron.list {compact:true}` gives it.
fn compact_row(j: CronJob) -> CronCompactJob {
    let iso = |ms: Option<u64>| ms.map(crate::cron::schedule::iso);
    let kind = match &j.schedule {
        ipc::gateway::CronSchedule::At { .. } => "at",
        ipc::gateway::CronSchedule::Every { .. } => "every",
        ipc::gateway::CronSchedule::Cron { .. } => "cron",
    };
    CronCompactJob {
        next_run_at: iso(j.state.next_run_at_ms),
        next_run_at_ms: j.state.next_run_at_ms,
        schedule_kind: kind.into(),
        last_run_at: iso(j.state.last_run_at_ms),
        last_run_at_ms: j.state.last_run_at_ms,
        last_run_status: j.state.last_run_status,
        last_run_error: j.state.last_error,
        running_at_ms: j.state.running_at_ms,
        effective_agent_id: j.agent_id,
        schedule: j.schedule,
        id: j.id,
        name: j.name,
        enabled: j.enabled,
    }
}

fn get(gw: &Gateway, p: &CronIdParams) -> Answer<CronJob> {
    job_of(gw, p.id())
}

async fn add(gw: &Arc<Gateway>, p: CronAddParams) -> Answer<CronJob> {
    let agent = p.agent_id.clone().unwrap_or_else(|| "main".into());
    if gw.config().agent(&agent).is_none() {
        return Err(ErrorShape::invalid(format!("unknown agent id {agent:?}")));
    }
    if gw.cron.len() >= MAX_JOBS {
        return Err(ErrorShape::invalid(format!(
            "this gateway already has {MAX_JOBS} jobs"
        )));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let job =
        job::new_job(p, id, &agent, now_ms()).map_err(|e| ErrorShape::invalid(e.to_string()))?;
    let _written = gw.cron.write.lock().await;
    gw.db
        .cron_put(job.clone())
        .await
        .map_err(|e| ErrorShape::unavailable(e.to_string(), Some(1000)))?;
    gw.cron.put(job.clone());
    tell(gw, event(&job, "added"));
    Ok(job)
}

async fn update(gw: &Arc<Gateway>, p: CronUpdateParams) -> Answer<CronJob> {
    let _written = gw.cron.write.lock().await;
    let current = job_of(gw, p.id.as_deref().or(p.job_id.as_deref()))?;
    let job =
        job::patched(current, p.patch, now_ms()).map_err(|e| ErrorShape::invalid(e.to_string()))?;
    gw.db
        .cron_put(job.clone())
        .await
        .map_err(|e| ErrorShape::unavailable(e.to_string(), Some(1000)))?;
    gw.cron.put(job.clone());
    tell(gw, event(&job, "updated"));
    Ok(job)
}

async fn remove(gw: &Arc<Gateway>, p: CronIdParams) -> Answer<CronRemoveResult> {
    let _written = gw.cron.write.lock().await;
    let job = job_of(gw, p.id())?;
    gw.db
        .cron_remove(job.id.clone())
        .await
        .map_err(|e| ErrorShape::unavailable(e.to_string(), Some(1000)))?;
    gw.cron.remove(&job.id);
    tell(gw, event(&job, "removed"));
    Ok(CronRemoveResult {
        ok: true,
        removed: true,
    })
}

async fn run(gw: &Arc<Gateway>, p: CronRunParams) -> Answer<CronRunResult> {
    let job = job_of(gw, p.id.as_deref().or(p.job_id.as_deref()))?;
    let not_run = |reason: &str| CronRunResult::NotRun {
        ok: true,
        ran: false,
        reason: reason.into(),
    };
    let now = now_ms();
    let why = match p.mode.as_deref() {
        None | Some("force") => Fire::Manual(now),
        Some("due") if job.enabled && job.state.next_run_at_ms.is_some_and(|at| at <= now) => {
            Fire::Due
        }
        Some("due") => return Ok(not_run("not-due")),
        Some(other) => {
            return Err(ErrorShape::invalid(format!(
                "mode {other:?} must be due or force"
            )))
        }
    };
    if !gw.cron.try_start(&job.id) {
        return Ok(not_run("already-running"));
    }
    let run_id = match why {
        Fire::Manual(at) => format!("manual:{}:{at}:1", job.id),
        Fire::Due => format!(
            "cron:{}:{}",
            job.id,
            job.state.next_run_at_ms.unwrap_or(now)
        ),
    };
    let gw = gw.clone();
    tokio::spawn(async move { fire::fire(&gw, job, why).await });
    Ok(CronRunResult::Enqueued {
        ok: true,
        enqueued: true,
        run_id,
    })
}

async fn runs(gw: &Arc<Gateway>, p: CronRunsParams) -> Answer<CronRunsResult> {
    let id = match (p.id.or(p.job_id), p.scope.as_deref()) {
        (Some(id), _) => Some(id),
        (None, Some("all")) => None,
        (None, _) => return Err(ErrorShape::invalid("id is required (or scope: \"all\")")),
    };
    let limit = p.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, 200);
    let offset = p.offset.unwrap_or(0);
    let (entries, total) = gw
        .db
        .cron_runs(id, p.run_id, limit, offset)
        .await
        .map_err(|e| ErrorShape::unavailable(e.to_string(), Some(1000)))?;
    let next = u64::from(offset) + entries.len() as u64;
    Ok(CronRunsResult {
        entries,
        total,
        offset,
        limit,
        has_more: next < total,
        next_offset: (next < total).then(|| u32::try_from(next).unwrap_or(u32::MAX)),
    })
}

/// `wake`: the text as a system event, handled now in the agent's main session.
async fn wake(gw: &Arc<Gateway>, p: WakeParams) -> Answer<Done> {
    let agent = p.agent_id.unwrap_or_else(|| "main".into());
    if gw.config().agent(&agent).is_none() {
        return Err(ErrorShape::invalid(format!("unknown agent id {agent:?}")));
    }
    if p.text.trim().is_empty() || p.text.len() > 100_000 {
        return Err(ErrorShape::invalid("text must be 1-100000 characters"));
    }
    let now = now_ms();
    let message = format!(
        "System: [{}] {}\n\nA wake event was triggered. Handle it internally; if nothing needs attention, reply NO_REPLY.",
        crate::cron::schedule::iso(now),
        p.text.trim()
    );
    let route = super::Route {
        agent_id: agent.clone(),
        session_key: format!("agent:{agent}:main"),
    };
    let run_id = format!("wake:{}", uuid::Uuid::new_v4());
    match super::admit_self(gw, route, run_id, message, None, None, None).await {
        super::SelfStart::Started(_) => Ok(Done { ok: true }),
        super::SelfStart::KeyUsed => Ok(Done { ok: true }),
        super::SelfStart::Refused(why) => Err(ErrorShape::invalid(why)),
        super::SelfStart::Unavailable(why) => Err(ErrorShape::unavailable(why, Some(1000))),
    }
}

/// Loads the jobs (before the gateway serves: `cron.*` answers with them from the first
/// request) and starts the scheduler for the gateway's lifetime (not in cluster mode yet:
/// there each job must fire on its agent's owner only).
pub async fn start(gw: &Arc<Gateway>) {
    if let Err(e) = fire::load(gw).await {
        tracing::error!(error = %e, "Cannot read the cron jobs; the scheduler does not run.");
        return;
    }
    // Run sessions expire whether or not jobs fire here.
    tokio::spawn(prune::prune_loop(gw.clone()));
    if !gw.config().cron.enabled {
        tracing::info!("The scheduler is off ([cron] enabled = false).");
        return;
    }
    if gw.backend.elsewhere().is_some() {
        tracing::warn!("Cluster mode: scheduled jobs do not fire yet (cron.* still answers).");
        return;
    }
    tokio::spawn(fire::scheduler(gw.clone()));
}
