//! `loopgate agent`: sends a message, streams the reply live and exits on the outcome. If
//! the socket drops mid-run it reconnects and resumes the run's stream with `agent.events`
//! after the last `seq` it printed (nothing printed twice, nothing skipped), then takes the
//! outcome from `agent.wait`. A socket lost before the run was acknowledged sends the same
//! request again first (same idempotency key: the gateway answers `accepted` if it never
//! recorded it, `in_flight` if it did, or the outcome if the run already ended).

use std::ops::ControlFlow;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ipc::gateway::{
    AgentEventsParams, AgentEventsResult, AgentParams, AgentWaitParams, Method, ServerFrame,
};
use serde_json::Value;

use super::{emit, exit_for_status, fail, AgentArgs, Client, ClientError};

/// Reconnect attempts after a dropped socket, and the first delay (doubling to 2 s).
const RECONNECTS: u32 = 8;
const FIRST_DELAY: Duration = Duration::from_millis(100);

/// What was shown of the run so far.
struct Shown {
    run_id: String,
    json: bool,
    /// The last per-run `seq` handled.
    seq: u64,
    streamed: bool,
    /// Its terminal lifecycle event arrived.
    ended: bool,
    /// The gateway acknowledged the run (`accepted` or `in_flight`).
    accepted: bool,
}

impl Shown {
    /// Handles one `agent` event of the run (older or repeated `seq`s are skipped).
    fn agent_event(&mut self, p: &Value) {
        if p.get("runId").and_then(Value::as_str) != Some(self.run_id.as_str()) {
            return;
        }
        let seq = p.get("seq").and_then(Value::as_u64).unwrap_or(0);
        if seq <= self.seq {
            return;
        }
        self.seq = seq;
        match p.get("stream").and_then(Value::as_str) {
            Some("assistant") if !self.json => {
                if let Some(d) = p.pointer("/data/delta").and_then(Value::as_str) {
                    emit(d);
                    self.streamed |= !d.is_empty();
                }
            }
            Some("lifecycle") => {
                let phase = p.pointer("/data/phase").and_then(Value::as_str);
                self.ended |= matches!(phase, Some("end" | "error"));
            }
            _ => {}
        }
    }
}

pub async fn agent(socket: &Path, args: AgentArgs) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let run_id = uuid::Uuid::new_v4().to_string();
    let params = AgentParams {
        message: args.message,
        idempotency_key: run_id.clone(),
        agent_id: args.agent,
        session_key: args.session_key,
        timeout: args.timeout,
        model: args.model,
        ..Default::default()
    };
    let req_id = match client
        .send(
            Method::Agent,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await
    {
        Ok(id) => id,
        Err(e) => return fail(e),
    };
    let mut shown = Shown {
        run_id: run_id.clone(),
        json: args.json,
        seq: 0,
        streamed: false,
        ended: false,
        accepted: false,
    };
    loop {
        let frame = match client.next_frame().await {
            Ok(f) => f,
            // The socket dropped: the run goes on in the gateway; follow it again.
            Err(_) => return resume(socket, &mut shown, &params).await,
        };
        match frame {
            ServerFrame::Event(ev) if ev.event == "agent" => {
                if let Some(p) = ev.payload {
                    shown.agent_event(&p);
                }
            }
            ServerFrame::Event(_) => {}
            ServerFrame::Res(res) if res.id == req_id => {
                if !res.ok {
                    let msg = res
                        .error
                        .map(|e| e.message)
                        .unwrap_or_else(|| "request failed".into());
                    return fail(msg);
                }
                let payload = res.payload.unwrap_or(Value::Null);
                match payload.get("status").and_then(Value::as_str) {
                    Some("accepted") => {
                        shown.accepted = true;
                        continue;
                    }
                    Some("in_flight") => return fail(format!("run {run_id} is already in flight")),
                    _ => return final_result(&mut shown, &payload),
                }
            }
            ServerFrame::Res(_) => {}
        }
    }
}

/// Prints the final `agent` answer and picks the exit code.
fn final_result(shown: &mut Shown, payload: &Value) -> ExitCode {
    let status = payload
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("error")
        .to_owned();
    if shown.json {
        emit(&format!("{payload}\n"));
        return exit_for_status(&status);
    }
    let texts: Vec<String> = payload
        .pointer("/result/payloads")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("isError").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let error = payload.get("error").and_then(Value::as_str);
    finish(shown, &status, &texts, error)
}

/// Prints the end of a run and picks the exit code.
fn finish(shown: &mut Shown, status: &str, texts: &[String], error: Option<&str>) -> ExitCode {
    if !shown.streamed {
        for t in texts {
            emit(t);
            shown.streamed |= !t.is_empty();
        }
    }
    if shown.streamed {
        emit("\n");
    }
    if status != "ok" {
        let err = error
            .map(str::to_owned)
            .unwrap_or_else(|| format!("run ended with status {status}"));
        let how = if status == "timeout" {
            "timed out"
        } else {
            "failed"
        };
        super::note(format!("run {} {how}: {err}", shown.run_id));
    }
    exit_for_status(status)
}

/// Reconnects, replays what was missed, follows the run live to its end and reports its
/// outcome.
async fn resume(socket: &Path, shown: &mut Shown, params: &AgentParams) -> ExitCode {
    let mut delay = FIRST_DELAY;
    let mut last_error = None;
    for _ in 0..RECONNECTS {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
        match follow(socket, shown, params).await {
            Ok(code) => return code,
            Err(e) => last_error = Some(e),
        }
    }
    let why = last_error.map(|e| e.to_string()).unwrap_or_default();
    fail(format!(
        "lost the gateway while following run {}: {why}",
        shown.run_id
    ))
}

/// One reconnection: `agent.events` after the last `seq` shown (live events that arrive
/// before its answer are newer: handled after the replay), then live events to the
/// terminal, then `agent.wait` for the outcome.
async fn follow(
    socket: &Path,
    shown: &mut Shown,
    params: &AgentParams,
) -> Result<ExitCode, ClientError> {
    let mut client = Client::connect(socket).await?;
    if !shown.accepted {
        if let ControlFlow::Break(code) = resubmit(&mut client, shown, params).await? {
            return Ok(code);
        }
    }
    let (replay, early) = match replay(&mut client, shown).await? {
        ControlFlow::Continue(r) => r,
        ControlFlow::Break(code) => return Ok(code),
    };
    catch_up(shown, &replay, &early);
    while !shown.ended {
        match client.next_frame().await? {
            ServerFrame::Event(ev) if ev.event == "agent" => {
                if let Some(p) = ev.payload {
                    shown.agent_event(&p);
                }
            }
            _ => {}
        }
    }
    outcome(&mut client, shown).await
}

/// Sends the `agent` request again, with the same key (never a second run), as it was never
/// acknowledged; its run's events that come meanwhile are shown. `Break` with the exit code
/// when that already ends it: a refusal, or the run's outcome.
async fn resubmit(
    client: &mut Client,
    shown: &mut Shown,
    params: &AgentParams,
) -> Result<ControlFlow<ExitCode>, ClientError> {
    let id = client
        .send(
            Method::Agent,
            serde_json::to_value(params).unwrap_or_default(),
        )
        .await?;
    loop {
        match client.next_frame().await? {
            ServerFrame::Event(ev) if ev.event == "agent" => {
                if let Some(p) = ev.payload {
                    shown.agent_event(&p);
                }
            }
            ServerFrame::Res(res) if res.id == id => {
                if !res.ok {
                    let msg = res
                        .error
                        .map(|e| e.message)
                        .unwrap_or_else(|| "request failed".into());
                    return Ok(ControlFlow::Break(fail(msg)));
                }
                let payload = res.payload.unwrap_or(Value::Null);
                return Ok(match payload.get("status").and_then(Value::as_str) {
                    Some("accepted" | "in_flight") => {
                        shown.accepted = true;
                        ControlFlow::Continue(())
                    }
                    _ => ControlFlow::Break(final_result(shown, &payload)),
                });
            }
            _ => {}
        }
    }
}

/// Asks for the run's events after the last `seq` shown: the replay, and the live events
/// that came before its answer (newer than any replayed). `Break` with the exit code when
/// the run cannot be resumed (not a connection problem: said so, and that is the end).
async fn replay(
    client: &mut Client,
    shown: &Shown,
) -> Result<ControlFlow<ExitCode, (AgentEventsResult, Vec<Value>)>, ClientError> {
    let params = AgentEventsParams {
        run_id: shown.run_id.clone(),
        after_seq: Some(shown.seq),
    };
    let id = client
        .send(
            Method::AgentEvents,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await?;
    let mut early = Vec::new();
    loop {
        match client.next_frame().await? {
            ServerFrame::Event(ev) if ev.event == "agent" => early.extend(ev.payload),
            ServerFrame::Event(_) => {}
            ServerFrame::Res(res) if res.id == id => {
                if !res.ok {
                    let why = res.error.map(|e| e.message).unwrap_or_default();
                    let msg = format!("cannot resume run {}: {why}", shown.run_id);
                    return Ok(ControlFlow::Break(fail(msg)));
                }
                let replay =
                    serde_json::from_value(res.payload.unwrap_or(Value::Null)).map_err(|why| {
                        ClientError::Reply {
                            method: Method::AgentEvents.as_str(),
                            why,
                        }
                    })?;
                return Ok(ControlFlow::Continue((replay, early)));
            }
            ServerFrame::Res(_) => {}
        }
    }
}

/// Shows what was missed: the replayed events, then the live ones that came before the
/// replay's answer (each `seq` once, in order); says so if part of it is gone.
fn catch_up(shown: &mut Shown, replay: &AgentEventsResult, early: &[Value]) {
    if replay.truncated {
        super::note(format!(
            "part of run {}'s stream is no longer buffered; `loopgate history` has the reply",
            shown.run_id
        ));
    }
    for ev in replay.events.iter().filter(|e| e.event == "agent") {
        if let Ok(p) = serde_json::from_str::<Value>(ev.payload.get()) {
            shown.agent_event(&p);
        }
    }
    for p in early {
        shown.agent_event(p);
    }
    shown.ended |= replay.ended;
}

/// The run's outcome from `agent.wait`, printed; its exit code.
async fn outcome(client: &mut Client, shown: &mut Shown) -> Result<ExitCode, ClientError> {
    let wait = AgentWaitParams {
        run_id: shown.run_id.clone(),
        timeout_ms: Some(60_000),
    };
    let v = client
        .call(
            Method::AgentWait,
            serde_json::to_value(&wait).unwrap_or_default(),
        )
        .await?;
    if shown.json {
        emit(&format!("{v}\n"));
        return Ok(exit_for_status(
            v.get("status").and_then(Value::as_str).unwrap_or("error"),
        ));
    }
    let (status, texts, error) = waited(&v);
    Ok(finish(shown, &status, &texts, error))
}

/// What an `agent.wait` answer says of the run: its status, its reply text and its error.
fn waited(v: &Value) -> (String, Vec<String>, Option<&str>) {
    let status = v
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("error")
        .to_owned();
    let texts: Vec<String> = v
        .pointer("/terminalReply/text")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .into_iter()
        .collect();
    let error = v.get("error").and_then(Value::as_str);
    (status, texts, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Run `r`, shown up to `seq` 2, printed as JSON (nothing streams to stdout).
    fn shown() -> Shown {
        Shown {
            run_id: "r".into(),
            json: true,
            seq: 2,
            streamed: false,
            ended: false,
            accepted: true,
        }
    }

    fn agent_event(seq: u64, stream: &str, data: Value) -> Value {
        json!({"runId": "r", "seq": seq, "stream": stream, "data": data})
    }

    fn replay(events: &[(&str, Value)], ended: bool) -> AgentEventsResult {
        let events: Vec<Value> = events
            .iter()
            .map(|(event, payload)| json!({"event": event, "payload": payload}))
            .collect();
        let text = json!({"runId": "r", "events": events, "truncated": false, "ended": ended});
        serde_json::from_str(&text.to_string()).unwrap()
    }

    #[test]
    fn catching_up_takes_each_seq_once_replay_first_and_sees_the_terminal() {
        let mut s = shown();
        let r = replay(
            &[
                (
                    "agent",
                    agent_event(2, "assistant", json!({"delta": "old"})),
                ),
                (
                    "agent",
                    agent_event(3, "assistant", json!({"delta": "new"})),
                ),
                ("chat", json!({"runId": "r", "seq": 9})),
                (
                    "agent",
                    agent_event(4, "lifecycle", json!({"phase": "start"})),
                ),
            ],
            false,
        );
        let early = [
            agent_event(4, "lifecycle", json!({"phase": "start"})),
            agent_event(5, "lifecycle", json!({"phase": "end"})),
        ];
        catch_up(&mut s, &r, &early[..1]);
        assert_eq!((s.seq, s.ended), (4, false));
        catch_up(&mut s, &replay(&[], false), &early[1..]);
        assert_eq!((s.seq, s.ended), (5, true));
    }

    #[test]
    fn a_replay_that_says_the_run_ended_ends_the_follow() {
        let mut s = shown();
        catch_up(&mut s, &replay(&[], true), &[]);
        assert!(s.ended);
        assert_eq!(s.seq, 2);
    }

    #[test]
    fn an_agent_wait_answer_gives_status_reply_and_error() {
        let v = json!({"status": "ok", "terminalReply": {"text": "hi"}});
        assert_eq!(waited(&v), ("ok".to_owned(), vec!["hi".to_owned()], None));
        let v = json!({"status": "timeout", "error": "slow"});
        assert_eq!(waited(&v), ("timeout".to_owned(), Vec::new(), Some("slow")));
        assert_eq!(waited(&json!({})), ("error".to_owned(), Vec::new(), None));
    }
}
