//! The envelopes every Gateway frame is: a client's request, the server's response (with its
//! `ErrorShape`) and event, and how a text frame is read into one of them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;

/// A client request frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(
        default,
        rename = "expectedProfileId",
        skip_serializing_if = "Option::is_none"
    )]
    pub expected_profile_id: Option<String>,
}

impl RequestFrame {
    pub fn new(id: impl Into<String>, method: Method, params: Value) -> Self {
        Self {
            kind: "req".into(),
            id: id.into(),
            method: method.as_str().into(),
            params: Some(params),
            traceparent: None,
            expected_profile_id: None,
        }
    }
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

/// Parses one inbound client frame. Unknown frame types (e.g. `cancel`) are reported as
/// `Ok(None)` so callers can ignore them.
pub fn parse_request(text: &str) -> Result<Option<RequestFrame>, FrameError> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Err(not_json(text, e)),
    };
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let kind = value.get("type").and_then(Value::as_str);
    match kind {
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
    let frame: RequestFrame = serde_json::from_value(value).map_err(|e| FrameError::Invalid {
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
    let Ok(value) = serde_json::from_str::<Value>(&clean) else {
        return FrameError::NotJson(e.to_string());
    };
    FrameError::Invalid {
        id: value
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        reason: format!(
            "a string holds the lone surrogate \\u{unit:04x}, which is not Unicode text (surrogates come in pairs)"
        ),
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
