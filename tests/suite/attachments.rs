//! Attachments (issue 26 item 1) in OpenClaw's request shape (`attachments` on `agent` and
//! `chat.send`, recorded in `openclaw-observed/chat-surface-2026.9.6.md` section 3): images
//! reach the model in each wire API's own form when the model's config says it takes them
//! (R-G1), a text-only model gets OpenClaw's notes on `chat.send` and `agent` is refused
//! (R-A1), text files become prompt segments of their own (agent-loop: attachment blocks are
//! attributed apart from the user's text, and need no user text), the transcript keeps each
//! content once and `chat.history` names it as OpenClaw does (R-A5).

use loopgate_tests::Gateway;
use scripted_model::wire::Api;
use serde_json::{json, Value};

/// A 1x1 PNG (70 bytes), as recorded.
const DOT: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

const TAKES_IMAGES: &str = "models.\"scripted-1\".input = [\"text\", \"image\"]\n";

pub(super) fn dot() -> Value {
    json!({"type": "image", "mimeType": "image/png", "fileName": "dot.png", "content": DOT})
}

pub(super) fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The last user message of a request body, in the API's own shape.
fn last_user(body: &Value) -> Value {
    let list = body["messages"].as_array().or(body["input"].as_array());
    list.into_iter()
        .flatten()
        .rfind(|m| m["role"] == "user")
        .cloned()
        .unwrap_or_else(|| panic!("no user message: {body}"))
}

/// The image of the user message `m` as the API sent it (its data URL or base64), and the
/// message's text.
fn image_and_text(api: Api, m: &Value) -> (Option<String>, String) {
    let s = |v: &Value| v.as_str().map(str::to_owned);
    match api {
        Api::Ollama => (
            m["images"].get(0).and_then(s),
            s(&m["content"]).unwrap_or_default(),
        ),
        _ => {
            let Some(parts) = m["content"].as_array() else {
                return (None, s(&m["content"]).unwrap_or_default());
            };
            let mut image = None;
            let mut text = String::new();
            for p in parts {
                match p["type"].as_str().unwrap_or_default() {
                    "text" | "input_text" => text.push_str(p["text"].as_str().unwrap_or_default()),
                    "image_url" => image = s(&p["image_url"]["url"]),
                    "input_image" => {
                        assert_eq!(p["detail"], "auto", "{p}");
                        image = s(&p["image_url"]);
                    }
                    "image" => {
                        assert_eq!(p["source"]["type"], "base64", "{p}");
                        assert_eq!(p["source"]["media_type"], "image/png", "{p}");
                        image = s(&p["source"]["data"]);
                    }
                    other => panic!("unexpected part {other}: {p}"),
                }
            }
            (image, text)
        }
    }
}

/// The user rows of a session's history.
pub(super) async fn user_rows(c: &mut loopgate_tests::Client, session: &str) -> Vec<Value> {
    let h = c.call("chat.history", json!({"sessionKey": session})).await;
    h["payload"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_reach_every_api_in_its_own_form_and_stay_in_the_session_r_g1() {
    for api in Api::ALL {
        let gw = Gateway::start_api(api, "", TAKES_IMAGES, 30.0).await;
        let mut c = gw.connect().await;
        let ack = c
            .call(
                "chat.send",
                json!({"sessionKey": "img", "message": "what is in this image?",
                       "idempotencyKey": "i-1", "attachments": [dot()]}),
            )
            .await;
        assert_eq!(ack["payload"]["status"], "started", "{api:?}: {ack}");
        let fin = c.chat_event("i-1", |p| p["state"] == "final").await;
        assert!(fin["payload"]["message"].is_object(), "{api:?}: {fin}");
        let first = &gw.model.requests()[0].body;
        let (image, text) = image_and_text(api, &last_user(first));
        let want = match api {
            Api::Completions | Api::Responses => format!("data:image/png;base64,{DOT}"),
            Api::Anthropic | Api::Ollama => DOT.to_owned(),
        };
        assert_eq!(image.as_deref(), Some(want.as_str()), "{api:?}: {first}");
        assert!(
            text.starts_with("[media attached: media://inbound/dot---")
                && text.ends_with(".png (image/png)]\nwhat is in this image?"),
            "{api:?}: {text}"
        );

        // The next turn's request still shows the image: read back from the transcript.
        let (_, fin) = c
            .turn(json!({"message": "and now?", "sessionKey": "img", "idempotencyKey": "i-2"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{api:?}: {fin}");
        let second = &gw.model.requests()[1].body;
        let history = second["messages"].as_array().or(second["input"].as_array());
        let shown = history
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| image_and_text(api, m).0)
            .count();
        assert_eq!(shown, 1, "{api:?}: {second}");

        let rows = user_rows(&mut c, "img").await;
        let media = &rows[0]["__openclaw"]["media"];
        assert_eq!(media.as_array().map(Vec::len), Some(1), "{api:?}: {rows:?}");
        assert_eq!(media[0]["contentType"], "image/png");
        assert_eq!(media[0]["kind"], "image");
        assert_eq!(media[0]["fileName"], "dot.png");
        assert_eq!(media[0]["sizeBytes"], 70);
        assert!(media[0]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("media://inbound/dot---")));
        assert_eq!(
            rows[0]["__openclaw"]["mediaImageLayout"],
            json!({"slots": [{"kind": "inline", "factIndex": 0}]})
        );
        assert_eq!(
            rows[0]["content"][0]["text"], "what is in this image?",
            "history keeps the user's own text"
        );
        assert!(rows[1]["__openclaw"].get("media").is_none(), "{rows:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_only_model_gets_notes_on_chat_send_and_agent_is_refused_r_a1() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    // Image only: no text needed.
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "plain", "message": "", "idempotencyKey": "p-1",
                   "attachments": [dot()]}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("p-1", |p| p["state"] == "final").await;
    let user = last_user(&gw.model.requests()[0].body);
    let text = user["content"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("[media attached: media://inbound/dot---")
            && text.ends_with(
                ".png (image/png)]\n[Image attachment not analyzed: no image-understanding model is configured]"
            ),
        "{user}"
    );

    let asked = gw.model.requests().len();
    let refused = c
        .call(
            "agent",
            json!({"message": "look", "sessionKey": "plain", "idempotencyKey": "p-2",
                   "attachments": [dot()]}),
        )
        .await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST");
    assert_eq!(
        refused["error"]["message"],
        "UnsupportedAttachmentError: attachment dot.png: active model does not accept image inputs"
    );
    assert_eq!(gw.model.requests().len(), asked, "no model request");
    assert_eq!(user_rows(&mut c, "plain").await.len(), 1, "no history");
    // Still serving.
    let (_, fin) = c
        .turn(json!({"message": "plain text", "sessionKey": "plain", "idempotencyKey": "p-3"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_files_are_segments_of_their_own_and_need_no_user_text() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let file = json!({"type": "file", "mimeType": "text/plain", "fileName": "notes.txt",
                      "content": b64("the word is plum\n")});
    let (_, fin) = c
        .turn(
            json!({"message": "", "sessionKey": "files", "idempotencyKey": "f-1",
                     "attachments": [file]}),
        )
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let user = last_user(&gw.model.requests()[0].body);
    let text = user["content"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("[media attached: media://inbound/notes---"),
        "{text}"
    );
    assert!(
        text.contains(".txt (text/plain)]\n\n<file name=\"notes.txt\" mime=\"text/plain\">\n<<<EXTERNAL_UNTRUSTED_CONTENT id=\""),
        "{text}"
    );
    assert!(
        text.contains(
            "\nSource: External\n---\nthe word is plum\n\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\""
        ),
        "{text}"
    );
    assert!(text.ends_with(">>>\n</file>"), "{text}");
    let rows = user_rows(&mut c, "files").await;
    assert_eq!(rows[0]["content"][0]["text"], "", "{rows:?}");
    assert_eq!(rows[0]["__openclaw"]["media"][0]["kind"], "file");
    assert_eq!(
        rows[0]["__openclaw"]["media"][0]["contentType"],
        "text/plain"
    );
    assert!(rows[0]["__openclaw"].get("mediaImageLayout").is_none());

    // Other files: through chat.send the model is told it cannot read them; `agent` refuses.
    let pdf = json!({"mimeType": "application/pdf", "fileName": "a.pdf",
                     "content": b64("%PDF-1.7\u{1}\u{2}\u{0}")});
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "files", "message": "read this", "idempotencyKey": "f-2",
                   "attachments": [pdf.clone()]}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("f-2", |p| p["state"] == "final").await;
    let user = last_user(&gw.model.requests()[1].body);
    assert!(
        user["content"].as_str().unwrap_or_default().ends_with(
            "read this\n\n<file name=\"a.pdf\" mime=\"application/pdf\">\n[Unsupported document format: application/pdf. Images and plain-text files can be read.]\n</file>"
        ),
        "{user}"
    );
    let refused = c
        .call(
            "agent",
            json!({"message": "x", "sessionKey": "files", "idempotencyKey": "f-3",
                   "attachments": [pdf]}),
        )
        .await;
    assert_eq!(
        refused["error"]["message"],
        "attachment a.pdf: non-image attachments (application/pdf) are not supported on this entrypoint (images and UTF-8 text files are)",
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_attachments_get_clear_errors_and_contents_are_kept_once_r_a3() {
    let gw = Gateway::start_with(
        "[models.providers.scripted.models.\"scripted-1\"]\ninput = [\"text\", \"image\"]\n",
    )
    .await;
    let mut c = gw.connect().await;
    let send = |key: &str, attachments: Value| {
        json!({"sessionKey": "bad", "message": "hi", "idempotencyKey": key,
               "attachments": attachments})
    };
    for (attachments, want) in [
        (
            json!([{"fileName": "x.png", "content": "!!notbase64!!"}]),
            "attachment x.png: invalid base64 content",
        ),
        (
            json!([{"mimeType": "image/png", "content": 7}]),
            "attachment image/png: content must be base64 string",
        ),
        (
            json!(vec![dot(); 33]),
            "33 attachments; at most 32 may be sent with one message",
        ),
    ] {
        let r = c.call("chat.send", send("b-x", attachments)).await;
        assert_eq!(r["ok"], false, "{r}");
        assert_eq!(r["error"]["code"], "INVALID_REQUEST");
        assert_eq!(r["error"]["message"], want, "{r}");
    }
    let big = {
        use base64::Engine;
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.resize(6 * 1024 * 1024 + 1, 0);
        base64::engine::general_purpose::STANDARD.encode(png)
    };
    let r = c
        .call(
            "chat.send",
            send("b-y", json!([{"fileName": "big.png", "content": big}])),
        )
        .await;
    assert_eq!(
        r["error"]["message"],
        "attachment big.png: image exceeds size limit (6291457 > 6291456 bytes)",
        "{r}"
    );

    // The same image twice (two messages) is kept once; a replay of a key answers, a new
    // attachment under a used key is a different request.
    for key in ["b-1", "b-2"] {
        let ack = c.call("chat.send", send(key, json!([dot()]))).await;
        assert_eq!(ack["payload"]["status"], "started", "{ack}");
        c.chat_event(key, |p| p["state"] == "final").await;
    }
    let again = c.call("chat.send", send("b-1", json!([dot()]))).await;
    assert_eq!(again["payload"]["status"], "ok", "{again}");
    let other = json!([{"mimeType": "text/plain", "content": b64("other")}]);
    let conflict = c.call("chat.send", send("b-1", other)).await;
    assert!(
        conflict["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("was already used for a different request")),
        "{conflict}"
    );
    let db = rusqlite::Connection::open_with_flags(
        gw.state().join("agents/main/agent.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT count(*) FROM media"),
        1,
        "one content, kept once"
    );
    assert_eq!(count("SELECT count(*) FROM transcript_media"), 2);
    assert_eq!(
        count("SELECT count(*) FROM transcript WHERE entry_json LIKE '%iVBOR%'"),
        0,
        "no transcript row embeds the bytes"
    );
    // Deleting the session takes the content no other session refers to.
    let deleted = c
        .call(
            "sessions.delete",
            json!({"key": "agent:main:bad", "deleteTranscript": true}),
        )
        .await;
    assert_eq!(deleted["ok"], true, "{deleted}");
    assert_eq!(count("SELECT count(*) FROM media"), 0);
}

/// A built UI directory (the page only) outside the state dir.
pub(super) fn ui_root() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("control-ui");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("index.html"), "<!doctype html><title>ui</title>").unwrap();
    for p in [d.path().to_path_buf(), root] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    d
}

pub(super) fn media_path(url: &str, session: &str, extra: &str) -> String {
    let enc = |s: &str| s.replace(':', "%3A").replace('/', "%2F");
    format!(
        "/ui/__openclaw__/assistant-media?source={}&sessionKey={}&agentId=main{extra}",
        enc(url),
        enc(session)
    )
}

/// The Control UI shows a history message's attachments by fetching them from
/// `__openclaw__/assistant-media` (as OpenClaw's): a checked look with the token, then the
/// bytes with the ticket it gave; only what the session carries, and nothing a client sent
/// is ever served as a page (R-A5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_ui_fetches_a_sessions_attachments_with_a_ticket_r_a5() {
    let tree = ui_root();
    let gw = Gateway::start_with(&format!(
        "\n[gateway.control_ui]\nroot = \"{}\"\nbase_path = \"/ui\"\n",
        tree.path().join("control-ui").display()
    ))
    .await;
    let mut c = gw.connect().await;
    let page = json!({"mimeType": "text/html", "fileName": "page.html",
                      "content": b64("<script>alert(1)</script>")});
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "ui", "message": "look", "idempotencyKey": "u-1",
                   "attachments": [dot(), page]}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("u-1", |p| p["state"] == "final").await;
    let rows = user_rows(&mut c, "ui").await;
    let url = |i: usize| {
        rows[0]["__openclaw"]["media"][i]["url"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (image, html) = (url(0), url(1));
    let bearer = format!("Authorization: Bearer {}", gw.token());

    let anon = gw
        .http("GET", &media_path(&image, "ui", "&meta=1"), &[])
        .await;
    assert_eq!(anon.status, 401, "{}", anon.text());
    let meta = gw
        .http("GET", &media_path(&image, "ui", "&meta=1"), &[&bearer])
        .await;
    assert_eq!(meta.status, 200, "{}", meta.text());
    let m: Value = serde_json::from_slice(&meta.body).unwrap();
    assert_eq!(m["available"], true, "{m}");
    assert_eq!(m["mimeType"], "image/png");
    assert_eq!(m["sizeBytes"], 70);
    assert!(m["mediaTicketExpiresAt"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    let ticket = m["mediaTicket"].as_str().unwrap().to_owned();

    let img = gw
        .http(
            "GET",
            &media_path(&image, "ui", &format!("&mediaTicket={ticket}")),
            &[],
        )
        .await;
    assert_eq!(img.status, 200, "{}", img.text());
    assert_eq!(img.header("content-type"), Some("image/png"));
    assert_eq!(img.header("x-content-type-options"), Some("nosniff"));
    assert!(img
        .header("content-security-policy")
        .is_some_and(|p| p.contains("sandbox")));
    use base64::Engine;
    assert_eq!(
        img.body,
        base64::engine::general_purpose::STANDARD
            .decode(DOT)
            .unwrap()
    );
    // The ticket is for that content of that session only.
    let other = gw
        .http(
            "GET",
            &media_path(&image, "elsewhere", &format!("&mediaTicket={ticket}")),
            &[],
        )
        .await;
    assert_eq!(other.status, 401);
    let wrong = gw
        .http(
            "GET",
            &media_path(&html, "ui", &format!("&mediaTicket={ticket}")),
            &[],
        )
        .await;
    assert_eq!(wrong.status, 401);
    // Another session does not carry it, whoever asks.
    let (_, fin) = c
        .turn(json!({"message": "hi", "sessionKey": "elsewhere", "idempotencyKey": "u-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let absent = gw
        .http(
            "GET",
            &media_path(&image, "elsewhere", "&meta=1"),
            &[&bearer],
        )
        .await;
    let a: Value = serde_json::from_slice(&absent.body).unwrap();
    assert_eq!(
        (&a["available"], &a["code"]),
        (&json!(false), &json!("file-not-found")),
        "{a}"
    );
    let made_up = gw
        .http(
            "GET",
            &media_path("file:///etc/passwd", "ui", "&meta=1"),
            &[&bearer],
        )
        .await;
    let a: Value = serde_json::from_slice(&made_up.body).unwrap();
    assert_eq!(a["code"], "file-not-found", "{a}");
    // A page a client attached is text, never a page on the gateway's origin.
    let served = gw
        .http("GET", &media_path(&html, "ui", ""), &[&bearer])
        .await;
    assert_eq!(served.status, 200);
    assert_eq!(
        served.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(served.text(), "<script>alert(1)</script>");
}

/// A message with an image steered into a running turn (R-B3) joins its next request with the
/// image as a part, is recorded with it, and a collected batch carries every message's
/// attachments into its one turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steered_and_collected_messages_keep_their_attachments_r_b3() {
    use loopgate_tests::{hold, reply};
    let gw = Gateway::start_api(Api::Completions, "", TAKES_IMAGES, 30.0).await;
    gw.model.push(hold("First answer."));
    gw.model.push(reply("Second answer."));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "s-1", "sessionKey": "st"}))
        .await;
    let req = c
        .send(
            "agent",
            json!({"message": "and this?", "idempotencyKey": "s-2", "sessionKey": "st",
                   "attachments": [dot()]}),
        )
        .await;
    let acc = c.res(&req).await;
    assert_eq!(acc["payload"]["status"], "accepted", "{acc}");
    // The worker answers a later question on the link once it has the message in hand.
    c.call("diagnostics.lanes", json!({})).await;
    gw.model.release();
    let f1 = c.res(&first).await;
    assert_eq!(f1["payload"]["status"], "ok", "{f1}");
    let requests = gw.model.requests();
    assert_eq!(requests.len(), 2, "one run, two model calls");
    let (image, text) = image_and_text(Api::Completions, &last_user(&requests[1].body));
    assert_eq!(
        image.as_deref(),
        Some(format!("data:image/png;base64,{DOT}").as_str())
    );
    assert!(text.ends_with("and this?"), "{text}");
    let rows = user_rows(&mut c, "st").await;
    assert_eq!(
        rows[1]["__openclaw"]["media"][0]["kind"], "image",
        "{rows:?}"
    );

    // Collected (behind a busy turn): both messages' attachments in the one turn.
    gw.model.push(hold("Busy."));
    let busy = c
        .start_streaming(json!({"message": "busy", "idempotencyKey": "c-0", "sessionKey": "co"}))
        .await;
    let note = json!({"mimeType": "text/plain", "fileName": "a.txt", "content": b64("alpha")});
    for (key, attachments) in [("c-1", json!([dot()])), ("c-2", json!([note]))] {
        let req = c
            .send(
                "agent",
                json!({"message": key, "idempotencyKey": key, "sessionKey": "co",
                       "queueMode": "collect", "attachments": attachments}),
            )
            .await;
        assert_eq!(c.res(&req).await["payload"]["status"], "accepted");
    }
    c.call("diagnostics.lanes", json!({})).await;
    gw.model.release();
    assert_eq!(c.res(&busy).await["payload"]["status"], "ok");
    let w = c
        .call("agent.wait", json!({"runId": "c-2", "timeoutMs": 20_000}))
        .await;
    assert_eq!(w["payload"]["status"], "ok", "{w}");
    let last = gw.model.requests().pop().unwrap().body;
    let (image, text) = image_and_text(Api::Completions, &last_user(&last));
    assert!(image.is_some(), "{last}");
    assert!(
        text.contains("c-1") && text.contains("c-2"),
        "one turn: {text}"
    );
    assert!(
        text.contains("<file name=\"a.txt\" mime=\"text/plain\">"),
        "{text}"
    );
}
