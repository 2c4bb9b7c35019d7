//! A message's `attachments` as clients send them (OpenClaw's `ChatAttachment`), checked and
//! decoded once at admission into what a worker gets ([`Attachment`]): images known by their
//! bytes (PNG, JPEG, GIF, WebP), UTF-8 text files, within the size and count caps. Anything
//! else is refused with a clear error naming the attachment: nothing a client sends is
//! dropped without a word, except entries with no content at all (as OpenClaw drops them).

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use ipc::control::{Attachment, AttachmentKind};
use ipc::gateway::{
    media_type, AttachmentContent, ChatAttachment, MAX_ATTACHMENTS, MAX_ATTACHMENTS_BYTES,
    MAX_IMAGE_ATTACHMENT_BYTES, MAX_TEXT_ATTACHMENT_BYTES,
};

/// Base64 as clients write it: padded or not.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Which door a message came in by: `agent` takes images and text files only (as OpenClaw's
/// refuses other files there); `chat.send` also takes other files, which the model is told
/// it cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Takes {
    ImagesAndText,
    Anything,
}

/// Why a message's attachments are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum AttachmentError {
    #[error("{0} attachments; at most {MAX_ATTACHMENTS} may be sent with one message")]
    TooMany(usize),
    /// One attachment, by its label (the file name, else the type, else `attachment-N`).
    #[error("attachment {label}: {why}")]
    One { label: String, why: Refused },
    #[error("attachment {label}: non-image attachments ({mime}) are not supported on this entrypoint (images and UTF-8 text files are)")]
    NotHere { label: String, mime: String },
    #[error("attachment {label}: exceeds size limit (attachments total {total} > {MAX_ATTACHMENTS_BYTES} bytes)")]
    TotalTooLarge { label: String, total: u64 },
}

/// What is wrong with one attachment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    #[error("invalid mimeType {0:?}: expected type/subtype")]
    MediaType(String),
    /// `what` is "image exceeds", "text file exceeds" or "exceeds".
    #[error("{what} size limit ({size} > {cap} bytes)")]
    TooLarge {
        what: &'static str,
        size: u64,
        cap: u64,
    },
    #[error("content as an array must hold byte values (0-255)")]
    NotBytes,
    #[error("content must be base64 string")]
    NotText,
    #[error("source type {0:?} is not supported (base64 is)")]
    SourceKind(String),
    #[error("a data: URL needs a comma before its data")]
    DataUrlComma,
    #[error("only base64 data: URLs are taken")]
    DataUrlNotBase64,
    #[error("invalid base64 content")]
    Base64,
}

/// The attachments of one message, checked; `Err` says which one is wrong and why, in
/// OpenClaw's words where it has them (`attachment <label>: ...`, the label being the file
/// name, else the type, else `attachment-N`).
pub(super) fn normalize(
    list: Option<Vec<ChatAttachment>>,
    takes: Takes,
) -> Result<Vec<Attachment>, AttachmentError> {
    let list = list.unwrap_or_default();
    if list.len() > MAX_ATTACHMENTS {
        return Err(AttachmentError::TooMany(list.len()));
    }
    let mut out = Vec::with_capacity(list.len());
    let mut total: u64 = 0;
    for (i, a) in list.into_iter().enumerate() {
        let label = [&a.file_name, &a.mime_type]
            .into_iter()
            .flatten()
            .find(|n| !n.trim().is_empty())
            .cloned()
            .unwrap_or_else(|| format!("attachment-{}", i + 1));
        let found = match one(a) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(why) => return Err(AttachmentError::One { label, why }),
        };
        if takes == Takes::ImagesAndText && found.kind == AttachmentKind::Document {
            return Err(AttachmentError::NotHere {
                label,
                mime: found.mime_type,
            });
        }
        total += found.size_bytes;
        if total > MAX_ATTACHMENTS_BYTES {
            return Err(AttachmentError::TotalTooLarge { label, total });
        }
        out.push(found);
    }
    Ok(out)
}

/// Bytes with the type their sender gave them.
struct Raw {
    bytes: Vec<u8>,
    declared: Option<String>,
}

/// One attachment; `None` when it has no content.
fn one(a: ChatAttachment) -> Result<Option<Attachment>, Refused> {
    let Some(raw) = raw_bytes(&a)? else {
        return Ok(None);
    };
    if raw.bytes.is_empty() {
        return Ok(None);
    }
    let size = raw.bytes.len() as u64;
    // The type the client declares is checked before anything else reads it (a prompt, a
    // header, a URL): `type/subtype` of a safe alphabet, or refused.
    let declared = match raw.declared.or(a.mime_type.clone()) {
        Some(m) if m.trim().is_empty() => None,
        Some(m) => {
            Some(media_type(&m).ok_or_else(|| Refused::MediaType(m.chars().take(64).collect()))?)
        }
        None => None,
    };
    let (kind, mime) = match sniff_image(&raw.bytes) {
        Some(mime) => (AttachmentKind::Image, mime.to_owned()),
        None => match declared.as_deref() {
            d if text_like(d) && is_text(&raw.bytes) => (
                AttachmentKind::Text,
                d.filter(|m| *m != "application/octet-stream")
                    .unwrap_or("text/plain")
                    .to_owned(),
            ),
            // Not an image models take (whatever it says it is), not text: a file the
            // model is told of.
            Some(m) if !m.starts_with("image/") => (AttachmentKind::Document, m.to_owned()),
            _ => (
                AttachmentKind::Document,
                "application/octet-stream".to_owned(),
            ),
        },
    };
    let (cap, what) = match kind {
        AttachmentKind::Image => (MAX_IMAGE_ATTACHMENT_BYTES, "image exceeds"),
        AttachmentKind::Text => (MAX_TEXT_ATTACHMENT_BYTES, "text file exceeds"),
        _ => (MAX_ATTACHMENTS_BYTES, "exceeds"),
    };
    if size > cap {
        return Err(Refused::TooLarge { what, size, cap });
    }
    let digest = crate::secrets::sha256_hex(&raw.bytes);
    Ok(Some(Attachment {
        kind,
        mime_type: mime,
        // Shown in history and put in the model's prompt: only what shows as itself.
        file_name: a.file_name.as_deref().and_then(ipc::text::file_name),
        digest,
        size_bytes: size,
        data: STANDARD.encode(&raw.bytes),
    }))
}

/// The bytes of an attachment, from `content` or `source`; `None` when it has neither.
fn raw_bytes(a: &ChatAttachment) -> Result<Option<Raw>, Refused> {
    match &a.content {
        Some(AttachmentContent::Text(s)) => return decode_text(s).map(Some),
        Some(AttachmentContent::Bytes(bytes)) => {
            return Ok(Some(Raw {
                bytes: bytes.clone(),
                declared: None,
            }));
        }
        Some(AttachmentContent::NotBytes) => return Err(Refused::NotBytes),
        None => {}
        Some(AttachmentContent::Other) => return Err(Refused::NotText),
    }
    let Some(source) = &a.source else {
        return Ok(None);
    };
    if source.kind.as_deref().is_some_and(|k| k != "base64") {
        return Err(Refused::SourceKind(source.kind.clone().unwrap_or_default()));
    }
    let Some(data) = &source.data else {
        return Ok(None);
    };
    let mut raw = decode_text(data)?;
    raw.declared = raw.declared.or(source.media_type.clone());
    Ok(Some(raw))
}

/// Base64 text, or a `data:<type>;base64,<data>` URL.
fn decode_text(s: &str) -> Result<Raw, Refused> {
    // Past this the decoded bytes cannot be within the caps: refuse before decoding.
    let most = (MAX_ATTACHMENTS_BYTES as usize / 3 + 1) * 4 + 1024;
    if s.len() > most {
        return Err(Refused::TooLarge {
            what: "exceeds",
            size: (s.len() / 4 * 3) as u64,
            cap: MAX_ATTACHMENTS_BYTES,
        });
    }
    let (declared, data) = match s.strip_prefix("data:") {
        Some(rest) => {
            let (header, data) = rest.split_once(',').ok_or(Refused::DataUrlComma)?;
            let Some(mime) = header.strip_suffix(";base64") else {
                return Err(Refused::DataUrlNotBase64);
            };
            let mime = mime.split(';').next().unwrap_or("").to_owned();
            ((!mime.is_empty()).then_some(mime), data)
        }
        None => (None, s),
    };
    let compact: Vec<u8> = data.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let bytes = LENIENT.decode(&compact).map_err(|_| Refused::Base64)?;
    Ok(Raw { bytes, declared })
}

/// The image type of `bytes`, by their signature.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Whether a declared type (or none) may be a text file.
fn text_like(declared: Option<&str>) -> bool {
    match declared {
        None | Some("application/octet-stream") => true,
        Some(m) => {
            m.starts_with("text/")
                || m.ends_with("+json")
                || m.ends_with("+xml")
                || matches!(
                    m,
                    "application/json"
                        | "application/xml"
                        | "application/yaml"
                        | "application/x-yaml"
                        | "application/toml"
                        | "application/javascript"
                        | "application/x-sh"
                        | "application/sql"
                        | "application/x-ndjson"
                )
        }
    }
}

/// UTF-8 without NUL bytes: text a prompt may carry.
fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const DOT: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

    fn att(content: Value) -> ChatAttachment {
        ChatAttachment {
            kind: Some("image".into()),
            mime_type: Some("image/png".into()),
            file_name: Some("dot.png".into()),
            content: serde_json::from_value(content).ok(),
            source: None,
        }
    }

    fn one_of(a: ChatAttachment, takes: Takes) -> Result<Vec<Attachment>, String> {
        normalize(Some(vec![a]), takes).map_err(|e| e.to_string())
    }

    #[test]
    fn images_are_known_by_their_bytes_in_each_form() {
        let url = format!("data:image/jpeg;base64,{DOT}");
        let unpadded = DOT.trim_end_matches('=');
        let wrapped = format!("{}\n{}", &DOT[..20], &DOT[20..]);
        for c in [DOT, url.as_str(), unpadded, wrapped.as_str()] {
            let got = one_of(att(Value::String(c.into())), Takes::ImagesAndText).unwrap();
            assert_eq!(got.len(), 1, "{c}");
            assert_eq!(got[0].kind, AttachmentKind::Image);
            assert_eq!(got[0].mime_type, "image/png", "the bytes decide");
            assert_eq!(got[0].size_bytes, 70);
            assert_eq!(got[0].data, DOT, "canonical base64");
        }
        let anthropic = ChatAttachment {
            source: Some(ipc::gateway::AttachmentSource {
                kind: Some("base64".into()),
                media_type: Some("image/png".into()),
                data: Some(DOT.into()),
            }),
            ..Default::default()
        };
        let got = one_of(anthropic, Takes::ImagesAndText).unwrap();
        assert_eq!(got[0].file_name, None);
        assert_eq!(got[0].digest.len(), 64);
    }

    #[test]
    fn text_is_text_and_other_files_only_through_chat_send() {
        let text = ChatAttachment {
            file_name: Some("notes.md".into()),
            mime_type: Some("text/markdown".into()),
            content: serde_json::from_value(Value::String(STANDARD.encode("# hi\n"))).ok(),
            ..Default::default()
        };
        let got = one_of(text, Takes::ImagesAndText).unwrap();
        assert_eq!(got[0].kind, AttachmentKind::Text);
        assert_eq!(got[0].mime_type, "text/markdown");
        let pdf = ChatAttachment {
            file_name: Some("a.pdf".into()),
            mime_type: Some("application/pdf".into()),
            content: serde_json::from_value(Value::String(STANDARD.encode(b"%PDF-1.7\x00\x01")))
                .ok(),
            ..Default::default()
        };
        let e = one_of(pdf.clone(), Takes::ImagesAndText).unwrap_err();
        assert_eq!(e, "attachment a.pdf: non-image attachments (application/pdf) are not supported on this entrypoint (images and UTF-8 text files are)");
        let got = one_of(pdf, Takes::Anything).unwrap();
        assert_eq!(got[0].kind, AttachmentKind::Document);
        // Bytes that are not the image they claim to be are a file, not an image.
        let fake = one_of(
            att(Value::String(STANDARD.encode([0u8, 1, 2]))),
            Takes::Anything,
        );
        assert_eq!(fake.unwrap()[0].mime_type, "application/octet-stream");
        let bad = att(Value::String("!!!".into()));
        assert_eq!(
            one_of(bad, Takes::Anything).unwrap_err(),
            "attachment dot.png: invalid base64 content"
        );
        let unnamed = ChatAttachment {
            content: serde_json::from_value(Value::Bool(true)).ok(),
            ..Default::default()
        };
        assert_eq!(
            one_of(unnamed, Takes::Anything).unwrap_err(),
            "attachment attachment-1: content must be base64 string"
        );
        let bytes = ChatAttachment {
            content: serde_json::from_value(Value::Array(vec![104.into(), 105.into()])).ok(),
            ..Default::default()
        };
        assert_eq!(one_of(bytes, Takes::ImagesAndText).unwrap()[0].data, "aGk=");
    }

    #[test]
    fn empty_entries_are_dropped_and_caps_hold() {
        let empty = vec![ChatAttachment::default(), att(Value::String(String::new()))];
        assert_eq!(normalize(Some(empty), Takes::Anything).unwrap(), vec![]);
        let many = vec![att(Value::String(DOT.into())); MAX_ATTACHMENTS + 1];
        assert_eq!(
            normalize(Some(many), Takes::Anything),
            Err(AttachmentError::TooMany(33))
        );
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.resize(MAX_IMAGE_ATTACHMENT_BYTES as usize + 1, 0);
        let big = att(Value::String(STANDARD.encode(&png)));
        assert_eq!(
            one_of(big, Takes::Anything).unwrap_err(),
            "attachment dot.png: image exceeds size limit (6291457 > 6291456 bytes)"
        );
        let mut five = b"\x89PNG\r\n\x1a\n".to_vec();
        five.resize(5 * 1024 * 1024, 0);
        let two = vec![att(Value::String(STANDARD.encode(&five))); 2];
        let e = normalize(Some(two), Takes::Anything).unwrap_err();
        assert!(
            matches!(e, AttachmentError::TotalTooLarge { total, .. } if total == 10 * 1024 * 1024),
            "{e}"
        );
    }
}
