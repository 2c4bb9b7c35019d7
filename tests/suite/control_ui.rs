//! Serving an installed Control UI on the WebSocket port (issue 11): the page told its base,
//! files with their types and cache headers, the single-page fallback, the boot document
//! behind the token, traversal, hidden files and escaping symlinks refused, the origin rule
//! for the page's WebSocket, and roots the model could write refused at start.

use loopgate_tests::client::cli_params;
use loopgate_tests::{Client, Gateway};
use serde_json::{json, Value};

const PAGE: &str = r#"<!doctype html><html lang="en"><head><script>window.boot=1;</script>
<script type="module" src="./assets/app-abc.js"></script><link rel="icon" href="./favicon.svg">
</head><body></body></html>"#;

/// A built UI directory outside the state dir, plus a secret beside it.
fn ui_tree() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("control-ui");
    std::fs::create_dir_all(root.join("assets")).unwrap();
    std::fs::write(root.join("index.html"), PAGE).unwrap();
    std::fs::write(root.join("assets/app-abc.js"), "console.log(1)").unwrap();
    std::fs::write(root.join("favicon.svg"), "<svg/>").unwrap();
    std::fs::write(root.join(".env"), "SECRET=1").unwrap();
    std::fs::write(d.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(d.path().join("secret.txt"), root.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("favicon.svg"), root.join("inside.svg")).unwrap();
    // A hard link shares its file with a place outside; a group-writable directory can be
    // filled by others.
    std::fs::write(d.path().join("shared.js"), "shared()").unwrap();
    std::fs::hard_link(d.path().join("shared.js"), root.join("assets/linked.js")).unwrap();
    std::fs::create_dir(root.join("assets/open")).unwrap();
    std::fs::write(root.join("assets/open/planted.js"), "planted()").unwrap();
    std::fs::set_permissions(
        root.join("assets/open"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    for p in [d.path().to_path_buf(), root.clone(), root.join("assets")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    d
}

async fn ui_gateway(tree: &tempfile::TempDir) -> Gateway {
    let root = tree.path().join("control-ui");
    Gateway::start_with(&format!(
        "\n[gateway.control_ui]\nroot = \"{}\"\nbase_path = \"/ui\"\n",
        root.display()
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_files_are_served_with_types_and_headers_r_a5() {
    let tree = ui_tree();
    let gw = ui_gateway(&tree).await;
    let r = gw.http("GET", "/ui?x=1", &[]).await;
    assert_eq!((r.status, r.header("location")), (302, Some("/ui/?x=1")));

    let page = gw.http("GET", "/ui/", &["Accept: text/html"]).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let html = page.text();
    assert!(
        html.contains(r#"data-openclaw-control-ui-base-path="/ui""#),
        "{html}"
    );
    assert!(
        html.contains(r#"data-openclaw-terminal-enabled="false""#),
        "{html}"
    );
    assert!(html.contains(r#"src="/ui/assets/app-abc.js""#), "{html}");
    // The inline script is allowed by its hash, nothing else inline.
    use base64::Engine;
    use sha2::Digest;
    let hash =
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(b"window.boot=1;"));
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains(&format!("script-src 'self' 'sha256-{hash}'")),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");

    let js = gw.http("GET", "/ui/assets/app-abc.js", &[]).await;
    assert_eq!(js.status, 200);
    assert_eq!(
        js.header("content-type"),
        Some("application/javascript; charset=utf-8")
    );
    assert_eq!(js.text(), "console.log(1)");
    let modified = js
        .header("last-modified")
        .expect("last-modified")
        .to_owned();
    let again = gw
        .http(
            "GET",
            "/ui/assets/app-abc.js",
            &[&format!("If-Modified-Since: {modified}")],
        )
        .await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    // A deep link's relative asset URL, and the UI's own routes.
    let deep = gw.http("GET", "/ui/chat/main/assets/app-abc.js", &[]).await;
    assert_eq!(deep.status, 200);
    let route = gw
        .http("GET", "/ui/chat/main", &["Accept: text/html,*/*;q=0.8"])
        .await;
    assert_eq!(route.status, 200);
    assert!(route.text().contains("data-openclaw-control-ui-base-path"));
    assert_eq!(
        gw.http("GET", "/ui/chat/main", &["Accept: application/json"])
            .await
            .status,
        404
    );
    assert_eq!(gw.http("GET", "/ui/missing.js", &[]).await.status, 404);
    // Symlinks are not followed, even inside the root (a link swapped in between a check
    // and a read could point anywhere); the file itself is served.
    assert_eq!(gw.http("GET", "/ui/inside.svg", &[]).await.status, 404);
    let svg = gw.http("GET", "/ui/favicon.svg", &[]).await;
    assert_eq!(
        (svg.status, svg.header("content-type")),
        (200, Some("image/svg+xml"))
    );
    // `openclaw dashboard` checks the page with HEAD.
    let head = gw.http("HEAD", "/ui/", &["Accept: text/html"]).await;
    assert_eq!(
        (head.status, head.header("content-type")),
        (200, Some("text/html; charset=utf-8"))
    );
    assert!(head.body.is_empty());
    let post = gw.http("POST", "/ui/", &["Content-Length: 0"]).await;
    assert_eq!(
        (post.status, post.header("allow")),
        (405, Some("GET, HEAD"))
    );
    // Outside the base path nothing is served; the health endpoints stay.
    assert_eq!(gw.http("GET", "/index.html", &[]).await.status, 404);
    assert_eq!(gw.http_get("/healthz").await.0, 200);
    gw.logs.assert_clean(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_outside_the_root_or_hidden_is_served_r_a5() {
    let tree = ui_tree();
    let gw = ui_gateway(&tree).await;
    for path in [
        "/ui/../secret.txt",
        "/ui/%2e%2e/secret.txt",
        "/ui/assets/..%2f..%2fsecret.txt",
        "/ui/assets/%2e%2e/%2e%2e/secret.txt",
        "/ui/.env",
        "/ui/%2eenv",
        "/ui/leak.txt",
        "/ui/a%00.js",
        "/ui//etc/passwd",
        "/ui/%ff.js",
        "/ui/assets/linked.js",
        "/ui/assets/open/planted.js",
    ] {
        let r = gw.http("GET", path, &["Accept: application/json"]).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert!(
            !r.text().contains("outside") && !r.text().contains("SECRET"),
            "{path}"
        );
        // A browser navigation gets the page, never the file.
        let r = gw.http("GET", path, &["Accept: text/html"]).await;
        assert!(
            !r.text().contains("outside") && !r.text().contains("SECRET"),
            "{path}"
        );
    }
    gw.logs.assert_clean(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_document_needs_the_token_and_the_page_socket_its_origin_r_a5() {
    let tree = ui_tree();
    let gw = ui_gateway(&tree).await;
    let anon = gw.http("GET", "/ui/control-ui-config.json", &[]).await;
    assert_eq!(anon.status, 401, "{}", anon.text());
    let wrong = gw
        .http(
            "GET",
            "/ui/control-ui-config.json",
            &["Authorization: Bearer nope"],
        )
        .await;
    assert_eq!(wrong.status, 401);
    let doc = gw
        .http(
            "GET",
            "/ui/control-ui-config.json",
            &[&format!("Authorization: Bearer {}", gw.token())],
        )
        .await;
    assert_eq!(doc.status, 200, "{}", doc.text());
    assert_eq!(
        doc.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    let v: Value = serde_json::from_slice(&doc.body).unwrap();
    assert_eq!(v["basePath"], "/ui");
    assert_eq!(v["terminalEnabled"], false);
    assert_eq!(v["assistantAgentId"], "main");
    assert_eq!(v["pluginFrameGrants"], json!([]));

    // The page's WebSocket (same origin, at the base path) connects; another origin's not.
    let addr = gw.ws_addr();
    let c = Client::ws_raw_from(&addr, "/ui", &format!("http://{addr}"))
        .await
        .expect("same-origin upgrade");
    let (mut c, hello) = Client::ws_handshake(c, cli_params(Some(&gw.token())), None).await;
    assert_eq!(hello.unwrap()["ok"], true);
    assert_eq!(c.call("health", json!({})).await["ok"], true);
    assert!(
        Client::ws_raw_from(&addr, "/ui", "http://evil.example")
            .await
            .is_err(),
        "a cross-origin page's upgrade is refused"
    );
    gw.logs.assert_clean(&["cross-origin"]);
}

/// A root inside an agent's workspace (the model writes there) or holding the state
/// directory is refused at start with the key named; the gateway does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_the_model_could_write_are_refused_at_start_r_a5() {
    let mut gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("index.html"), "<html>").unwrap();
    for (root, why) in [
        (ws.clone(), "workspace"),
        (gw.state().to_path_buf(), "state directory"),
    ] {
        std::fs::write(root.join("index.html"), "<html>").unwrap();
        gw.rewrite_config(
            "",
            &format!("\n[gateway.control_ui]\nroot = \"{}\"\n", root.display()),
        );
        let (code, stderr) = loopgate_tests::serve_refusal(gw.state()).await;
        assert_eq!(code, Some(78), "{stderr}");
        assert!(
            stderr.contains("gateway.control_ui.root") && stderr.contains(why),
            "{stderr}"
        );
    }
    let _ = gw.stop(nix::sys::signal::Signal::SIGTERM).await;
}
