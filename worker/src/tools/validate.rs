//! Tool argument validation against the tool's JSON Schema (a real validator: `jsonschema`),
//! with the recovery rules of R-E1: a value some `anyOf`/`oneOf` branch (or the declared
//! type) already accepts keeps its value and type; conversions (`"2"` -> 2, `"true"` ->
//! true) are tried only where the original is rejected; the full schema is then validated
//! again, so `oneOf` exclusivity and every other constraint still hold.

use serde_json::{Map, Value};

/// Parses and validates `arguments` (JSON text) against `schema`.
pub fn validate_args(schema: &Value, arguments: &str) -> Result<Value, String> {
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let validator =
        jsonschema::validator_for(schema).map_err(|e| format!("tool schema is invalid: {e}"))?;
    validate_with(schema, &validator, text)
}

/// Like [`validate_args`] with `schema` already compiled into `validator`.
pub fn validate_with(
    schema: &Value,
    validator: &jsonschema::Validator,
    arguments: &str,
) -> Result<Value, String> {
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("arguments are not valid JSON ({e})"))?;
    if validator.is_valid(&value) {
        return Ok(value);
    }
    let recovered = recover(schema, value.clone());
    if validator.is_valid(&recovered) {
        return Ok(recovered);
    }
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    Err(errors.join("; "))
}

/// Whether `value` is accepted by `schema` alone.
fn accepts(schema: &Value, value: &Value) -> bool {
    jsonschema::validator_for(schema)
        .map(|v| v.is_valid(value))
        .unwrap_or(false)
}

/// Converts scalars the schema rejects where a conversion makes them acceptable.
fn recover(schema: &Value, value: Value) -> Value {
    // A value some branch already accepts keeps its value and type.
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            if branches.iter().any(|b| accepts(b, &value)) {
                return value;
            }
            for b in branches {
                let converted = recover(b, value.clone());
                if accepts(b, &converted) {
                    return converted;
                }
            }
            return value;
        }
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let out: Map<String, Value> = map
                .into_iter()
                .map(|(k, v)| {
                    let v = match props.and_then(|p| p.get(&k)) {
                        Some(sub) => recover(sub, v),
                        None => v,
                    };
                    (k, v)
                })
                .collect();
            Value::Object(out)
        }
        Value::Array(items) => {
            let item_schema = schema.get("items");
            Value::Array(
                items
                    .into_iter()
                    .map(|v| item_schema.map_or(v.clone(), |s| recover(s, v)))
                    .collect(),
            )
        }
        Value::String(s) if !accepts(schema, &Value::String(s.clone())) => {
            convert(schema, &s).unwrap_or(Value::String(s))
        }
        other => other,
    }
}

fn convert(schema: &Value, s: &str) -> Option<Value> {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let t = s.trim();
    for ty in types {
        let v = match ty {
            "integer" => t.parse::<i64>().ok().map(Value::from),
            "number" => t
                .parse::<f64>()
                .ok()
                .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number)),
            "boolean" => match t {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            _ => None,
        };
        if let Some(v) = v {
            if accepts(schema, &v) {
                return Some(v);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// R-E1, table-driven.
    #[test]
    fn recovery_rules_r_e1() {
        let schema = json!({"type": "object", "properties": {
            "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "count": {"type": "integer"},
            "flag": {"type": "boolean"},
            "one": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^x"}]}
        }});
        let cases: Vec<(&str, Result<Value, ()>)> = vec![
            // A value a branch accepts keeps its value and type; the sibling converts.
            (
                r#"{"id": "00123", "count": "2"}"#,
                Ok(json!({"id": "00123", "count": 2})),
            ),
            (r#"{"flag": "true"}"#, Ok(json!({"flag": true}))),
            (r#"{"count": 3}"#, Ok(json!({"count": 3}))),
            // No conversion makes it valid.
            (r#"{"count": "two"}"#, Err(())),
            // oneOf: "5" matches no branch as a string (pattern ^x); converts to 5 (integer only).
            (r#"{"one": "5"}"#, Ok(json!({"one": 5}))),
            (r#"{"one": "xy"}"#, Ok(json!({"one": "xy"}))),
            ("not json", Err(())),
            ("", Ok(json!({}))),
        ];
        for (input, want) in cases {
            let got = validate_args(&schema, input);
            match want {
                Ok(v) => assert_eq!(got.as_ref().ok(), Some(&v), "{input}: {got:?}"),
                Err(()) => assert!(got.is_err(), "{input}: {got:?}"),
            }
        }
    }

    #[test]
    fn one_of_exclusivity_still_enforced() {
        // "1" as a string matches neither branch; converted to 1 it matches both integer
        // branches, which oneOf forbids, so it stays invalid.
        let schema = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
        assert!(validate_args(&schema, r#""1""#).is_err());
    }
}
