//! JSON Schemas of the config values whose types are not the config's own (the link's
//! enums, the model setting's two spellings), for `config.schema`.

use schemars::gen::SchemaGenerator;
use schemars::schema::{InstanceType, Schema, SchemaObject, SubschemaValidation};

/// A string that is one of `values`.
fn one_of(values: &[&str], description: &str) -> Schema {
    let mut s = SchemaObject {
        instance_type: Some(InstanceType::String.into()),
        enum_values: Some(values.iter().map(|v| serde_json::Value::from(*v)).collect()),
        ..Default::default()
    };
    s.metadata().description = Some(description.to_owned());
    s.into()
}

/// `tools.exec.security`.
pub fn exec_security(_: &mut SchemaGenerator) -> Schema {
    one_of(
        &["deny", "allowlist", "ask", "full"],
        "What `exec` may run: nothing, allowlisted commands, allowlisted or approved by an operator, anything.",
    )
}

/// A provider's `api`.
pub fn provider_api(_: &mut SchemaGenerator) -> Schema {
    one_of(
        &[
            "openai-completions",
            "openai-responses",
            "anthropic-messages",
            "ollama",
        ],
        "The provider's API.",
    )
}

/// `model`: `"<provider>/<model>"`, or `{primary, fallbacks}`.
pub fn model_setting(_: &mut SchemaGenerator) -> Schema {
    let name = || -> Schema {
        SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            ..Default::default()
        }
        .into()
    };
    let mut table = SchemaObject {
        instance_type: Some(InstanceType::Object.into()),
        ..Default::default()
    };
    let obj = table.object();
    obj.properties.insert("primary".into(), name());
    obj.properties.insert(
        "fallbacks".into(),
        SchemaObject {
            instance_type: Some(InstanceType::Array.into()),
            array: Some(Box::new(schemars::schema::ArrayValidation {
                items: Some(name().into()),
                ..Default::default()
            })),
            ..Default::default()
        }
        .into(),
    );
    obj.required.insert("primary".into());
    obj.additional_properties = Some(Box::new(false.into()));
    let mut s = SchemaObject {
        subschemas: Some(Box::new(SubschemaValidation {
            any_of: Some(vec![name(), table.into()]),
            ..Default::default()
        })),
        ..Default::default()
    };
    s.metadata().description = Some(
        "\"<provider>/<model>\", or { primary = \"<provider>/<model>\", fallbacks = [...] }".into(),
    );
    s.into()
}
