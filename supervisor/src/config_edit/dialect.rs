//! OpenClaw's names for settings loopgate's config has under its own: what the Control UI
//! writes for an agent (`agents.entries.<id>`: its model, its tool profile, its skills) is
//! moved to `agents.list.<id>` before a JSON write (`config.set`'s form, `config.patch`)
//! is merged into the file. Pure.

use serde_json::{Map, Value as Json};

/// The tools of each of OpenClaw's tool profiles that loopgate has (`full`: every tool, no
/// list). The same grouping `tools.catalog` shows.
fn profile_tools(profile: &str) -> Option<Option<Vec<&'static str>>> {
    Some(match profile {
        "full" => None,
        "coding" => Some(vec!["read", "write", "edit", "apply_patch", "ls", "exec"]),
        "messaging" => Some(vec!["message"]),
        "minimal" => Some(Vec::new()),
        _ => return None,
    })
}

/// One `agents.entries.<id>` object in loopgate's words: `model` and `skills` as they are,
/// `tools.profile` as `tools.allow` (`full`: no list of its own, or every tool when the
/// defaults have a list it would otherwise inherit); anything else kept (and refused by
/// validation if loopgate has no such setting).
fn agent(mut entry: Map<String, Json>, defaults_restrict: bool) -> Map<String, Json> {
    if let Some(Json::Object(tools)) = entry.get_mut("tools") {
        if let Some(Json::String(profile)) = tools.get("profile").cloned() {
            if let Some(allow) = profile_tools(&profile) {
                tools.remove("profile");
                let allow = match allow {
                    Some(list) => Json::Array(list.into_iter().map(Json::from).collect()),
                    None if defaults_restrict => Json::Array(
                        ipc::tools::TOOLS
                            .iter()
                            .map(|t| Json::from(t.name))
                            .collect(),
                    ),
                    None => Json::Null,
                };
                tools.insert("allow".into(), allow);
            }
        }
    }
    entry
}

/// The config as OpenClaw's Control UI reads it (`sourceConfig`): the agents under
/// `agents.entries` instead of `agents.list`, a tool list that is one of its profiles as
/// `tools.profile`. Written back whole, [`from_openclaw`] takes it home again.
pub fn to_openclaw(config: &Json) -> Json {
    let mut c = config.clone();
    let Some(Json::Object(agents)) = c.get_mut("agents") else {
        return c;
    };
    let defaults_restrict = agents
        .get("defaults")
        .and_then(|d| d.get("tools"))
        .and_then(|t| t.get("allow"))
        .is_some_and(Json::is_array);
    let Some(Json::Object(mut list)) = agents.remove("list") else {
        return c;
    };
    for entry in list.values_mut() {
        let Some(Json::Object(tools)) = entry.get_mut("tools") else {
            continue;
        };
        let Some(Json::Array(allow)) = tools.get("allow") else {
            continue;
        };
        let names: Vec<&str> = allow.iter().filter_map(Json::as_str).collect();
        let every: Vec<&str> = ipc::tools::TOOLS.iter().map(|t| t.name).collect();
        let profile = ["coding", "messaging", "minimal"]
            .into_iter()
            .find(|p| profile_tools(p).flatten().is_some_and(|t| t == names))
            // Every tool is `full` where the defaults restrict (the way back writes the
            // list again); elsewhere `full` is no list, and a list stays a list.
            .or((defaults_restrict && names == every).then_some("full"));
        if let Some(p) = profile {
            tools.remove("allow");
            tools.insert("profile".into(), Json::from(p));
        }
    }
    agents.insert("entries".into(), Json::Object(list));
    c
}

/// Moves `agents.entries` into `agents.list` (an entry's keys over the listed agent's).
pub fn from_openclaw(config: &mut Map<String, Json>) {
    let Some(Json::Object(agents)) = config.get_mut("agents") else {
        return;
    };
    let Some(Json::Object(entries)) = agents.remove("entries") else {
        return;
    };
    let defaults_restrict = agents
        .get("defaults")
        .and_then(|d| d.get("tools"))
        .and_then(|t| t.get("allow"))
        .is_some_and(Json::is_array);
    let list = agents
        .entry("list")
        .or_insert_with(|| Json::Object(Map::new()));
    if !list.is_object() {
        *list = Json::Object(Map::new());
    }
    let Json::Object(list) = list else {
        return;
    };
    for (id, entry) in entries {
        let Json::Object(entry) = entry else {
            continue;
        };
        let target = list.entry(id).or_insert_with(|| Json::Object(Map::new()));
        if !target.is_object() {
            *target = Json::Object(Map::new());
        }
        if let Json::Object(target) = target {
            for (k, v) in agent(entry, defaults_restrict) {
                match (target.get_mut(&k), v) {
                    (Some(Json::Object(old)), Json::Object(new)) => old.extend(new),
                    (_, v) => {
                        target.insert(k, v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the Control UI's agent pages write (OpenClaw 2026.9.6, seen in the walk of
    /// 2026-12-07) lands where loopgate keeps it.
    /// The view and its way back: what the UI shows is what it writes.
    #[test]
    fn the_view_goes_back_home_unchanged() {
        let file = json!({
            "gateway": {"port": 0},
            "agents": {"defaults": {"model": "p/m"}, "list": {
                "ops": {"name": "Ops", "tools": {"allow": ["read", "write", "edit", "apply_patch", "ls", "exec"]}},
                "qa": {"tools": {"allow": ["read"]}}
            }}
        });
        let view = to_openclaw(&file);
        assert_eq!(
            view["agents"]["entries"]["ops"]["tools"],
            json!({"profile": "coding"})
        );
        assert_eq!(
            view["agents"]["entries"]["qa"]["tools"],
            json!({"allow": ["read"]})
        );
        assert!(view["agents"].get("list").is_none());
        let mut back = view.clone();
        let Json::Object(m) = &mut back else { panic!() };
        from_openclaw(m);
        assert_eq!(back, file);
    }

    /// `full` where the defaults restrict the tools is every tool, both ways.
    #[test]
    fn full_overrides_restricting_defaults() {
        let every: Vec<&str> = ipc::tools::TOOLS.iter().map(|t| t.name).collect();
        let mut c = json!({"agents": {"defaults": {"tools": {"allow": ["read"]}},
                           "entries": {"ops": {"tools": {"profile": "full"}}}}});
        let Json::Object(m) = &mut c else { panic!() };
        from_openclaw(m);
        assert_eq!(c["agents"]["list"]["ops"]["tools"]["allow"], json!(every));
        let view = to_openclaw(&c);
        assert_eq!(
            view["agents"]["entries"]["ops"]["tools"],
            json!({"profile": "full"})
        );
    }

    #[test]
    fn agent_entries_become_listed_agents() {
        let mut c = json!({
            "agents": {
                "list": {"ops": {"name": "Ops", "tools": {"exec": {"security": "full"}}}},
                "entries": {
                    "ops": {"model": "scripted/scripted-1", "tools": {"profile": "coding"}},
                    "main": {"skills": ["deploy"]},
                    "qa": {"tools": {"profile": "full"}}
                }
            }
        });
        let Json::Object(m) = &mut c else { panic!() };
        from_openclaw(m);
        assert_eq!(
            c,
            json!({"agents": {"list": {
                "ops": {"name": "Ops", "model": "scripted/scripted-1",
                        "tools": {"exec": {"security": "full"}, "allow": ["read", "write", "edit", "apply_patch", "ls", "exec"]}},
                "main": {"skills": ["deploy"]},
                "qa": {"tools": {"allow": null}}
            }}})
        );
    }
}
