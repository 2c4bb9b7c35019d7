//! The test client reads every server frame through the wire types of `ipc::gateway`, the
//! same ones the supervisor builds them with: a frame or payload that does not decode into
//! its type fails the test that received it. Tests then read the frames as JSON values, so
//! they can also look at what the types do not name.

use ipc::gateway::{
    events, parse_server_frame, AgentEvent, AgentResult, ChatEvent, DiagnosticEvent, EventFrame,
    HelloOk, PresenceEvent, ServerFrame, SessionDeleted, SessionMessage, SessionOperation,
    SessionsChanged,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Decodes one server frame strictly: the frame itself, and the payload of every event
/// loopgate emits whose shape is a type. Panics with the frame on a mismatch.
pub fn check_frame(text: &str) -> Value {
    let frame = match parse_server_frame(text) {
        Ok(f) => f,
        Err(e) => panic!("server frame does not decode as a frame ({e}): {text}"),
    };
    if let ServerFrame::Event(ev) = &frame {
        check_event(ev, text);
    }
    match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => panic!("server frame is not JSON ({e}): {text}"),
    }
}

fn check_event(ev: &EventFrame, text: &str) {
    let Some(payload) = ev.payload.clone() else {
        return;
    };
    match ev.event.as_str() {
        events::AGENT => decode::<AgentEvent>(payload, text),
        events::CHAT => decode::<ChatEvent>(payload, text),
        events::SESSION_MESSAGE => decode::<SessionMessage>(payload, text),
        events::SESSION_OPERATION => decode::<SessionOperation>(payload, text),
        events::PRESENCE => decode::<PresenceEvent>(payload, text),
        events::DIAGNOSTIC => decode::<DiagnosticEvent>(payload, text),
        events::SESSIONS_CHANGED if payload["reason"] == "delete" => {
            decode::<SessionDeleted>(payload, text)
        }
        events::SESSIONS_CHANGED => decode::<SessionsChanged>(payload, text),
        _ => {}
    }
}

fn decode<T: DeserializeOwned>(payload: Value, text: &str) {
    if let Err(e) = serde_json::from_value::<T>(payload) {
        panic!(
            "payload does not decode as {} ({e}): {text}",
            std::any::type_name::<T>()
        );
    }
}

/// The `hello-ok` payload of a successful `connect` response, decoded.
pub fn hello(res: &Value) -> HelloOk {
    match serde_json::from_value(res["payload"].clone()) {
        Ok(h) => h,
        Err(e) => panic!("hello-ok does not decode ({e}): {res}"),
    }
}

/// The final `agent` response's payload, decoded (a refused run may carry none).
pub fn agent_result(res: &Value) -> Option<AgentResult> {
    let payload = res.get("payload").filter(|p| !p.is_null())?;
    match serde_json::from_value(payload.clone()) {
        Ok(r) => Some(r),
        Err(e) => panic!("final agent response does not decode ({e}): {res}"),
    }
}

#[cfg(test)]
mod tests {
    use super::check_frame;

    #[test]
    fn a_well_formed_agent_event_passes() {
        let text = r#"{"type":"event","event":"agent","seq":3,"payload":{"runId":"r","seq":1,
            "stream":"lifecycle","data":{"phase":"start","startedAt":1},"ts":1,
            "sessionKey":"agent:main:main","agentId":"main"}}"#;
        assert_eq!(check_frame(text)["payload"]["runId"], "r");
    }

    #[test]
    #[should_panic(expected = "AgentEvent")]
    fn an_agent_event_off_its_type_fails_the_test() {
        // `seq` must be a number: a drifted payload is caught where it is received.
        let text = r#"{"type":"event","event":"agent","payload":{"runId":"r","seq":"1",
            "stream":"lifecycle","data":{"phase":"start"},"ts":1,
            "sessionKey":"agent:main:main","agentId":"main"}}"#;
        check_frame(text);
    }

    #[test]
    #[should_panic(expected = "does not decode as a frame")]
    fn a_response_without_ok_fails_the_test() {
        check_frame(r#"{"type":"res","id":"t1","payload":{}}"#);
    }
}
