//! Benchmarks of scale, not speed (issue 24): `density` (many agents, one turn each: memory
//! and file descriptors while their workers live and after they retire, and the first turn
//! of a retired agent) and `session-length` (whether a turn costs more as its session's
//! history grows).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::client::Client;
use crate::stats::summarize;
use crate::{check_ok, spawn, turn_params, Target};

/// PSS (proportional set size: shared pages divided among their users) of `pid`, in bytes,
/// from `/proc/<pid>/smaps_rollup`.
pub fn pss(pid: u32) -> Option<u64> {
    rollup(pid, "Pss:")
}

/// The anonymous part of [`pss`]: the process's own memory (heap, stacks), without the
/// pages of its binary and libraries, which the first use of a code path faults in once
/// for the whole process.
pub fn pss_anon(pid: u32) -> Option<u64> {
    rollup(pid, "Pss_Anon:")
}

/// A `smaps_rollup` line of `pid` (kB) in bytes.
fn rollup(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Open file descriptors of `pid`.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Memory and descriptors of a gateway's processes now.
fn footprint(root: u32) -> Value {
    let family = crate::procs::family(root);
    let workers = &family[1..];
    let worker_pss: Vec<u64> = workers.iter().filter_map(|p| pss(*p)).collect();
    let total_pss: u64 = family.iter().filter_map(|p| pss(*p)).sum();
    let total_fds: usize = family.iter().map(|p| fds(*p)).sum();
    json!({
        "workers": workers.len(),
        "pss_bytes": total_pss,
        "supervisor_pss_bytes": pss(root),
        "supervisor_pss_anon_bytes": pss_anon(root),
        "supervisor_fds": fds(root),
        "fds": total_fds,
        "pss_per_worker_bytes": if worker_pss.is_empty() { Value::Null } else {
            json!(worker_pss.iter().sum::<u64>() / worker_pss.len() as u64)
        },
    })
}

/// What `density` does.
pub struct Density {
    /// Agents, one turn each.
    pub agents: usize,
    /// Turns at a time.
    pub concurrency: usize,
    /// `workers.idle_exit_seconds`.
    pub idle_exit: u64,
    /// Retired agents whose next first turn is timed.
    pub retired_turns: usize,
    /// Seconds after the last retirement to measure again (0: not at all).
    pub settle: u64,
    /// `workers.max_live` (`None`: no cap).
    pub max_live: Option<usize>,
}

/// `agents` agents, one turn each (`concurrency` at a time): the footprint with every worker
/// live, then after they all retired (`idle_exit` seconds of idleness), then (with `settle`)
/// once the gateway's time-bounded caches let go, then the first turn of `retired_turns`
/// retired agents, one after another.
pub async fn density(
    loopgate: &std::path::Path,
    api: scripted_model::wire::Api,
    plan: &Density,
) -> anyhow::Result<Value> {
    let &Density {
        agents: n,
        concurrency,
        idle_exit,
        retired_turns,
        settle,
        max_live,
    } = plan;
    let agents: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
    let workers = spawn::Workers {
        idle_exit: Some(idle_exit),
        max_live,
    };
    let s = spawn::Spawned::start_with(loopgate, &agents, None, api, workers).await?;
    let t = Target::spawned(s, &agents);
    let pid = t.pid.context("the spawned gateway's pid")?;
    if pss(pid).is_none() {
        bail!(
            "cannot read /proc/{pid}/smaps_rollup: the gateway's processes are not dumpable (their memory maps and descriptors are closed to other processes of their uid), so `density` needs root or CAP_SYS_PTRACE"
        );
    }
    let idle_before = footprint(pid);
    let started = Instant::now();
    let mut first = Vec::with_capacity(n);
    for batch in agents.chunks(concurrency.max(1)) {
        let mut tasks = Vec::new();
        for agent in batch {
            let (url, token, agent) = (t.url.clone(), t.token.clone(), agent.clone());
            tasks.push(tokio::spawn(async move {
                let mut c = Client::connect(&url, token.as_deref()).await?;
                let at = Instant::now();
                let fin = c.turn(turn_params(0, "density", &agent), |_| {}).await?;
                check_ok(&fin)?;
                anyhow::Ok(at.elapsed().as_secs_f64() * 1e6)
            }));
        }
        for task in tasks {
            first.push(task.await.context("turn task")??);
        }
    }
    let all_turns_s = started.elapsed().as_secs_f64();
    let live = footprint(pid);
    // Every worker retires after `idle_exit` seconds with nothing to do.
    let deadline = Instant::now() + Duration::from_secs(idle_exit + 120);
    while crate::procs::family(pid).len() > 1 {
        if Instant::now() > deadline {
            bail!("the workers did not retire within {} s", idle_exit + 120);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let retired = footprint(pid);
    let settled = if settle > 0 {
        tokio::time::sleep(Duration::from_secs(settle)).await;
        footprint(pid)
    } else {
        Value::Null
    };
    let mut again = Vec::with_capacity(retired_turns);
    let mut c = Client::connect(&t.url, t.token.as_deref()).await?;
    for agent in agents.iter().take(retired_turns) {
        let at = Instant::now();
        let fin = c.turn(turn_params(1, "density", agent), |_| {}).await?;
        check_ok(&fin)?;
        again.push(at.elapsed().as_secs_f64() * 1e6);
    }
    Ok(json!({
        "scenario": "density", "agents": n, "completed": first.len(),
        "all_turns_s": all_turns_s,
        "first_turn_of_a_new_agent": summarize(&first),
        "idle_before": idle_before, "live": live, "retired": retired,
        "retired_settled": settled, "settle_s": settle, "max_live": max_live,
        "first_turn_of_a_retired_agent": summarize(&again),
    }))
}

/// Where `session-length` looks: turns 10, 100 and 1 000 of one session.
const MARKS: [usize; 3] = [10, 100, 1000];
/// Turns the gateway's CPU is summed over from each mark (`/proc` counts 10 ms ticks).
const CPU_WINDOW: usize = 100;

/// One session, `turns` turns: the latency of turns near 10, 100 and 1 000 (the median of
/// the `window` turns from each), and the gateway's CPU per turn over the 100 turns from each
/// (from turn 1 100 on), to show a turn's cost does not grow with its history.
pub async fn session_length(t: &Target, turns: usize, window: usize) -> anyhow::Result<Value> {
    let mut c = Client::connect(&t.url, t.token.as_deref()).await?;
    let agent = t.agents.first().cloned().unwrap_or_else(|| "main".into());
    let session = format!("len-{}", scripted_model::now_micros());
    let mut lat = Vec::with_capacity(turns);
    // The gateway's CPU over CPU_WINDOW turns from each mark: a turn's latency includes the
    // scripted model, which parses the whole growing context; the CPU is the gateway's alone.
    let mut cpu_at: std::collections::HashMap<usize, Value> = Default::default();
    let mut before = std::collections::HashMap::new();
    for n in 0..=turns {
        if let Some(pid) = t.pid {
            if MARKS.contains(&n) {
                before.insert(n, crate::procs::snapshot(pid));
            }
            if let Some(mark) = n.checked_sub(CPU_WINDOW).filter(|m| MARKS.contains(m)) {
                let from = before.remove(&mark);
                cpu_at.insert(mark, crate::cpu_report(Some(pid), &from, CPU_WINDOW));
            }
        }
        if n == turns {
            break;
        }
        let at = Instant::now();
        let fin = c.turn(turn_params(n, &session, &agent), |_| {}).await?;
        check_ok(&fin)?;
        lat.push(at.elapsed().as_secs_f64() * 1e6);
    }
    let mut out = serde_json::Map::new();
    out.insert("scenario".into(), json!("session-length"));
    out.insert("turns".into(), json!(turns));
    for mark in MARKS {
        if mark + window <= turns {
            let mut entry = json!(summarize(&lat[mark..mark + window]));
            if let (Some(o), Some(cpu)) = (entry.as_object_mut(), cpu_at.remove(&mark)) {
                o.insert(
                    "gateway_cpu_ms_per_turn".into(),
                    cpu["cpu_ms_per_turn"].clone(),
                );
            }
            out.insert(format!("turn_{mark}"), entry);
        }
    }
    Ok(Value::Object(out))
}
