//! Skills (section 6.6): `<workspace>/skills/<dir>/SKILL.md` files with YAML frontmatter
//! (`name`, `description`; `disable-model-invocation: true` hides one from the model). The
//! model gets a compact `<available_skills>` list and reads a skill's file with the `read`
//! tool when it needs it. The list is a snapshot: it is rebuilt only when a `SKILL.md`
//! changes (path, size or mtime), so prompts stay stable across the turns of a session.

use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

/// Budget for the rendered skills list, in characters; over it, descriptions are dropped.
pub const MAX_SKILLS_PROMPT_CHARS: usize = 20_000;
/// Longest description kept per skill.
const MAX_DESCRIPTION_CHARS: usize = 400;
/// Most skills listed.
const MAX_SKILLS: usize = 200;

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Path relative to the workspace (what the `read` tool takes).
    pub location: String,
}

type Fingerprint = Vec<(String, u64, Option<SystemTime>)>;

/// The per-worker snapshot.
#[derive(Default)]
pub struct SkillsCache {
    snap: Mutex<Option<(Fingerprint, String)>>,
}

fn skill_files(workspace: &Path) -> Fingerprint {
    let dir = workspace.join("skills");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Fingerprint = entries
        .flatten()
        .filter_map(|e| {
            let file = e.path().join("SKILL.md");
            let meta = std::fs::metadata(&file).ok()?;
            meta.is_file().then(|| {
                (
                    format!("skills/{}/SKILL.md", e.file_name().to_string_lossy()),
                    meta.len(),
                    meta.modified().ok(),
                )
            })
        })
        .collect();
    out.sort();
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
        let skills: Vec<Skill> = fp
            .iter()
            .filter_map(|(rel, _, _)| {
                let raw = std::fs::read(workspace.join(rel)).ok()?;
                parse(&String::from_utf8_lossy(&raw), rel)
            })
            .collect();
        let text = render(&skills, MAX_SKILLS_PROMPT_CHARS);
        if let Ok(mut guard) = self.snap.lock() {
            *guard = Some((fp, text.clone()));
        }
        text
    }
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    let quoted = v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')));
    if quoted {
        v[1..v.len() - 1].to_owned()
    } else {
        v.to_owned()
    }
}

/// Reads the frontmatter of one `SKILL.md`; `None` when the model must not see it.
pub fn parse(text: &str, location: &str) -> Option<Skill> {
    let dir_name = location
        .trim_end_matches("/SKILL.md")
        .rsplit('/')
        .next()
        .unwrap_or(location)
        .to_owned();
    let mut name = None;
    let mut description = None;
    let mut lines = text.lines();
    if lines.next().map(str::trim) == Some("---") {
        for line in lines {
            if line.trim() == "---" {
                break;
            }
            // Only top-level `key: value` lines; nested metadata is not needed here.
            if line.starts_with(' ') || line.starts_with('\t') {
                continue;
            }
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            match k.trim() {
                "name" => name = Some(unquote(v)),
                "description" => description = Some(unquote(v)),
                "disable-model-invocation" if unquote(v) == "true" => return None,
                _ => {}
            }
        }
    }
    let description: String = description
        .unwrap_or_default()
        .chars()
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    Some(Skill {
        name: name.filter(|n| !n.is_empty()).unwrap_or(dir_name),
        description,
        location: location.to_owned(),
    })
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
             SKILL.md with the read tool (path in <location>) before acting, and follow it.\n\n\
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
        assert!(parse(
            "---\nname: x\ndisable-model-invocation: true\n---\n",
            "skills/x/SKILL.md"
        )
        .is_none());
    }

    #[test]
    fn render_drops_descriptions_over_budget() {
        let skills = vec![Skill {
            name: "a<b".into(),
            description: "d".repeat(100),
            location: "skills/a/SKILL.md".into(),
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
