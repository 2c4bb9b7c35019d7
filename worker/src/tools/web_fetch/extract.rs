//! A fetched body as readable text: HTML reduced to markdown (by `htmd`, with scripts,
//! styles, navigation and forms left out) or to plain text, JSON pretty-printed, other text
//! as it came. Pure. A hostile page can nest elements as deep as its size allows, which
//! costs the parser time in the square of the depth and the converter stack in its depth:
//! tags nested deeper than [`MAX_DEPTH`] are dropped (their text kept) before parsing, and
//! the HTML work runs on a thread of its own.

use serde::Serialize;

/// How the model wants the page (`extractMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Markdown,
    Text,
}

/// What a body became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    pub text: String,
    pub title: Option<String>,
    /// `htmd`, `json` or `raw` (`extractor` in the result).
    pub extractor: &'static str,
}

/// Elements that are never a page's readable content.
const SKIPPED: &[&str] = &[
    "head", "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object",
    "embed", "nav", "form", "button", "select", "input", "textarea", "dialog",
];

/// Deepest element nesting kept; deeper tags are dropped, their text kept.
const MAX_DEPTH: usize = 256;

/// Stack of the thread that reduces HTML (`htmd`'s walk recurses once per level).
const HTML_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Elements that never hold others.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// `body` of `content_type` as `mode` asks.
pub async fn extract(body: String, content_type: &str, mode: Mode) -> Extracted {
    let ct = content_type.to_ascii_lowercase();
    if ct.contains("html") || (ct.is_empty() && looks_like_html(&body)) {
        return html_on_own_thread(body, mode).await;
    }
    if ct.contains("json") {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&body) {
            if let Ok(text) = serde_json::to_string_pretty(&v) {
                return Extracted {
                    text,
                    title: None,
                    extractor: "json",
                };
            }
        }
    }
    Extracted {
        text: body,
        title: None,
        extractor: "raw",
    }
}

fn looks_like_html(body: &str) -> bool {
    let head: String = body
        .chars()
        .take(512)
        .collect::<String>()
        .to_ascii_lowercase();
    head.contains("<html") || head.contains("<!doctype html")
}

async fn html_on_own_thread(body: String, mode: Mode) -> Extracted {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("web-extract".into())
        .stack_size(HTML_STACK_BYTES)
        .spawn(move || {
            let _ = tx.send(html(&body, mode));
        });
    let fallback = || Extracted {
        text: String::new(),
        title: None,
        extractor: "htmd",
    };
    match spawned {
        Ok(_) => rx.await.unwrap_or_else(|_| fallback()),
        Err(_) => fallback(),
    }
}

/// An HTML page as markdown or text, and its title.
pub fn html(body: &str, mode: Mode) -> Extracted {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    let markdown = converter.convert(&shallow(body)).unwrap_or_default();
    let text = match mode {
        Mode::Markdown => markdown,
        Mode::Text => markdown_to_text(&markdown),
    };
    Extracted {
        text: tidy(&text),
        title: title(body),
        extractor: "htmd",
    }
}

/// `html` with every tag nested deeper than [`MAX_DEPTH`] (by its open and close tags, void
/// and self-closed ones aside) dropped. One pass; comments and declarations kept as they are.
pub fn shallow(html: &str) -> std::borrow::Cow<'_, str> {
    let mut out = String::new();
    let (mut copied, mut depth, mut at) = (0usize, 0usize, 0usize);
    let mut dropped_any = false;
    while let Some(lt) = html[at..].find('<').map(|i| at + i) {
        let rest = &html[lt..];
        if rest.starts_with("<!--") {
            at = rest.find("-->").map_or(html.len(), |e| lt + e + 3);
            continue;
        }
        let Some(gt) = rest.find('>').map(|e| lt + e) else {
            break;
        };
        let tag = &html[lt + 1..gt];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        let opens =
            !closing && !name.is_empty() && !tag.ends_with('/') && !VOID.contains(&name.as_str());
        let deep = if closing && !name.is_empty() {
            let deep = depth > MAX_DEPTH;
            depth = depth.saturating_sub(1);
            deep
        } else if opens {
            depth += 1;
            depth > MAX_DEPTH
        } else {
            false
        };
        if deep {
            dropped_any = true;
            out.push_str(&html[copied..lt]);
            copied = gt + 1;
        }
        at = gt + 1;
    }
    if !dropped_any {
        return std::borrow::Cow::Borrowed(html);
    }
    out.push_str(&html[copied..]);
    std::borrow::Cow::Owned(out)
}

/// The page's `<title>`, entities decoded and white space collapsed.
fn title(body: &str) -> Option<String> {
    let lower = body.get(..body.len().min(256 * 1024)).unwrap_or(body);
    let lower = lower.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let raw = body.get(start..end)?;
    let decoded = htmd::convert(&format!("<p>{raw}</p>")).unwrap_or_default();
    let t = decoded.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then_some(t)
}

/// Runs of more than one blank line made one.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_owned()
}

/// Markdown without its markup: heading and quote marks, emphasis, code fences, and links
/// and images as their text.
pub fn markdown_to_text(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    for line in md.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            continue;
        }
        let t = t.trim_start_matches('#').trim_start();
        let t = t.trim_start_matches('>').trim_start();
        let t = links_as_text(t);
        let t = t.replace("**", "").replace("__", "").replace('`', "");
        out.push_str(&t);
        out.push('\n');
    }
    out
}

/// `[text](url)` and `![alt](src)` as `text` and `alt`.
fn links_as_text(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        let before = &rest[..open];
        out.push_str(before.strip_suffix('!').unwrap_or(before));
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<!doctype html><html><head><title> Loopback &amp; Test\n Page</title>\
        <style>body{color:red}</style><script>alert('x')</script></head><body>\
        <nav><a href='/'>Home</a></nav><h1>Fetch target</h1>\
        <p>The secret word is <b>PLUMTREE-4471</b>. See <a href='https://x.test/a'>the docs</a>.</p>\
        <p>Second paragraph.</p><form><input name=q></form></body></html>";

    #[test]
    fn html_becomes_markdown_without_scripts_styles_or_navigation() {
        let e = html(PAGE, Mode::Markdown);
        assert_eq!(e.title.as_deref(), Some("Loopback & Test Page"));
        assert_eq!(e.extractor, "htmd");
        assert!(
            e.text
                .starts_with("# Fetch target\n\nThe secret word is **PLUMTREE-4471**."),
            "{}",
            e.text
        );
        assert!(e.text.contains("[the docs](https://x.test/a)"));
        for gone in ["alert", "color:red", "Home", "<", "Loopback"] {
            assert!(!e.text.contains(gone), "{gone} in {}", e.text);
        }
    }

    #[test]
    fn text_mode_drops_the_markup() {
        let e = html(PAGE, Mode::Text);
        assert!(
            e.text
                .starts_with("Fetch target\n\nThe secret word is PLUMTREE-4471. See the docs."),
            "{}",
            e.text
        );
        assert_eq!(
            markdown_to_text("![logo](a.png) and [x](y)\n```\ncode\n```"),
            "logo and x\ncode\n"
        );
    }

    #[tokio::test]
    async fn bodies_by_type_and_a_page_nested_as_deep_as_its_size_allows() {
        let j = extract("{\"a\":1}".into(), "application/json", Mode::Markdown).await;
        assert_eq!((j.text.as_str(), j.extractor), ("{\n  \"a\": 1\n}", "json"));
        let r = extract("plain <b>as is</b>".into(), "text/plain", Mode::Markdown).await;
        assert_eq!(
            (r.text.as_str(), r.extractor),
            ("plain <b>as is</b>", "raw")
        );
        let deep = format!(
            "<html><body>{}deep{}</body></html>",
            "<div>".repeat(150_000),
            "</div>".repeat(150_000)
        );
        let d = extract(deep, "text/html", Mode::Markdown).await;
        assert_eq!(d.text, "deep");
        let unclosed = format!("<p>{}</p>", "<b>x<i>y".repeat(100_000));
        let u = extract(unclosed, "text/html", Mode::Text).await;
        assert_eq!(u.text.matches('y').count(), 100_000);
    }

    #[test]
    fn tags_past_the_depth_limit_are_dropped_and_their_text_kept() {
        let html = format!(
            "{}a<br/><img src=x>{}",
            "<div>".repeat(MAX_DEPTH + 2),
            "</div>".repeat(MAX_DEPTH + 2)
        );
        let s = shallow(&html);
        assert_eq!(s.matches("<div>").count(), MAX_DEPTH);
        assert_eq!(s.matches("</div>").count(), MAX_DEPTH);
        assert!(s.contains("a<br/><img src=x>"));
        assert!(matches!(
            shallow("<p><!-- <div> -->x</p>"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
