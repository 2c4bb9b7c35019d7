//! Skills (section 6.6): `SKILL.md` files with YAML frontmatter (`name`, `description`;
//! `disable-model-invocation: true` hides one from the model) under `<workspace>/skills` and
//! `<workspace>/.agents/skills`, up to 6 folders deep; a name found in an earlier root wins.
//! `metadata: {"openclaw": {"requires": {"bins", "anyBins", "env"}, "os", "always"}}` gates
//! a skill on this host (programs on `PATH`, environment variables, the OS); `always: true`
//! skips the gate. The model gets a compact `<available_skills>` list and reads a skill's file
//! with the `read` tool when it needs it. The list is a snapshot: it is rebuilt only when a
//! `SKILL.md` changes (path, size or mtime), so prompts stay stable across the turns of a
//! session.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use ipc::control::SkillSettings;

use serde_json::Value;

use crate::frontmatter;

/// Budget for the rendered skills list, in characters; over it, descriptions are dropped.
pub const MAX_SKILLS_PROMPT_CHARS: usize = 20_000;
/// Longest description kept per skill.
const MAX_DESCRIPTION_CHARS: usize = 400;
/// Most skills listed.
const MAX_SKILLS: usize = 200;
/// Skill roots inside the workspace, highest precedence first.
const ROOTS: &[&str] = &["skills", ".agents/skills"];
/// How deep below a root a `SKILL.md` is looked for (`<root>/<dir>/SKILL.md` is depth 1).
const MAX_DEPTH: usize = 6;
/// Most folders visited per scan (keeps a huge tree from slowing every turn).
const MAX_DIRS: usize = 1_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Path relative to the workspace (what the `read` tool takes).
    pub location: String,
    /// What this host must have for the skill to be offered.
    pub requires: Requires,
    /// Not `disable-model-invocation: true` (a hidden skill is listed by `skills.status`,
    /// never offered to the model).
    pub model_visible: bool,
    /// `metadata.openclaw.emoji` and `homepage`, for `skills.status`.
    pub emoji: Option<String>,
    pub homepage: Option<String>,
    /// `metadata.openclaw.primaryEnv`: the variable its key goes in (`api_key_env`, R-B6).
    pub primary_env: Option<String>,
}

/// The operator's settings of skills (`[skills.entries]`, R-B6), with the keys they name,
/// and the agent's filter (`agents.*.skills`).
#[derive(Default)]
pub struct Configured(Vec<(SkillSettings, Option<String>)>, Option<Vec<String>>);

/// Names only: the keys are never printed.
impl std::fmt::Debug for Configured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Configured")
            .field(
                "skills",
                &self
                    .0
                    .iter()
                    .map(|(s, key)| (&s.name, key.is_some()))
                    .collect::<Vec<_>>(),
            )
            .field("filter", &self.1)
            .finish()
    }
}

impl Configured {
    /// `settings` with their keys out of `keys` (the worker's secrets, by variable name).
    pub fn new(
        settings: &[SkillSettings],
        filter: Option<Vec<String>>,
        keys: &HashMap<String, String>,
    ) -> Configured {
        Configured(
            settings
                .iter()
                .map(|s| {
                    let key = s.api_key_env.as_ref().and_then(|k| keys.get(k)).cloned();
                    (s.clone(), key)
                })
                .collect(),
            filter,
        )
    }

    /// Whether the agent's filter lets `name` be offered.
    pub fn allowed(&self, name: &str) -> bool {
        self.1.as_ref().is_none_or(|f| f.iter().any(|n| n == name))
    }

    /// The settings of `name`, if the agent may be offered it.
    fn of(&self, name: &str) -> Option<&(SkillSettings, Option<String>)> {
        if !self.allowed(name) {
            return None;
        }
        self.0.iter().find(|(s, _)| s.name == name)
    }

    /// Whether the operator lets `name` be offered (a skill without settings is).
    pub fn enabled(&self, name: &str) -> bool {
        self.of(name).is_none_or(|(s, _)| s.enabled)
    }

    /// The variables the settings give `skill`'s commands: its `env`, then its key as its
    /// `primaryEnv`.
    pub fn env_of(&self, skill: &Skill) -> Vec<(String, String)> {
        let Some((s, key)) = self.of(&skill.name) else {
            return Vec::new();
        };
        // Checked by the supervisor too; a worker takes no setting it would refuse.
        let mut env: Vec<(String, String)> = s
            .env
            .0
            .iter()
            .filter(|(k, _)| ipc::worker_env::skill_may_set(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let (Some(var), Some(key)) = (&skill.primary_env, key) {
            if !env.iter().any(|(k, _)| k == var) {
                env.push((var.clone(), key.clone()));
            }
        }
        env
    }

    /// Whether `var` is set for `skill`: in the worker's environment or by its settings.
    fn has_env(&self, skill: &Skill, var: &str) -> bool {
        env_set(var)
            || self
                .env_of(skill)
                .iter()
                .any(|(k, v)| k == var && !v.is_empty())
    }
}

/// What a turn offers: the skills prompt section and the variables the offered skills'
/// settings give the turn's commands.
#[derive(Clone, Default, PartialEq)]
pub struct Offered {
    pub prompt: String,
    pub env: Vec<(String, String)>,
}

/// The variables' names only: their values may be keys.
impl std::fmt::Debug for Offered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offered")
            .field("prompt", &self.prompt.len())
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .finish()
    }
}

/// A skill's host requirements (`metadata.openclaw`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requires {
    /// Every one of these programs on `PATH`.
    pub bins: Vec<String>,
    /// At least one of these programs on `PATH`.
    pub any_bins: Vec<String>,
    /// Every one of these environment variables set and non-empty.
    pub env: Vec<String>,
    /// One of these platforms (`linux`, `darwin`, `win32`); empty: any.
    pub os: Vec<String>,
    /// Offered whatever the host has.
    pub always: bool,
}

impl Requires {
    /// Whether this host meets the requirements; `has_bin` / `has_env` look things up.
    pub fn met(&self, has_bin: impl Fn(&str) -> bool, has_env: impl Fn(&str) -> bool) -> bool {
        if self.always {
            return true;
        }
        (self.os.is_empty() || self.os.iter().any(|o| o == "linux"))
            && self.bins.iter().all(|b| has_bin(b))
            && (self.any_bins.is_empty() || self.any_bins.iter().any(|b| has_bin(b)))
            && self.env.iter().all(|e| has_env(e))
    }

    /// What this host lacks of the requirements (`always` aside).
    pub fn missing(
        &self,
        has_bin: impl Fn(&str) -> bool,
        has_env: impl Fn(&str) -> bool,
    ) -> ipc::session_ops::SkillNeeds {
        let lacking = |list: &[String], has: &dyn Fn(&str) -> bool| {
            list.iter().filter(|x| !has(x)).cloned().collect::<Vec<_>>()
        };
        ipc::session_ops::SkillNeeds {
            bins: lacking(&self.bins, &has_bin),
            any_bins: if self.any_bins.iter().any(|b| has_bin(b)) {
                Vec::new()
            } else {
                self.any_bins.clone()
            },
            env: lacking(&self.env, &has_env),
            os: if self.os.is_empty() || self.os.iter().any(|o| o == "linux") {
                Vec::new()
            } else {
                self.os.clone()
            },
        }
    }

    fn needs(&self) -> ipc::session_ops::SkillNeeds {
        ipc::session_ops::SkillNeeds {
            bins: self.bins.clone(),
            any_bins: self.any_bins.clone(),
            env: self.env.clone(),
            os: self.os.clone(),
        }
    }
}

/// Every skill of the workspace as `skills.status` shows it: hidden ones too, each with
/// whether this host and the operator's settings let it be offered (a name found under an
/// earlier root wins). Blocking: call from a blocking task.
pub fn states(workspace: &Path, configured: &Configured) -> Vec<ipc::session_ops::SkillState> {
    let mut out: Vec<ipc::session_ops::SkillState> = Vec::new();
    for skill in read_all(workspace, &skill_files(workspace)) {
        if out.iter().any(|k| k.name == skill.name) {
            continue;
        }
        let has_env = |var: &str| configured.has_env(&skill, var);
        let disabled = !configured.enabled(&skill.name);
        let filtered = !configured.allowed(&skill.name);
        let eligible = !disabled && !filtered && skill.requires.met(on_path, has_env);
        out.push(ipc::session_ops::SkillState {
            missing: skill.requires.missing(on_path, has_env),
            disabled,
            blocked_by_agent_filter: filtered,
            requires: skill.requires.needs(),
            always: skill.requires.always,
            eligible,
            model_visible: skill.model_visible,
            name: skill.name,
            description: skill.description,
            location: skill.location,
            emoji: skill.emoji,
            homepage: skill.homepage,
        });
    }
    out
}

/// The skills the files of `fp` describe, in order (unreadable or invalid ones left out).
fn read_all(workspace: &Path, fp: &Fingerprint) -> Vec<Skill> {
    fp.iter()
        .filter_map(|(rel, _, _)| {
            let raw = std::fs::read(workspace.join(rel)).ok()?;
            parse(&String::from_utf8_lossy(&raw), rel)
        })
        .collect()
}

/// Whether `name` is an executable file in a `PATH` folder.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    if name.contains('/') {
        return false;
    }
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

type Fingerprint = Vec<(String, u64, Option<SystemTime>)>;

/// The per-worker snapshot.
#[derive(Default)]
pub struct SkillsCache {
    configured: Configured,
    snap: Mutex<Option<(Fingerprint, Offered)>>,
}

/// Every `SKILL.md` under the roots: roots in precedence order, paths sorted within a root.
/// Symlinked folders are not followed (a skill must live in the workspace).
fn skill_files(workspace: &Path) -> Fingerprint {
    let mut out: Fingerprint = Vec::new();
    let mut visited = 0;
    for root in ROOTS {
        let mut found = Vec::new();
        let mut stack = vec![(root.to_string(), 0usize)];
        while let Some((rel, depth)) = stack.pop() {
            visited += 1;
            if visited > MAX_DIRS {
                break;
            }
            let Ok(entries) = std::fs::read_dir(workspace.join(&rel)) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(kind) = e.file_type() else { continue };
                if !kind.is_dir() {
                    continue;
                }
                let child = format!("{rel}/{}", e.file_name().to_string_lossy());
                let file = format!("{child}/SKILL.md");
                match std::fs::symlink_metadata(workspace.join(&file)) {
                    Ok(meta) if meta.is_file() => {
                        found.push((file, meta.len(), meta.modified().ok()));
                    }
                    _ if depth + 1 < MAX_DEPTH => stack.push((child, depth + 1)),
                    _ => {}
                }
            }
        }
        found.sort();
        out.extend(found);
    }
    out.truncate(MAX_SKILLS);
    out
}

impl SkillsCache {
    pub fn new(configured: Configured) -> SkillsCache {
        SkillsCache {
            configured,
            snap: Mutex::new(None),
        }
    }

    /// The operator's settings of skills.
    pub fn configured(&self) -> &Configured {
        &self.configured
    }

    /// What a turn in `workspace` offers: the skills prompt section (empty when there are no
    /// skills) and its skills' variables. Blocking: call from a blocking task.
    pub fn offered(&self, workspace: &Path) -> Offered {
        let fp = skill_files(workspace);
        if let Ok(guard) = self.snap.lock() {
            if let Some((old, offered)) = guard.as_ref() {
                if *old == fp {
                    return offered.clone();
                }
            }
        }
        let mut skills: Vec<Skill> = Vec::new();
        for skill in read_all(workspace, &fp) {
            // A hidden skill is not offered, and does not hide one of its name either.
            if !skill.model_visible {
                continue;
            }
            if skills.iter().any(|k| k.name == skill.name) {
                continue;
            }
            if !self.configured.enabled(&skill.name) || !self.configured.allowed(&skill.name) {
                tracing::debug!(skill = %skill.name, "Skill not offered: the operator disabled it or the agent's skills leave it out.");
                continue;
            }
            if !skill
                .requires
                .met(on_path, |var| self.configured.has_env(&skill, var))
            {
                tracing::debug!(skill = %skill.name, "Skill not offered: this host lacks what it requires.");
                continue;
            }
            skills.push(skill);
        }
        let mut env: Vec<(String, String)> = Vec::new();
        for skill in &skills {
            for (k, v) in self.configured.env_of(skill) {
                // The first offered skill to set a variable gives it.
                if !env.iter().any(|(e, _)| *e == k) {
                    env.push((k, v));
                }
            }
        }
        let offered = Offered {
            prompt: render(&skills, MAX_SKILLS_PROMPT_CHARS),
            env,
        };
        if let Ok(mut guard) = self.snap.lock() {
            *guard = Some((fp, offered.clone()));
        }
        offered
    }
}

/// Reads the frontmatter of one `SKILL.md` (`None` is kept for a file that is no skill).
pub fn parse(text: &str, location: &str) -> Option<Skill> {
    let dir_name = location
        .trim_end_matches("/SKILL.md")
        .rsplit('/')
        .next()
        .unwrap_or(location)
        .to_owned();
    let mut name = None;
    let mut description = None;
    let mut metadata = String::new();
    let mut model_visible = true;
    let mut homepage = None;
    for field in frontmatter::fields(text) {
        match field.key {
            "name" => name = Some(field.scalar()),
            "description" => description = Some(field.scalar()),
            "homepage" => homepage = Some(field.scalar()).filter(|h| h.starts_with("http")),
            "disable-model-invocation" if field.scalar() == "true" => model_visible = false,
            // A JSON object, possibly over several indented lines.
            "metadata" => metadata = field.indented(),
            _ => {}
        }
    }
    let description: String = description
        .unwrap_or_default()
        .chars()
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    let (emoji, meta_homepage, primary_env) = shown(&metadata);
    Some(Skill {
        name: name.filter(|n| !n.is_empty()).unwrap_or(dir_name),
        description,
        location: location.to_owned(),
        requires: requires(&metadata),
        model_visible,
        emoji,
        homepage: homepage.or(meta_homepage),
        primary_env,
    })
}

/// `metadata.openclaw.emoji`, `homepage` and `primaryEnv` (short texts only).
fn shown(metadata: &str) -> (Option<String>, Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_str::<Value>(metadata.trim()) else {
        return (None, None, None);
    };
    let oc = v.get("openclaw").or_else(|| v.get("clawdbot"));
    let text = |k: &str, max: usize| {
        oc.and_then(|o| o.get(k))
            .and_then(Value::as_str)
            .filter(|s| s.chars().count() <= max)
            .map(str::to_owned)
    };
    // Written in a workspace file (the model can write it): only a variable a skill may
    // set takes the operator's key.
    let primary = text("primaryEnv", 128).filter(|v| ipc::worker_env::skill_may_set(v));
    (text("emoji", 16), text("homepage", 512), primary)
}

/// `metadata.openclaw` (or the legacy `metadata.clawdbot`) requirements. Metadata that is
/// not a JSON object gates nothing.
fn requires(metadata: &str) -> Requires {
    let Ok(v) = serde_json::from_str::<Value>(metadata.trim()) else {
        return Requires::default();
    };
    let Some(oc) = v.get("openclaw").or_else(|| v.get("clawdbot")) else {
        return Requires::default();
    };
    let list = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    };
    let req = oc.get("requires");
    Requires {
        bins: list(req.and_then(|r| r.get("bins"))),
        any_bins: list(req.and_then(|r| r.get("anyBins"))),
        env: list(req.and_then(|r| r.get("env"))),
        os: list(oc.get("os")),
        always: oc.get("always") == Some(&Value::Bool(true)),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The skills section; over `budget`, descriptions are dropped (names and locations kept).
pub fn render(skills: &[Skill], budget: usize) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let build = |with_desc: bool| {
        let mut s = String::from(
            "# Skills\n\nSkills are instructions for specific tasks. When one applies, read its \
             SKILL.md with the read tool (path in <location>) before acting, and follow it. In a \
             skill's file, {baseDir} stands for the folder its SKILL.md is in.\n\n\
             <available_skills>\n",
        );
        for k in skills {
            s.push_str(&format!("<skill><name>{}</name>", escape(&k.name)));
            if with_desc && !k.description.is_empty() {
                s.push_str(&format!(
                    "<description>{}</description>",
                    escape(&k.description)
                ));
            }
            s.push_str(&format!(
                "<location>{}</location></skill>\n",
                escape(&k.location)
            ));
        }
        s.push_str("</available_skills>");
        s
    };
    let full = build(true);
    if full.chars().count() <= budget {
        full
    } else {
        build(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_and_fallbacks() {
        let s = parse(
            "---\nname: \"deploy\"\ndescription: Ship a release\nmetadata:\n  x: 1\n---\nbody",
            "skills/dep/SKILL.md",
        )
        .unwrap();
        assert_eq!(s.name, "deploy");
        assert_eq!(s.description, "Ship a release");
        let s = parse("no frontmatter", "skills/plain/SKILL.md").unwrap();
        assert_eq!(s.name, "plain");
        assert!(s.model_visible);
        let hidden = parse(
            "---\nname: x\ndisable-model-invocation: true\n---\n",
            "skills/x/SKILL.md",
        )
        .unwrap();
        assert!(!hidden.model_visible);
    }

    /// R-B6: `metadata.openclaw` gates a skill on this host; `always` skips the gate; other
    /// indented keys do not leak into the metadata.
    #[test]
    fn requirements_gate_skills_r_b6() {
        let s = parse(
            "---\nname: gh\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"gh\"], \"env\": [\"GH_TOKEN\"]}}}\nhomepage:\n  url: x\n---\n",
            "skills/gh/SKILL.md",
        )
        .unwrap();
        assert_eq!(s.requires.bins, ["gh"]);
        assert_eq!(s.requires.env, ["GH_TOKEN"]);
        let has = |list: &'static [&'static str]| move |x: &str| list.contains(&x);
        assert!(s.requires.met(has(&["gh"]), has(&["GH_TOKEN"])));
        assert!(!s.requires.met(has(&[]), has(&["GH_TOKEN"])));
        assert!(!s.requires.met(has(&["gh"]), has(&[])));
        let block = parse(
            "---\nmetadata:\n  {\"openclaw\": {\"os\": [\"darwin\"],\n   \"requires\": {\"anyBins\": [\"a\", \"b\"]}}}\n---\n",
            "skills/mac/SKILL.md",
        )
        .unwrap();
        assert_eq!(block.requires.any_bins, ["a", "b"]);
        assert!(!block.requires.met(has(&["a"]), has(&[])), "darwin only");
        let always = parse(
            "---\nmetadata: {\"openclaw\": {\"always\": true, \"requires\": {\"bins\": [\"nope\"]}}}\n---\n",
            "skills/a/SKILL.md",
        )
        .unwrap();
        assert!(always.requires.met(has(&[]), has(&[])));
        // Not JSON (e.g. JSON5): nothing is gated.
        let loose = parse(
            "---\nmetadata: {openclaw: {requires: {bins: [x]}}}\n---\n",
            "skills/l/SKILL.md",
        )
        .unwrap();
        assert_eq!(loose.requires, Requires::default());
    }

    /// Both roots, nested folders, the first root winning a name, and gated skills left out.
    #[test]
    fn roots_depth_precedence_and_gating() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let write = |rel: &str, text: &str| {
            std::fs::create_dir_all(ws.join(rel).parent().unwrap()).unwrap();
            std::fs::write(ws.join(rel), text).unwrap();
        };
        write(
            "skills/ops/deploy/SKILL.md",
            "---\nname: deploy\ndescription: workspace one\n---\n",
        );
        write(
            ".agents/skills/deploy/SKILL.md",
            "---\nname: deploy\ndescription: shadowed\n---\n",
        );
        write(".agents/skills/notes/SKILL.md", "---\nname: notes\n---\n");
        write(
            "skills/gated/SKILL.md",
            "---\nname: gated\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"no-such-program-here\"]}}}\n---\n",
        );
        write(
            "skills/a/b/c/d/e/f/g/SKILL.md",
            "---\nname: too-deep\n---\n",
        );
        let p = SkillsCache::default().offered(ws).prompt;
        assert!(
            p.contains("<location>skills/ops/deploy/SKILL.md</location>"),
            "{p}"
        );
        assert!(
            p.contains("workspace one") && !p.contains("shadowed"),
            "{p}"
        );
        assert!(
            p.contains("<location>.agents/skills/notes/SKILL.md</location>"),
            "{p}"
        );
        assert!(!p.contains("gated") && !p.contains("too-deep"), "{p}");
        assert!(p.contains("{baseDir}"));
    }

    #[test]
    fn render_drops_descriptions_over_budget() {
        let skills = vec![Skill {
            name: "a<b".into(),
            description: "d".repeat(100),
            location: "skills/a/SKILL.md".into(),
            requires: Requires::default(),
            model_visible: true,
            emoji: None,
            homepage: None,
            primary_env: None,
        }];
        let full = render(&skills, 10_000);
        assert!(full.contains("<name>a&lt;b</name><description>ddd"));
        let small = render(&skills, 300);
        assert!(!small.contains("<description>") && small.contains("<location>skills/a/SKILL.md"));
        assert_eq!(render(&[], 100), "");
    }

    #[test]
    fn snapshot_is_reused_until_a_skill_changes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let cache = SkillsCache::default();
        assert_eq!(cache.offered(ws).prompt, "");
        std::fs::create_dir_all(ws.join("skills/one")).unwrap();
        std::fs::write(
            ws.join("skills/one/SKILL.md"),
            "---\nname: one\ndescription: first\n---\n",
        )
        .unwrap();
        let p1 = cache.offered(ws).prompt;
        assert!(p1.contains("<name>one</name>"));
        assert_eq!(cache.offered(ws).prompt, p1);
        std::fs::write(
            ws.join("skills/one/SKILL.md"),
            "---\nname: one\ndescription: first, now longer\n---\n",
        )
        .unwrap();
        assert!(cache.offered(ws).prompt.contains("first, now longer"));
    }
}
