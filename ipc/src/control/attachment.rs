//! A run's attachments as the supervisor hands them to a worker (checked, decoded once,
//! typed), and how a transcript message refers to them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What an attachment is to the model.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    /// An image (PNG, JPEG, GIF or WebP, known by its bytes): an image part for a model
    /// that takes images, a note for one that does not.
    Image,
    /// UTF-8 text: a prompt segment of its own after the user's text.
    Text,
    /// Any other file (`chat.send` only): kept, and named to the model with a note that it
    /// cannot be read.
    Document,
    #[serde(other)]
    Unknown,
}

impl AttachmentKind {
    /// As `chat.history`'s `media[].kind` says it.
    pub fn media_kind(self) -> &'static str {
        match self {
            AttachmentKind::Image => "image",
            _ => "file",
        }
    }
}

/// One attachment of a run's message.
///
/// Since: protocol v2 (additive).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub kind: AttachmentKind,
    /// Known from the bytes for images; as declared (checked to be text) otherwise.
    pub mime_type: String,
    /// As the client named it (`None`: unnamed).
    #[serde(default)]
    pub file_name: Option<String>,
    /// Hex SHA-256 of the bytes: the transcript keeps each content once under it.
    pub digest: String,
    pub size_bytes: u64,
    /// The bytes, base64 (standard alphabet, padded): the form every model API takes.
    pub data: String,
}

impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Content is user data: keep it out of logs.
        f.debug_struct("Attachment")
            .field("kind", &self.kind)
            .field("mime_type", &self.mime_type)
            .field("digest", &self.digest)
            .field("size_bytes", &self.size_bytes)
            .finish()
    }
}

impl Attachment {
    /// How the transcript refers to it.
    pub fn stored(&self) -> StoredMedia {
        StoredMedia {
            kind: self.kind,
            mime_type: self.mime_type.clone(),
            file_name: self.file_name.clone(),
            digest: self.digest.clone(),
            size_bytes: self.size_bytes,
        }
    }
}

/// An attachment as a transcript message refers to it (`media[]` of the stored message;
/// the bytes are in the agent database's `media` table under `digest`).
///
/// Since: protocol v2 (additive): inside `StoredMessage::message_json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredMedia {
    pub kind: AttachmentKind,
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    pub digest: String,
    pub size_bytes: u64,
}

impl StoredMedia {
    /// The name clients see (`media://inbound/<name>`): the file's own name made safe (when it
    /// has one), then the digest's first 32 digits (what finds it again), then the type's
    /// extension.
    pub fn url(&self) -> String {
        let short = self.digest.get(..URL_DIGEST).unwrap_or(&self.digest);
        let stem: String = self
            .file_name
            .as_deref()
            .map(|n| n.rsplit(['/', '\\']).next().unwrap_or(n))
            .map(|n| n.rsplit_once('.').map_or(n, |(stem, _)| stem))
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .take(48)
            .collect();
        let ext = extension(&self.mime_type);
        if stem.is_empty() {
            format!("media://inbound/{short}.{ext}")
        } else {
            format!("media://inbound/{stem}---{short}.{ext}")
        }
    }
}

/// Digits of the digest a `media://inbound/` name carries (128 bits).
pub const URL_DIGEST: usize = 32;

/// The digest digits a `media://inbound/<name>` names (`None`: not such a name).
pub fn url_digest(url: &str) -> Option<&str> {
    let name = url.strip_prefix("media://inbound/")?;
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let digits = stem.rsplit_once("---").map_or(stem, |(_, d)| d);
    (digits.len() == URL_DIGEST && digits.bytes().all(|b| b.is_ascii_hexdigit())).then_some(digits)
}

/// The usual file extension of a MIME type (`bin` when unknown).
pub fn extension(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "text/markdown" => "md",
        "text/csv" => "csv",
        "text/html" => "html",
        "application/json" => "json",
        "application/pdf" => "pdf",
        "application/zip" => "zip",
        "application/xml" | "text/xml" => "xml",
        "application/yaml" | "text/yaml" => "yaml",
        m if m.starts_with("text/") => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_a_safe_stem_and_the_types_extension() {
        let m = StoredMedia {
            kind: AttachmentKind::Image,
            mime_type: "image/png".into(),
            file_name: Some("../../etc/my dot!.png".into()),
            digest: "0123456789abcdef0123456789abcdef0123".into(),
            size_bytes: 70,
        };
        let digits = "0123456789abcdef0123456789abcdef";
        assert_eq!(m.url(), format!("media://inbound/mydot---{digits}.png"));
        assert_eq!(url_digest(&m.url()), Some(digits));
        assert_eq!(url_digest("media://inbound/x---0123.png"), None);
        assert_eq!(url_digest("file:///etc/passwd"), None);
        let unnamed = StoredMedia {
            file_name: None,
            mime_type: "text/plain".into(),
            ..m
        };
        assert_eq!(unnamed.url(), format!("media://inbound/{digits}.txt"));
        assert_eq!(url_digest(&unnamed.url()), Some(digits));
    }
}
