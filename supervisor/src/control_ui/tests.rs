use super::*;
use crate::config::control_ui::{normalize_base_path, resolve, RawControlUi};

fn file(rel: &str, fallback: bool) -> Route {
    Route::File {
        rel: PathBuf::from(rel),
        fallback,
    }
}

#[test]
fn base_paths_normalize_or_are_refused() {
    assert_eq!(normalize_base_path("/").unwrap(), "");
    assert_eq!(normalize_base_path("").unwrap(), "");
    assert_eq!(normalize_base_path("ui/").unwrap(), "/ui");
    assert_eq!(normalize_base_path(" /a/b ").unwrap(), "/a/b");
    for bad in ["/a//b", "/../x", "/.hidden", "/a b", "/a?x", "/%2e%2e"] {
        assert!(normalize_base_path(bad).is_err(), "{bad}");
    }
}

#[test]
fn targets_that_name_no_path_are_not_the_uis() {
    // `CONNECT a:1` (authority form) and an empty target once panicked the router.
    assert_eq!(route("", "a:1", None), Route::NotMine);
    assert_eq!(route("", "", None), Route::NotMine);
    assert_eq!(route("/ui", "*", None), Route::NotMine);
}

#[test]
fn routes_under_a_base_path() {
    assert_eq!(route("/ui", "/other", None), Route::NotMine);
    assert_eq!(route("/ui", "/uix/a.js", None), Route::NotMine);
    assert_eq!(
        route("/ui", "/ui", Some("a=1")),
        Route::Redirect("/ui/?a=1".into())
    );
    assert_eq!(route("/ui", "/ui/", None), file("index.html", true));
    assert_eq!(
        route("/ui", "/ui/control-ui-config.json", None),
        Route::Config
    );
    assert_eq!(
        route("/ui", "/ui/__openclaw/control-ui-config.json", None),
        Route::Config
    );
    assert_eq!(
        route("/ui", "/__openclaw__/control-ui-config.json", None),
        Route::NotMine,
        "the root alias is only for an empty base path"
    );
    assert_eq!(
        route("", "/__openclaw__/control-ui-config.json", None),
        Route::Config
    );
    assert_eq!(
        route("/ui", "/ui/__openclaw__/assistant-media", Some("meta=1")),
        Route::Media
    );
    assert_eq!(
        route("", "/__openclaw__/assistant-media", None),
        Route::Media
    );
}

#[test]
fn files_map_and_fall_back_like_the_ui_expects() {
    assert_eq!(route("", "/", None), file("index.html", true));
    assert_eq!(
        route("", "/assets/app-1.js", None),
        file("assets/app-1.js", false)
    );
    // A deep link's relative asset URL.
    assert_eq!(
        route("", "/chat/main/assets/app-1.js", None),
        file("assets/app-1.js", false)
    );
    assert_eq!(
        route("", "/__openclaw__/favicon.svg", None),
        file("favicon.svg", false)
    );
    assert_eq!(route("", "/chat/main", None), file("chat/main", true));
    assert_eq!(
        route("", "/settings/", None),
        file("settings/index.html", true)
    );
    assert_eq!(route("", "/missing.css", None), file("missing.css", false));
    assert_eq!(route("", "/a%20b.png", None), file("a b.png", false));
}

#[test]
fn traversal_and_hidden_paths_are_refused() {
    for bad in [
        "/../etc/passwd",
        "/assets/../../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/a/%2e%2e/%2e%2e/x",
        "/a%2f..%2f..%2fx",
        "/.env",
        "/assets/.secret",
        "/a%00.js",
        "/a%5c..%5cx",
        "/%ff.js",
        "//etc/passwd",
    ] {
        assert_eq!(route("", bad, None), Route::Refused, "{bad}");
    }
}

#[test]
fn accept_headers_that_admit_html() {
    let h = |v: Option<&str>| {
        let mut m = HeaderMap::new();
        if let Some(v) = v {
            m.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        }
        accepts_html(&m)
    };
    assert!(h(None));
    assert!(h(Some("text/html,application/xhtml+xml,*/*;q=0.8")));
    assert!(h(Some("*/*")));
    assert!(!h(Some("application/json")));
    assert!(!h(Some("text/html;q=0")));
    assert!(!h(Some("image/png, image/*")));
}

#[test]
fn content_types_by_extension() {
    assert_eq!(
        content_type(Path::new("a.JS")),
        "application/javascript; charset=utf-8"
    );
    assert_eq!(
        content_type(Path::new("x/y.css")),
        "text/css; charset=utf-8"
    );
    assert_eq!(
        content_type(Path::new("m.webmanifest")),
        "application/manifest+json; charset=utf-8"
    );
    assert_eq!(content_type(Path::new("f.woff2")), "font/woff2");
    assert_eq!(
        content_type(Path::new("README")),
        "application/octet-stream"
    );
    assert_eq!(
        content_type(Path::new("x.html")),
        "text/html; charset=utf-8"
    );
}

#[test]
fn the_page_is_told_its_base_and_its_inline_scripts_are_hashed() {
    let html = r#"<!doctype html><html lang="en" data-openclaw-control-ui-build-id="b1"><head>
<link rel="icon" href="./favicon.svg"><script type="module" src="./assets/app.js"></script>
<link rel="stylesheet" href="./assets/app.css"><script>var a=1;</script></head>
<body><script> </script></body></html>"#;
    let out = page::rewrite(html, "/ui");
    assert!(out.contains(r#"<html lang="en" data-openclaw-control-ui-base-path="/ui" data-openclaw-terminal-enabled="false">"#), "{out}");
    assert!(!out.contains("build-id"), "{out}");
    assert!(out.contains(r#"src="/ui/assets/app.js""#));
    assert!(out.contains(r#"href="/ui/assets/app.css""#));
    assert!(out.contains(r#"href="/ui/favicon.svg""#));
    let root = page::rewrite(html, "");
    assert!(root.contains(r#"src="/assets/app.js""#), "{root}");
    assert!(root.contains(r#"data-openclaw-control-ui-base-path="""#));
    // Only the non-empty inline script counts; its hash is over its exact text.
    let hashes = page::inline_script_hashes(&out);
    use base64::Engine;
    use sha2::Digest;
    let want = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(b"var a=1;"));
    assert_eq!(hashes, vec![want.clone()]);
    let policy = page::csp(&hashes);
    assert!(
        policy.contains(&format!("script-src 'self' 'sha256-{want}'")),
        "{policy}"
    );
    assert!(policy.contains("frame-ancestors 'none'"));
    assert!(policy.contains("connect-src 'self' data: blob:"));
    // A base path cannot break out of its attribute.
    assert!(page::rewrite("<html>", "/a\"b").contains("/a&quot;b"));
}

fn ui_dir(mode: u32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("index.html"), "<html></html>").unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

#[test]
fn roots_the_model_could_write_or_that_hold_secrets_are_refused() {
    let ui = ui_dir(0o755);
    let state = tempfile::tempdir().unwrap();
    let raw = |root: &Path| RawControlUi {
        root: root.display().to_string(),
        base_path: Some("/ui".into()),
    };
    let ok = resolve(&raw(ui.path()), state.path(), &[]).unwrap();
    assert_eq!(ok.base_path, "/ui");
    assert!(resolve(
        &RawControlUi {
            root: "rel/dir".into(),
            base_path: None
        },
        state.path(),
        &[]
    )
    .unwrap_err()
    .problem
    .contains("absolute"));
    let e = resolve(&raw(state.path()), state.path(), &[]).unwrap_err();
    assert!(
        e.problem.contains("index.html") || e.problem.contains("state directory"),
        "{e}"
    );
    std::fs::write(state.path().join("index.html"), "<html>").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = resolve(&raw(state.path()), state.path(), &[]).unwrap_err();
    assert!(e.problem.contains("state directory"), "{e}");
    // Inside the state directory (e.g. `<state>/agents`, with its databases).
    let inner = state.path().join("agents");
    std::fs::create_dir(&inner).unwrap();
    std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(inner.join("index.html"), "<html>").unwrap();
    let e = resolve(&raw(&inner), state.path(), &[]).unwrap_err();
    assert!(e.problem.contains("inside the state directory"), "{e}");
    // Inside a workspace, or holding one.
    let ws = ui.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let e = resolve(&raw(ui.path()), state.path(), &[("main", ws.as_path())]).unwrap_err();
    assert!(e.problem.contains("workspace"), "{e}");
    let e = resolve(
        &raw(ui.path()),
        state.path(),
        &[("main", ui.path().parent().unwrap())],
    )
    .unwrap_err();
    assert!(e.problem.contains("workspace"), "{e}");
    let open = ui_dir(0o777);
    let e = resolve(&raw(open.path()), state.path(), &[]).unwrap_err();
    assert!(e.problem.contains("writable"), "{e}");
    let empty = tempfile::tempdir().unwrap();
    let e = resolve(&raw(empty.path()), state.path(), &[]).unwrap_err();
    assert!(e.problem.contains("index.html"), "{e}");
}
