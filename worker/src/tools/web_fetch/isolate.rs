//! HTML is converted in a child process of its own (this binary with [`FLAG`]), under an
//! address-space and CPU limit and a wall-clock deadline: html5ever and `htmd` are not built
//! for hostile input (element counts the parser multiplies, tables padded to the square of
//! their size, nesting the depth limit of [`super::extract::shallow`] misses), so a page that
//! would exhaust memory or stack, or spin, ends that child only. The worker then falls back
//! to the page's text with its tags stripped, in one linear pass.

use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::extract::{self, Extracted, Mode};

/// The first argument that selects the converter in the worker binary.
pub const FLAG: &str = "--web-extract";
/// The converter's address space (its stack included).
const AS_BYTES: u64 = 1024 * 1024 * 1024;
/// The converter's CPU time, seconds.
const CPU_SECONDS: u64 = 10;
/// Wall-clock time the worker gives the converter.
const DEADLINE: Duration = Duration::from_secs(15);
/// Most bytes of converted text read back.
const MAX_OUT: usize = 4 * 1024 * 1024;
/// Longest title kept.
const MAX_TITLE: usize = 300;
/// The converter thread's stack (`htmd` recurses once per level).
const STACK_BYTES: usize = 64 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
struct Converted {
    text: String,
    title: Option<String>,
}

/// The converter's `main`: the body on stdin, `{text, title}` on stdout. Its limits come
/// first, before it reads anything.
pub fn child_main(args: &[std::ffi::OsString]) -> i32 {
    use nix::sys::resource::{setrlimit, Resource};
    if setrlimit(Resource::RLIMIT_AS, AS_BYTES, AS_BYTES).is_err()
        || setrlimit(Resource::RLIMIT_CPU, CPU_SECONDS, CPU_SECONDS).is_err()
    {
        return 2;
    }
    let mode = match args.first().and_then(|a| a.to_str()) {
        Some("text") => Mode::Text,
        _ => Mode::Markdown,
    };
    let mut body = Vec::new();
    if std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut body).is_err() {
        return 3;
    }
    let body = String::from_utf8_lossy(&body).into_owned();
    let worker = std::thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(move || extract::html(&body, mode));
    let Ok(Ok(done)) = worker.map(|w| w.join()) else {
        return 4;
    };
    let mut text = done.text;
    if text.len() > MAX_OUT {
        let mut cut = MAX_OUT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let out = Converted {
        text,
        title: done.title.map(|t| t.chars().take(MAX_TITLE).collect()),
    };
    match serde_json::to_writer(std::io::stdout().lock(), &out) {
        Ok(()) => 0,
        Err(_) => 5,
    }
}

/// `body` converted in the child; the stripped text when the child fails, overruns or
/// cannot start.
pub async fn convert(body: String, mode: Mode) -> Extracted {
    match run_child(&body, mode).await {
        Some(c) => Extracted {
            text: c.text,
            title: c.title,
            extractor: "htmd",
        },
        None => Extracted {
            text: extract::strip_tags(&body),
            title: None,
            extractor: "strip",
        },
    }
}

async fn run_child(body: &str, mode: Mode) -> Option<Converted> {
    let mode_arg = match mode {
        Mode::Markdown => "markdown",
        Mode::Text => "text",
    };
    let mut child = tokio::process::Command::new("/proc/self/exe")
        .arg(FLAG)
        .arg(mode_arg)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let mut stdout = child.stdout.take()?;
    let bytes = body.as_bytes().to_vec();
    let work = async move {
        let feed = async move {
            let _ = stdin.write_all(&bytes).await;
            drop(stdin);
        };
        let mut out = Vec::new();
        let mut limited = (&mut stdout).take(MAX_OUT as u64 + 64 * 1024);
        let read = limited.read_to_end(&mut out);
        let (_, read) = tokio::join!(feed, read);
        read.ok()?;
        let status = child.wait().await.ok()?;
        status.success().then_some(())?;
        serde_json::from_slice::<Converted>(&out).ok()
    };
    tokio::time::timeout(DEADLINE, work).await.ok().flatten()
}
