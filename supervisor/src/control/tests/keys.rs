//! Issue 37 item 2: which provider keys a worker is given. None is in its environment; its
//! `Welcome` holds its agent's model's and fallbacks' (every provider's when a
//! `before_model_resolve` hook may pick one), and a run on another provider brings its own.

use std::collections::{BTreeSet, HashMap};

use super::*;
use crate::control::slot::{run_keys, worker_env, worker_keys};

const KEYS: &str = r#"
[agents.defaults]
model = { primary = "a/m1", fallbacks = ["b/m2"] }
[models.providers.a]
api = "openai-completions"
base_url = "http://127.0.0.1:9"
api_key_env = "KEY_A"
[models.providers.b]
api = "openai-completions"
base_url = "http://127.0.0.1:9"
api_key_env = "KEY_B"
[models.providers.c]
api = "openai-completions"
base_url = "http://127.0.0.1:9"
api_key_env = "KEY_C"
"#;

fn env() -> HashMap<String, String> {
    [
        ("KEY_A", "ka"),
        ("KEY_B", "kb"),
        ("KEY_C", "kc"),
        ("PATH", "/bin"),
        ("AWS_SECRET_ACCESS_KEY", "other"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn names(s: &ipc::control::Secrets) -> Vec<&str> {
    s.0.keys().map(String::as_str).collect()
}

#[test]
fn a_worker_starts_with_its_own_models_keys_and_no_secret_in_its_environment() {
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), KEYS);
    let main = config.agent("main").unwrap();
    let keys = worker_keys(main, &env());
    assert_eq!(names(&keys), ["KEY_A", "KEY_B"]);
    assert_eq!(keys.0["KEY_A"], "ka");
    // A hook may pick any provider: the worker gets every configured key.
    let hooked = self::config(
        state.path(),
        &format!("{KEYS}[[hooks.before_model_resolve]]\ncommand = [\"/bin/true\"]\n"),
    );
    let main = hooked.agent("main").unwrap();
    assert_eq!(
        names(&worker_keys(main, &env())),
        ["KEY_A", "KEY_B", "KEY_C"]
    );
    // The environment is the plain variables only.
    assert_eq!(worker_env(&env()), [("PATH".to_owned(), "/bin".to_owned())]);
}

#[test]
fn a_run_on_another_provider_brings_its_key_once() {
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), KEYS);
    let main = config.agent("main").unwrap();
    let mut run = SubmitRun::plain("r", "agent:main:s", "hi", 0);
    let given: BTreeSet<String> = ["KEY_A".to_owned(), "KEY_B".to_owned()].into();
    // The agent's own model: nothing more.
    assert_eq!(run_keys(main, &run, &given, &env()), None);
    run.model = Some(ipc::control::RunModel {
        provider: "b".into(),
        model: "m2".into(),
    });
    assert_eq!(run_keys(main, &run, &given, &env()), None);
    run.model = Some(ipc::control::RunModel {
        provider: "c".into(),
        model: "m3".into(),
    });
    let more = run_keys(main, &run, &given, &env()).unwrap();
    assert_eq!(names(&more), ["KEY_C"]);
    let mut given = given;
    given.insert("KEY_C".into());
    assert_eq!(
        run_keys(main, &run, &given, &env()),
        None,
        "sent once per worker"
    );
}
