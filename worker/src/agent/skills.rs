//! Skills (section 6.6): `SKILL.md` files with YAML frontmatter (`name`, `description`;
//! `disable-model-invocation: true` hides one from the model) under `<workspace>/skills` and
//! `<workspace>/.agents/skills`, up to 6 folders deep; a name found in an earlier root wins.
//! `metadata: {"openclaw": {"requires": {"bins", "anyBins", "env"}, "os", "always"}}` gates
//! a skill on this host (programs on `PATH`, environment variables, the OS); `always: true`
//! skips the gate. The model gets a compact `<available_skills>` list and reads a skill's file
//! with the `read` tool when it needs it. The list is a snapshot: it is rebuilt only when a
//! `SKILL.md` changes (path, size or mtime), so prompts stay stable across the turns of a
//! session.

use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

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
/// whether this host meets what it requires (a name found under an earlier root wins).
/// Blocking: call from a blocking task.
pub fn states(workspace: &Path) -> Vec<ipc::session_ops::SkillState> {
    let mut out: Vec<ipc::session_ops::SkillState> = Vec::new();
    for skill in read_all(workspace, &skill_files(workspace)) {
        if out.iter().any(|k| k.name == skill.name) {
            continue;
        }
        let eligible = skill.requires.met(on_path, env_set);
        out.push(ipc::session_ops::SkillState {
            missing: skill.requires.missing(on_path, env_set),
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
    snap: Mutex<Option<(Fingerprint, String)>>,
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
    /// The skills prompt section for `workspace` (empty when there are no skills). Blocking:
    /// call from a blocking task.
    pub fn prompt(&self, workspace: &Path) -> String {
        let fp = skill_files(workspace);
        if let Ok(guard) = self.snap.lock() {
            if let Some((old, text)) = guard.as_ref() {
                if *old == fp {
                    return text.clone();
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
            if !skill.requires.met(on_path, env_set) {
                tracing::debug!(skill = %skill.name, "Skill not offered: this host lacks what it requires.");
                continue;
            }
            skills.push(skill);
        }
        let text = render(&skills, MAX_SKILLS_PROMPT_CHARS);
        if let Ok(mut guard) = self.snap.lock() {
            *guard = Some((fp, text.clone()));
        }
        text
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
    let (emoji, meta_homepage) = shown(&metadata);
    Some(Skill {
        name: name.filter(|n| !n.is_empty()).unwrap_or(dir_name),
        description,
        location: location.to_owned(),
        requires: requires(&metadata),
        model_visible,
        emoji,
        homepage: homepage.or(meta_homepage),
    })
}

/// `metadata.openclaw.emoji` and `homepage` (short texts only).
fn shown(metadata: &str) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_str::<Value>(metadata.trim()) else {
        return (None, None);
    };
    let oc = v.get("openclaw").or_else(|| v.get("clawdbot"));
    let text = |k: &str, max: usize| {
        oc.and_then(|o| o.get(k))
            .and_then(Value::as_str)
            .filter(|s| s.chars().count() <= max)
            .map(str::to_owned)
    };
    (text("emoji", 16), text("homepage", 512))
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
        let p = SkillsCache::default().prompt(ws);
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
        assert_eq!(cache.prompt(ws), "");
        std::fs::create_dir_all(ws.join("skills/one")).unwrap();
        std::fs::write(
            ws.join("skills/one/SKILL.md"),
            "---\nname: one\ndescription: first\n---\n",
        )
        .unwrap();
        let p1 = cache.prompt(ws);
        assert!(p1.contains("<name>one</name>"));
        assert_eq!(cache.prompt(ws), p1);
        std::fs::write(
            ws.join("skills/one/SKILL.md"),
            "---\nname: one\ndescription: first, now longer\n---\n",
        )
        .unwrap();
        assert!(cache.prompt(ws).contains("first, now longer"));
    }
}
