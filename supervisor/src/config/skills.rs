//! `[skills.entries.<name>]` (R-B6): the operator's settings of a skill, as OpenClaw's
//! `skills.entries`: `enabled = false` keeps it from being offered; `env` gives its commands
//! variables while it is offered; `api_key_env` names the variable of the supervisor's
//! environment whose value its commands get as the skill's `primaryEnv` (keys stay out of
//! the config file, as providers' do).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::invalid::Invalid;

/// `[skills]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSkills {
    /// Settings of skills by name (the `name` of their `SKILL.md`).
    #[serde(default)]
    pub entries: BTreeMap<String, RawSkillEntry>,
}

/// `[skills.entries.<name>]`.
#[derive(Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSkillEntry {
    /// `false`: never offered to the model (default `true`).
    pub enabled: Option<bool>,
    /// Variables its commands get while it is offered; they also meet its `requires.env`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The variable of the gateway's environment holding its key, given to its commands as
    /// the skill's `metadata.openclaw.primaryEnv`.
    pub api_key_env: Option<String>,
}

/// Names only: values may be tokens.
impl std::fmt::Debug for RawSkillEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawSkillEntry")
            .field("enabled", &self.enabled)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("api_key_env", &self.api_key_env)
            .finish()
    }
}

/// One skill's settings, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct SkillConfig {
    pub name: String,
    pub enabled: bool,
    pub env: BTreeMap<String, String>,
    pub api_key_env: Option<String>,
}

/// Names only: values may be tokens.
impl std::fmt::Debug for SkillConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillConfig")
            .field("name", &self.name)
            .field("enabled", &self.enabled)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("api_key_env", &self.api_key_env)
            .finish()
    }
}

/// The checked `[skills.entries]`, in name order.
pub(super) fn resolve(raw: &RawSkills) -> Result<Vec<SkillConfig>, Invalid> {
    raw.entries
        .iter()
        .map(|(name, e)| {
            let key = format!("skills.entries.{name:?}");
            if name.is_empty() || name.chars().count() > 128 || name.chars().any(char::is_control)
            {
                return Err(Invalid::new(&key, "a skill name of 1 to 128 printable characters"));
            }
            for (var, value) in &e.env {
                if !ipc::worker_env::skill_may_set(var) {
                    return Err(Invalid::new(
                        format!("{key}.env.{var}"),
                        "not a variable a skill may set (letters, digits and _; not PATH, HOME, LD_* and the like)",
                    ));
                }
                if value.contains('\0') {
                    return Err(Invalid::new(format!("{key}.env.{var}"), "contains a NUL byte"));
                }
            }
            if let Some(v) = &e.api_key_env {
                // Never echoed: a key pasted here by mistake must not reach a log or an answer.
                let name = v.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && v.len() <= 128;
                if !name {
                    return Err(Invalid::new(
                        format!("{key}.api_key_env"),
                        "must name a variable of the gateway's environment (letters, digits and _), not hold the key",
                    ));
                }
            }
            Ok(SkillConfig {
                name: name.clone(),
                enabled: e.enabled.unwrap_or(true),
                env: e.env.clone(),
                api_key_env: e.api_key_env.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(env: &[(&str, &str)], key: Option<&str>) -> RawSkills {
        let e = RawSkillEntry {
            enabled: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            api_key_env: key.map(str::to_owned),
        };
        RawSkills {
            entries: [("gh".to_owned(), e)].into_iter().collect(),
        }
    }

    /// R-B6: a skill's variables are checked: no variable that changes how programs run.
    #[test]
    fn a_skill_sets_only_its_own_variables() {
        let ok = resolve(&entry(&[("GH_HOST", "ghe")], Some("LG_GH_TOKEN"))).unwrap();
        assert_eq!(ok[0].env["GH_HOST"], "ghe");
        assert!(ok[0].enabled);
        for bad in ["PATH", "LD_PRELOAD", "1X", "A-B", "", "LC_ALL"] {
            let e = resolve(&entry(&[(bad, "x")], None)).unwrap_err();
            assert!(e.key.contains(".env."), "{bad}: {e:?}");
        }
        assert!(resolve(&entry(&[], Some("no=pe"))).is_err());
        assert!(resolve(&entry(&[("OK", "a\0b")], None)).is_err());
    }
}
