//! A job as `cron.add` makes it and `cron.update` changes it, checked; and what one of its
//! runs is (session and message). Pure.

use ipc::gateway::{
    CronAddParams, CronDelivery, CronJob, CronJobState, CronPatch, CronPayload, CronSchedule,
};

use super::schedule::{self, Schedule};

/// Longest job name kept.
const MAX_NAME: usize = 200;
/// Longest message or reminder text.
const MAX_TEXT: usize = 100_000;

/// Why a job is refused; the text goes to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("{0}")]
    Schedule(#[from] schedule::ScheduleError),
    #[error("name must be 1-{MAX_NAME} characters")]
    Name,
    #[error("sessionTarget must be isolated, main, current or session:<key> ({0:?})")]
    Target(String),
    #[error("sessionTarget {0:?} names a session of another agent")]
    OtherAgent(String),
    #[error("payload {0} must be 1-{MAX_TEXT} characters")]
    Text(&'static str),
    #[error("wakeMode must be now or next-heartbeat")]
    WakeMode,
    #[error("{0} is too long")]
    Field(&'static str),
}

/// The agent a session key (`agent:<id>:…`) belongs to.
fn agent_of_key(key: &str) -> Option<&str> {
    key.strip_prefix("agent:")?.split(':').next()
}

/// The job's stored target: `isolated`, `main` or `session:<key>` (`current` is the
/// caller's session then, else `main`).
fn target(t: &str, agent: &str, caller: Option<&str>) -> Result<String, JobError> {
    let t = t.trim();
    let key = match t {
        "isolated" | "main" => return Ok(t.to_owned()),
        "current" => match caller {
            Some(k) => k,
            None => return Ok("main".into()),
        },
        _ => t
            .strip_prefix("session:")
            .ok_or_else(|| JobError::Target(t.to_owned()))?,
    };
    // As every method routes a key: a bare one is the agent's (`agent:<id>:<key>`), a full
    // one must be this agent's and well formed, nothing unprintable.
    let bad = || JobError::Target(t.to_owned());
    if key.is_empty()
        || key.len() > 512
        || key.chars().any(ipc::text::is_unshowable)
        || key.chars().any(char::is_control)
    {
        return Err(bad());
    }
    let full = if key.len() >= 6 && key[..6].eq_ignore_ascii_case("agent:") {
        if !key.starts_with("agent:") {
            return Err(bad());
        }
        match agent_of_key(key) {
            Some(a) if a != agent => return Err(JobError::OtherAgent(t.to_owned())),
            _ => {}
        }
        let rest = key[6..].split_once(':').map(|(_, r)| r).unwrap_or("");
        if rest.is_empty() {
            return Err(bad());
        }
        key.to_owned()
    } else {
        format!("agent:{agent}:{key}")
    };
    Ok(format!("session:{full}"))
}

/// Longest description, model or thinking name kept.
const MAX_FIELD: usize = 2_000;
/// Largest `delivery` (its JSON) kept.
const MAX_DELIVERY: usize = 4_096;

fn check_fields(
    description: Option<&str>,
    payload: &CronPayload,
    delivery: Option<&CronDelivery>,
) -> Result<(), JobError> {
    let long = |s: Option<&String>| s.is_some_and(|s| s.len() > MAX_FIELD);
    if description.is_some_and(|d| d.len() > MAX_FIELD) {
        return Err(JobError::Field("description"));
    }
    if let CronPayload::AgentTurn {
        model, thinking, ..
    } = payload
    {
        if long(model.as_ref()) || long(thinking.as_ref()) {
            return Err(JobError::Field("payload.model and payload.thinking"));
        }
    }
    if delivery.is_some_and(|d| serde_json::to_vec(d).map_or(true, |v| v.len() > MAX_DELIVERY)) {
        return Err(JobError::Field("delivery"));
    }
    Ok(())
}

fn check_payload(p: &CronPayload) -> Result<(), JobError> {
    let (text, what) = match p {
        CronPayload::AgentTurn { message, .. } => (message, "message"),
        CronPayload::SystemEvent { text } => (text, "text"),
    };
    if text.trim().is_empty() || text.len() > MAX_TEXT {
        return Err(JobError::Text(what));
    }
    Ok(())
}

/// `schedule` with its anchor written in (an `every` counts from `now` unless it says).
fn anchored(s: CronSchedule, now: u64) -> CronSchedule {
    match s {
        CronSchedule::Every {
            every_ms,
            anchor_ms,
        } => CronSchedule::Every {
            every_ms,
            anchor_ms: Some(anchor_ms.unwrap_or(now)),
        },
        other => other,
    }
}

/// A new job from `cron.add` for `agent`, due first at what its schedule says.
pub fn new_job(p: CronAddParams, id: String, agent: &str, now: u64) -> Result<CronJob, JobError> {
    let name = p.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(JobError::Name);
    }
    let wake_mode = p.wake_mode.unwrap_or_else(|| "now".into());
    if !matches!(wake_mode.as_str(), "now" | "next-heartbeat") {
        return Err(JobError::WakeMode);
    }
    check_payload(&p.payload)?;
    check_fields(p.description.as_deref(), &p.payload, p.delivery.as_ref())?;
    let session_target = target(&p.session_target, agent, p.session_key.as_deref())?;
    let schedule_spec = anchored(p.schedule, now);
    let parsed = schedule::parse(&schedule_spec, now)?;
    let next = parsed.first(now);
    let schedule_spec = match (&schedule_spec, &parsed) {
        // The time as OpenClaw writes it back (milliseconds, `Z`).
        (CronSchedule::At { .. }, Schedule::At(ms)) => CronSchedule::At {
            at: schedule::iso(*ms),
        },
        _ => schedule_spec,
    };
    let delete_after_run = p.delete_after_run.or(parsed.is_one_shot().then_some(true));
    Ok(CronJob {
        id,
        name,
        description: p.description,
        agent_id: agent.to_owned(),
        enabled: p.enabled.unwrap_or(true),
        delete_after_run,
        created_at_ms: now,
        updated_at_ms: now,
        schedule: schedule_spec,
        session_target,
        wake_mode,
        payload: p.payload,
        delivery: p.delivery.unwrap_or_default(),
        state: CronJobState {
            next_run_at_ms: next,
            ..CronJobState::default()
        },
        next_run_at_ms: next,
    })
}

/// `job` with `patch` applied at `now`; a changed schedule is due again from `now`.
pub fn patched(mut job: CronJob, patch: CronPatch, now: u64) -> Result<CronJob, JobError> {
    if let Some(name) = patch.name {
        let name = name.trim().to_owned();
        if name.is_empty() || name.chars().count() > MAX_NAME {
            return Err(JobError::Name);
        }
        job.name = name;
    }
    check_fields(
        patch.description.as_deref(),
        patch.payload.as_ref().unwrap_or(&job.payload),
        patch.delivery.as_ref(),
    )?;
    if let Some(d) = patch.description {
        job.description = Some(d);
    }
    if let Some(w) = patch.wake_mode {
        if !matches!(w.as_str(), "now" | "next-heartbeat") {
            return Err(JobError::WakeMode);
        }
        job.wake_mode = w;
    }
    if let Some(p) = patch.payload {
        check_payload(&p)?;
        job.payload = p;
    }
    if let Some(t) = patch.session_target {
        job.session_target = target(&t, &job.agent_id, None)?;
    }
    if let Some(d) = patch.delivery {
        job.delivery = d;
    }
    if let Some(d) = patch.delete_after_run {
        job.delete_after_run = Some(d);
    }
    let rescheduled = patch.schedule.is_some() || patch.enabled == Some(true) && !job.enabled;
    if let Some(e) = patch.enabled {
        job.enabled = e;
    }
    if let Some(s) = patch.schedule {
        // A new schedule counts from now (OpenClaw moves an `every` anchor to the update).
        let s = match s {
            CronSchedule::Every { every_ms, .. } => CronSchedule::Every {
                every_ms,
                anchor_ms: Some(now),
            },
            other => other,
        };
        job.schedule = s;
    }
    if rescheduled {
        let parsed = schedule::parse(&job.schedule, now)?;
        job.state.next_run_at_ms = parsed.first(now);
        job.next_run_at_ms = job.state.next_run_at_ms;
    }
    job.updated_at_ms = now;
    Ok(job)
}

/// The stored schedule of `job`, parsed (`None`: it no longer parses, e.g. an `at` in the
/// past once it ran).
pub fn schedule_of(job: &CronJob, now: u64) -> Option<Schedule> {
    match &job.schedule {
        CronSchedule::At { at } => {
            let ts: jiff::Timestamp = at.parse().ok()?;
            Some(Schedule::At(u64::try_from(ts.as_millisecond()).ok()?))
        }
        other => schedule::parse(other, now).ok(),
    }
}

/// What one run of `job` for the occurrence `due` is: its session key and message. Both
/// depend on the job and the occurrence only, so a run fired again after a crash is the
/// same request under the same key.
pub fn run_of(job: &CronJob, due: u64) -> (String, String) {
    let agent = &job.agent_id;
    let session = match job.session_target.as_str() {
        "isolated" => format!("agent:{agent}:cron:{}:run:{due}", job.id),
        "main" => format!("agent:{agent}:main"),
        t => t.strip_prefix("session:").unwrap_or(t).to_owned(),
    };
    let when = schedule::iso(due);
    let message = match &job.payload {
        CronPayload::AgentTurn { message, .. } => format!(
            "{message}\nScheduled time: {when}\n\nThis is an unattended scheduled run. Nobody is present to clarify or approve, so complete the task with what you have. Your final reply is the deliverable. If nothing needs doing, reply exactly NO_REPLY."
        ),
        CronPayload::SystemEvent { text } => format!(
            "A scheduled reminder has been triggered. The reminder content is:\n\n{text}\n\nHandle this reminder internally. Scheduled time: {when}"
        ),
    };
    (session, message)
}

/// A delivery the job asked for that loopgate cannot make (it has no channels).
pub fn delivery_status(d: &CronDelivery) -> &'static str {
    if d.mode == "none" {
        "not-requested"
    } else {
        "not-delivered"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add(v: serde_json::Value) -> CronAddParams {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_new_job_has_openclaw_defaults_and_a_first_occurrence() {
        let now = 1_796_613_990_000;
        let j = new_job(
            add(json!({"name": "tc-at2", "schedule": {"kind": "at", "at": "2026-12-07T03:26:40.437826Z"},
                "sessionTarget": "isolated", "payload": {"kind": "agentTurn", "message": "hi"}})),
            "id1".into(), "main", now).unwrap();
        assert_eq!(j.delete_after_run, Some(true));
        assert_eq!(j.wake_mode, "now");
        assert_eq!(
            j.schedule,
            CronSchedule::At {
                at: "2026-12-07T03:26:40.437Z".into()
            }
        );
        assert_eq!(j.state.next_run_at_ms, Some(1_796_614_000_437));
        let every = new_job(
            add(json!({"name": "e", "schedule": {"kind": "every", "everyMs": 7000},
                "sessionTarget": "session:agent:main:tl", "payload": {"kind": "systemEvent", "text": "t"}})),
            "id2".into(), "main", now).unwrap();
        assert_eq!(
            every.schedule,
            CronSchedule::Every {
                every_ms: 7000,
                anchor_ms: Some(now)
            }
        );
        assert_eq!(
            (every.next_run_at_ms, every.delete_after_run),
            (Some(now + 7000), None)
        );
        assert_eq!(every.session_target, "session:agent:main:tl");
        let (session, message) = run_of(&every, now + 7000);
        assert_eq!(session, "agent:main:tl");
        assert!(message.starts_with(
            "A scheduled reminder has been triggered. The reminder content is:\n\nt\n\n"
        ));
    }

    #[test]
    fn bad_jobs_are_refused() {
        let base = json!({"name": "x", "schedule": {"kind": "every", "everyMs": 7000},
            "sessionTarget": "isolated", "payload": {"kind": "agentTurn", "message": "m"}});
        let with = |k: &str, v: serde_json::Value| {
            let mut b = base.clone();
            b[k] = v;
            new_job(add(b), "i".into(), "main", 0)
        };
        assert_eq!(with("name", json!(" ")).unwrap_err(), JobError::Name);
        assert!(matches!(
            with("sessionTarget", json!("elsewhere")),
            Err(JobError::Target(_))
        ));
        assert!(matches!(
            with("sessionTarget", json!("session:agent:ops:x")),
            Err(JobError::OtherAgent(_))
        ));
        for bad in [
            "session:AGENT:ops:x",
            "session:agent:main",
            "session:agent:main:",
            "session:x\u{1b}[2J",
            "session:",
        ] {
            assert!(
                matches!(with("sessionTarget", json!(bad)), Err(JobError::Target(_))),
                "{bad}"
            );
        }
        assert_eq!(
            with("sessionTarget", json!("session:tl"))
                .unwrap()
                .session_target,
            "session:agent:main:tl"
        );
        assert_eq!(
            with("description", json!("x".repeat(3000))).unwrap_err(),
            JobError::Field("description")
        );
        assert_eq!(
            with("payload", json!({"kind": "agentTurn", "message": ""})).unwrap_err(),
            JobError::Text("message")
        );
        assert!(matches!(
            with("schedule", json!({"kind": "every", "everyMs": 5})),
            Err(JobError::Schedule(_))
        ));
    }

    #[test]
    fn an_updated_every_counts_from_the_update() {
        let j = new_job(
            add(
                json!({"name": "e", "schedule": {"kind": "every", "everyMs": 7000},
            "sessionTarget": "isolated", "payload": {"kind": "agentTurn", "message": "m"}}),
            ),
            "i".into(),
            "main",
            1000,
        )
        .unwrap();
        let patch: CronPatch = serde_json::from_value(
            json!({"schedule": {"kind": "every", "everyMs": 60000}, "name": "slow"}),
        )
        .unwrap();
        let u = patched(j, patch, 5000).unwrap();
        assert_eq!(
            (u.name.as_str(), u.next_run_at_ms, u.updated_at_ms),
            ("slow", Some(65_000), 5000)
        );
    }
}
