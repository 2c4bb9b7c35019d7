//! The envelopes every Gateway frame is: a client's request, the server's response (with its
//! `ErrorShape`) and event, and how a text frame is read into one of them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::ignored::Glance;
use super::shape::Limits;
use super::*;

/// A client request frame. `params` stays the text it arrived as: it is parsed once, by
/// the method that takes it, straight into that method's params type
/// ([`RequestFrame::params_as`]), never into a generic tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(
        default,
        rename = "expectedProfileId",
        skip_serializing_if = "Option::is_none"
    )]
    pub expected_profile_id: Option<String>,
}

impl PartialEq for RequestFrame {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.id == other.id
            && self.method == other.method
            && self.params.as_deref().map(RawValue::get)
                == other.params.as_deref().map(RawValue::get)
            && self.traceparent == other.traceparent
            && self.expected_profile_id == other.expected_profile_id
    }
}

impl RequestFrame {
    /// A request a client sends (the CLI, the bench, tests).
    pub fn new(id: impl Into<String>, method: Method, params: impl Serialize) -> Self {
        Self {
            kind: "req".into(),
            id: id.into(),
            method: method.as_str().into(),
            // Serializing a client's own params type cannot fail (no maps with non-string
            // keys); if it did, the server would answer the request as invalid.
            params: serde_json::value::to_raw_value(&params).ok(),
            traceparent: None,
            expected_profile_id: None,
        }
    }

    /// The params as `T` (absent params read as `{}`), with the reason when they are not.
    pub fn params_as<T: DeserializeOwned>(&self) -> Result<T, String> {
        parse_params(self.params.as_deref())
    }
}

/// `raw` (absent: `{}`) as `T`. A string holding a lone surrogate escape is named as such
/// (serde's own words for it are about hex escapes).
pub fn parse_params<T: DeserializeOwned>(raw: Option<&RawValue>) -> Result<T, String> {
    let text = raw.map_or("{}", RawValue::get);
    serde_json::from_str(text).map_err(|e| match surrogates::replace_lone_surrogates(text) {
        Some((_, unit)) => lone_surrogate(unit),
        None => e.to_string(),
    })
}

fn lone_surrogate(unit: u16) -> String {
    format!(
        "a string holds the lone surrogate \\u{unit:04x}, which is not Unicode text (surrogates come in pairs)"
    )
}

/// Why an inbound text could not be used as a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not a request frame (e.g. a `res`, or missing fields). `id` is set when the
    /// frame carried a usable one.
    #[error("{reason}")]
    Invalid { id: Option<String>, reason: String },
}

/// What is read of a frame before its shape is trusted: its type and id, when they are
/// strings. Everything else is skipped without being kept.
#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type", default)]
    kind: Option<Glance>,
    #[serde(default)]
    id: Option<Glance>,
}

impl Head {
    /// The id, when it is a non-empty string.
    fn id(self) -> Option<String> {
        Head::text(self.id)
    }

    /// A non-empty string, if `value` is one.
    fn text(value: Option<Glance>) -> Option<String> {
        value.and_then(Glance::into_text).filter(|s| !s.is_empty())
    }
}

/// Parses one inbound client frame after `connect`; see [`parse_request_within`].
pub fn parse_request(text: &str) -> Result<Option<RequestFrame>, FrameError> {
    parse_request_within(text, Limits::FRAME)
}

/// Parses one inbound client frame whose structure keeps `limits` (measured before anything
/// is built: [`shape::check`](super::shape::check)). `params` are kept as text. Unknown frame
/// types (e.g. `cancel`) are reported as `Ok(None)` so callers can ignore them.
pub fn parse_request_within(
    text: &str,
    limits: Limits,
) -> Result<Option<RequestFrame>, FrameError> {
    // First the structure, so that nothing of a frame past its limits is built (its id is
    // read for the answer, when the text reads as a frame at all).
    if let Err(e) = super::shape::check(text.as_bytes(), limits) {
        let head = serde_json::from_str::<Head>(text).ok();
        return Err(FrameError::Invalid {
            id: head.and_then(Head::id),
            reason: format!("the frame is {e}"),
        });
    }
    let head: Head = match serde_json::from_str(text) {
        Ok(h) => h,
        Err(e) => return Err(not_json(text, e)),
    };
    let Head { kind, id } = head;
    let kind = kind.and_then(Glance::into_text);
    let id = Head::text(id);
    match kind.as_deref() {
        Some("req") => {}
        Some("cancel") => return Ok(None),
        Some(other) => {
            return Err(FrameError::Invalid {
                id,
                reason: format!("unexpected frame type {other:?}"),
            })
        }
        None => {
            return Err(FrameError::Invalid {
                id,
                reason: "missing frame type".into(),
            })
        }
    }
    let frame: RequestFrame = serde_json::from_str(text).map_err(|e| FrameError::Invalid {
        id: id.clone(),
        reason: e.to_string(),
    })?;
    if frame.id.is_empty() {
        return Err(FrameError::Invalid {
            id: None,
            reason: "id must be a non-empty string".into(),
        });
    }
    if frame.method.is_empty() {
        return Err(FrameError::Invalid {
            id,
            reason: "method must be a non-empty string".into(),
        });
    }
    if frame.traceparent.as_ref().is_some_and(|t| t.len() > 128) {
        return Err(FrameError::Invalid {
            id,
            reason: "traceparent longer than 128 characters".into(),
        });
    }
    Ok(Some(frame))
}

/// Why `text` did not parse: JSON with a lone surrogate escape is answered as an invalid
/// request of its id (when it has one); anything else is not JSON.
fn not_json(text: &str, e: serde_json::Error) -> FrameError {
    let Some((clean, unit)) = surrogates::replace_lone_surrogates(text) else {
        return FrameError::NotJson(e.to_string());
    };
    let Ok(head) = serde_json::from_str::<Head>(&clean) else {
        return FrameError::NotJson(e.to_string());
    };
    FrameError::Invalid {
        id: head.id(),
        reason: lone_surrogate(unit),
    }
}

/// The error object of a failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorShape {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl ErrorShape {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            details: None,
            retryable: None,
            retry_after_ms: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_REQUEST, message)
    }

    pub fn unavailable(message: impl Into<String>, retry_after_ms: Option<u64>) -> Self {
        Self {
            retryable: Some(true),
            retry_after_ms,
            ..Self::new(codes::UNAVAILABLE, message)
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

/// A response frame. A request may get two (`agent`: accepted, then final).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorShape>,
}

impl ResponseFrame {
    pub fn ok(id: impl Into<String>, payload: Value) -> Self {
        Self {
            kind: "res".into(),
            id: id.into(),
            ok: true,
            payload: Some(payload),
            error: None,
        }
    }

    pub fn err(id: impl Into<String>, error: ErrorShape) -> Self {
        Self {
            kind: "res".into(),
            id: id.into(),
            ok: false,
            payload: None,
            error: Some(error),
        }
    }

    /// A failed response that still carries a payload (e.g. a failed `agent` final).
    pub fn err_with_payload(id: impl Into<String>, payload: Value, error: ErrorShape) -> Self {
        Self {
            payload: Some(payload),
            ..Self::err(id, error)
        }
    }
}

/// An event frame. `seq` is per connection; `connect.challenge` carries none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_version: Option<Value>,
}

impl EventFrame {
    pub fn new(event: &str, payload: Value, seq: Option<u64>) -> Self {
        Self {
            kind: "event".into(),
            event: event.into(),
            payload: Some(payload),
            seq,
            state_version: None,
        }
    }
}

/// Any frame a server sends, as a client decodes it.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerFrame {
    Res(ResponseFrame),
    Event(EventFrame),
}

/// Parses a frame received from a server (used by the CLI and test clients).
pub fn parse_server_frame(text: &str) -> Result<ServerFrame, FrameError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| FrameError::NotJson(e.to_string()))?;
    let invalid = |reason: String| FrameError::Invalid { id: None, reason };
    match value.get("type").and_then(Value::as_str) {
        Some("res") => serde_json::from_value(value)
            .map(ServerFrame::Res)
            .map_err(|e| invalid(e.to_string())),
        Some("event") => serde_json::from_value(value)
            .map(ServerFrame::Event)
            .map_err(|e| invalid(e.to_string())),
        other => Err(invalid(format!("unexpected frame type {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_stay_text_until_their_method_reads_them() {
        let f = parse_request(r#"{"type":"req","id":"1","method":"chat.history","params":{"sessionKey":"main","limit":5}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            f.params.as_deref().map(RawValue::get),
            Some(r#"{"sessionKey":"main","limit":5}"#)
        );
        let p: ChatHistoryParams = f.params_as().unwrap();
        assert_eq!(p.limit, Some(5));
        // Absent params read as `{}`.
        let f = parse_request(r#"{"type":"req","id":"2","method":"health"}"#)
            .unwrap()
            .unwrap();
        assert!(f.params_as::<AnyParams>().is_ok());
        assert!(f
            .params_as::<ChatHistoryParams>()
            .unwrap_err()
            .contains("sessionKey"));
    }

    #[test]
    fn a_lone_surrogate_in_params_is_named() {
        let f = parse_request(
            r#"{"type":"req","id":"1","method":"chat.history","params":{"sessionKey":"\ud800"}}"#,
        )
        .unwrap()
        .unwrap();
        let e = f.params_as::<ChatHistoryParams>().unwrap_err();
        assert!(e.contains("lone surrogate \\ud800"), "{e}");
        // In the id, the frame is answered under a readable id.
        match parse_request(r#"{"type":"req","id":"a\udc00","method":"health"}"#) {
            Err(FrameError::Invalid { id, reason }) => {
                assert_eq!(id.as_deref(), Some("a\u{fffd}"));
                assert!(reason.contains("lone surrogate"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_frame_past_its_limits_is_answered_under_its_id() {
        let deep = format!(
            r#"{{"type":"req","id":"d","method":"health","params":{}{}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        match parse_request(&deep) {
            Err(FrameError::Invalid { id, reason }) => {
                // Skipping is iterative in serde_json: the id is read past any depth.
                assert_eq!(id.as_deref(), Some("d"));
                assert!(reason.contains("nested deeper than 64"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let wide = format!(
            r#"{{"type":"req","id":"w","method":"health","params":{{"x":[{}]}}}}"#,
            vec!["{}"; 40_000].join(",")
        );
        match parse_request(&wide) {
            Err(FrameError::Invalid { id, reason }) => {
                assert_eq!(id.as_deref(), Some("w"));
                assert!(reason.contains("arrays and objects"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // Before `connect` the bounds are those of a flat object.
        let connect = r#"{"type":"req","id":"c","method":"connect","params":{"device":{"a":[[[[[[[[1]]]]]]]]}}}"#;
        assert!(parse_request(connect).is_ok());
        assert!(matches!(
            parse_request_within(connect, Limits::PREAUTH),
            Err(FrameError::Invalid { .. })
        ));
    }
}
