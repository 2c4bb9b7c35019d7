//! The operator's surface over the Gateway: the config file (`config.schema`,
//! `config.schema.lookup`, `config.patch`, `config.apply`), agents (`agents.create`,
//! `agents.update`, `agents.delete`), their files (`agents.files.*`) and the tools
//! (`tools.catalog`, `tools.effective`), usage (`usage.status`, `usage.cost`,
//! `sessions.usage`), skills (`skills.status`). `config.get` and `agents.list` stay with the
//! gateway's own methods ([`super::gateway_method`]).

use std::sync::Arc;

use ipc::gateway::{m, Method};

use super::gateway_ops::{config_schema, config_schema_lookup, config_write};
use super::request::Request;
use super::{agent_files, agents_admin, misrouted, serve, skills, tools_catalog, usage};
use crate::connection::out::Out;
use crate::gateway::{ConfigWrite, Gateway};

/// Serves one method of the operator's group.
pub(super) async fn method(gw: &Arc<Gateway>, method: Method, req: Request, out: &Out) {
    match method {
        Method::ConfigSchema => serve::<m::ConfigSchema, _>(req, out, |_| config_schema()).await,
        Method::ConfigSchemaLookup => {
            serve::<m::ConfigSchemaLookup, _>(req, out, config_schema_lookup).await
        }
        Method::ConfigPatch => {
            let patch = |p| config_write(&gw.reload_requests, ConfigWrite::Patch(p));
            serve::<m::ConfigPatch, _>(req, out, patch).await
        }
        Method::ConfigSet => {
            let set = |p| config_write(&gw.reload_requests, ConfigWrite::Set(p));
            serve::<m::ConfigSet, _>(req, out, set).await
        }
        Method::ConfigApply => {
            let apply = |p| config_write(&gw.reload_requests, ConfigWrite::Apply(p));
            serve::<m::ConfigApply, _>(req, out, apply).await
        }
        Method::AgentsCreate => {
            let create = |p| agents_admin::agents_create(gw, p);
            serve::<m::AgentsCreate, _>(req, out, create).await
        }
        Method::AgentsUpdate => {
            let update = |p| agents_admin::agents_update(gw, p);
            serve::<m::AgentsUpdate, _>(req, out, update).await
        }
        Method::AgentsDelete => {
            let delete = |p| agents_admin::agents_delete(gw, p);
            serve::<m::AgentsDelete, _>(req, out, delete).await
        }
        Method::ToolsCatalog => {
            let config = gw.config();
            let catalog = |p| async { tools_catalog::tools_catalog(&config, p) };
            serve::<m::ToolsCatalog, _>(req, out, catalog).await
        }
        Method::ToolsEffective => {
            let config = gw.config();
            let effective = |p| tools_catalog::tools_effective(&config, p);
            serve::<m::ToolsEffective, _>(req, out, effective).await
        }
        Method::AgentsFilesList => {
            let config = gw.config();
            let list = |p| agent_files::agents_files_list(&config, p);
            serve::<m::AgentsFilesList, _>(req, out, list).await
        }
        Method::AgentsFilesGet => {
            let config = gw.config();
            let get = |p| agent_files::agents_files_get(&config, p);
            serve::<m::AgentsFilesGet, _>(req, out, get).await
        }
        Method::AgentsFilesSet => {
            let config = gw.config();
            let set = |p| agent_files::agents_files_set(&config, p);
            serve::<m::AgentsFilesSet, _>(req, out, set).await
        }
        // loopgate keeps no provider accounts, so no provider quota windows (what OpenClaw
        // answers for a provider of one's own).
        Method::UsageStatus => {
            let status = |_| async {
                Ok(ipc::gateway::UsageStatusResult {
                    updated_at: crate::events::now_ms(),
                    providers: Vec::new(),
                })
            };
            serve::<m::UsageStatus, _>(req, out, status).await
        }
        Method::UsageCost => {
            let config = gw.config();
            let cost = |p| usage::usage_cost(&gw.db, &config, p);
            serve::<m::UsageCost, _>(req, out, cost).await
        }
        Method::SessionsUsage => {
            let config = gw.config();
            let sessions = |p| usage::sessions_usage(&gw.db, &config, p);
            serve::<m::SessionsUsage, _>(req, out, sessions).await
        }
        Method::SkillsStatus => {
            let status = |p| skills::skills_status(gw, out, p);
            serve::<m::SkillsStatus, _>(req, out, status).await
        }
        other => misrouted(other, req, out).await,
    }
}
