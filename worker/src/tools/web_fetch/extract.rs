//! A fetched body as readable text: HTML reduced to markdown (by `htmd`, with scripts,
//! styles, navigation and forms left out) or to plain text, JSON pretty-printed, other text
//! as it came. Pure. A hostile page can nest elements as deep as its size allows, which
//! costs the parser time in the square of the depth and the converter stack in its depth:
//! tags nested deeper than [`MAX_DEPTH`] are dropped (their text kept) before parsing; what
//! that misses, the converter's own process limits catch (`isolate`).

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

/// Elements whose end tag may be left out (the parser closes them itself): not nesting.
const SELF_CLOSING_PARENTS: &[&str] = &[
    "p", "li", "dt", "dd", "tr", "td", "th", "tbody", "thead", "tfoot", "option", "optgroup",
];

/// Elements that never hold others.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// `body` of `content_type` as text, unless it is HTML: then `Err(body)`, for the
/// converter (`isolate`).
pub fn plain(body: String, content_type: &str) -> Result<Extracted, String> {
    let ct = content_type.to_ascii_lowercase();
    if ct.contains("html") || (ct.is_empty() && looks_like_html(&body)) {
        return Err(body);
    }
    // Pretty-printed only when shallow: indentation costs each line its depth.
    if ct.contains("json") && json_depth(&body) <= MAX_PRETTY_DEPTH {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&body) {
            if let Ok(text) = serde_json::to_string_pretty(&v) {
                return Ok(Extracted {
                    text,
                    title: None,
                    extractor: "json",
                });
            }
        }
    }
    Ok(Extracted {
        text: body,
        title: None,
        extractor: "raw",
    })
}

/// Deepest JSON nesting pretty-printed.
const MAX_PRETTY_DEPTH: usize = 16;

/// How deep brackets nest in `body` (strings skipped).
fn json_depth(body: &str) -> usize {
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for b in body.bytes() {
        match (in_str, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_str = false,
            (true, false, _) => {}
            (false, _, b'"') => in_str = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                max = max.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

fn looks_like_html(body: &str) -> bool {
    let head: String = body
        .chars()
        .take(512)
        .collect::<String>()
        .to_ascii_lowercase();
    head.contains("<html") || head.contains("<!doctype html")
}

/// The text of an HTML page with its tags, comments, scripts and styles taken out and a
/// few entities decoded: one linear pass, for a page the converter could not take.
pub fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut at = 0;
    while at < html.len() {
        let Some(lt) = html[at..].find('<').map(|i| at + i) else {
            out.push_str(&html[at..]);
            break;
        };
        out.push_str(&html[at..lt]);
        let rest = &lower[lt..];
        let skip_to = |end: &str| rest.find(end).map_or(html.len(), |e| lt + e + end.len());
        at = if rest.starts_with("<!--") {
            skip_to("-->")
        } else if rest.starts_with("<script") {
            skip_to("</script>")
        } else if rest.starts_with("<style") {
            skip_to("</style>")
        } else {
            out.push(' ');
            skip_to(">")
        };
    }
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    tidy(
        &decoded
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n"),
    )
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
    let (mut copied, mut at) = (0usize, 0usize);
    let mut open: Vec<String> = Vec::new();
    let mut dropped_any = false;
    while let Some(lt) = html[at..].find('<').map(|i| at + i) {
        let rest = &html[lt..];
        if rest.starts_with("<!--") {
            // A comment ends at `-->`, or at `--!>` as the parser ends it too.
            let end = [
                rest.find("-->").map(|e| e + 3),
                rest.find("--!>").map(|e| e + 4),
            ]
            .into_iter()
            .flatten()
            .min();
            at = end.map_or(html.len(), |e| lt + e);
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
        // As the parser nests: `<div/>` opens a `div`; an end tag closes up to the element it
        // names, and one that names no open element is ignored.
        let counted = !name.is_empty()
            && !VOID.contains(&name.as_str())
            && !SELF_CLOSING_PARENTS.contains(&name.as_str());
        let deep = if closing && counted {
            // Only the innermost elements are looked through: an end tag that names none
            // of them is taken as stray (the scan stays linear on a hostile page).
            let near = open.iter().rev().take(1024).position(|n| *n == name);
            match near.map(|back| open.len() - 1 - back) {
                Some(i) => {
                    let deep = open.len() > MAX_DEPTH;
                    open.truncate(i);
                    deep
                }
                None => open.len() > MAX_DEPTH,
            }
        } else if !closing && counted {
            open.push(name);
            open.len() > MAX_DEPTH
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
    // A title is text, never markup: only its entities are decoded.
    let raw = body.get(start..end.min(start + 4096))?;
    let t: String = decode_entities(raw)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_TITLE)
        .collect();
    (!t.is_empty()).then_some(t)
}

/// Longest title kept.
const MAX_TITLE: usize = 300;

/// `text` with the common named entities and numeric ones decoded.
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let tail = &rest[amp..];
        let semi = tail.find(';').filter(|s| *s <= 10);
        let decoded = semi.and_then(|s| {
            let name = &tail[1..s];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                    .ok()
                    .and_then(char::from_u32),
                n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, s + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &tail[len..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
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
        assert_eq!(
            decode_entities("a &lt;b&gt; &#65;&#x42; &bogus; &"),
            "a <b> AB &bogus; &"
        );
        let nested = format!("<title>{}t</title>", "<div>".repeat(50_000));
        assert_eq!(title(&nested).map(|t| t.chars().count()), Some(MAX_TITLE));
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

    #[test]
    fn bodies_by_type_and_a_page_nested_as_deep_as_its_size_allows() {
        let j = plain("{\"a\":1}".into(), "application/json").unwrap();
        assert_eq!((j.text.as_str(), j.extractor), ("{\n  \"a\": 1\n}", "json"));
        let r = plain("plain <b>as is</b>".into(), "text/plain").unwrap();
        assert!(plain("<p>x</p>".into(), "text/html; charset=utf-8").is_err());
        assert_eq!(
            (r.text.as_str(), r.extractor),
            ("plain <b>as is</b>", "raw")
        );
        let deep = format!(
            "<html><body>{}deep{}</body></html>",
            "<div>".repeat(150_000),
            "</div>".repeat(150_000)
        );
        let d = html(&deep, Mode::Markdown);
        assert_eq!(d.text, "deep");
        let unclosed = format!("<p>{}</p>", "<b>x<i>y".repeat(100_000));
        let u = html(&unclosed, Mode::Text);
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
