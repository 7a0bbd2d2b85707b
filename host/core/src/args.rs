//! The one argument validator for every tool the model can call: built-in actions,
//! `finish_subtask` and plugin tools all check their arguments against a JSON Schema
//! here (the `jsonschema` crate: `enum`, nested objects, `pattern`, bounds, all enforced).
//!
//! Problems are phrased for the model, which reads them on its next step: each names
//! the field (`start_line`, `options/0/name`) and what it must be, and all of a call's
//! problems are reported at once, so one round trip fixes them.
//!
//! `plan` is the one exception: its parser accepts shapes a schema would refuse (a task
//! as a plain string, a list given as a JSON string), on purpose (`focus::parse_plan`).

use serde_json::{Map, Value};

/// An object schema for a tool's arguments, checked and compiled once.
pub struct ArgumentSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

/// Why a schema cannot describe a tool's arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidArgumentSchema {
    /// The top level is not `{"type": "object", ...}`: tool arguments are always an object.
    #[error("the schema must be a JSON object with \"type\": \"object\"")]
    NotAnObject,
    /// Not a valid JSON Schema (or it refers to a document it may not fetch).
    #[error("not a valid JSON Schema: {0}")]
    Invalid(String),
}

impl std::fmt::Debug for ArgumentSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentSchema")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl ArgumentSchema {
    /// Checks `schema` against the JSON Schema meta-schema and compiles it. Remote
    /// `$ref`s are not fetched (the crate is built without network resolution), so a
    /// plugin's schema cannot make the host reach out.
    pub fn new(schema: Value) -> Result<Self, InvalidArgumentSchema> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(InvalidArgumentSchema::NotAnObject);
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| InvalidArgumentSchema::Invalid(e.to_string()))?;
        Ok(Self { schema, validator })
    }

    /// The schema as given (what the model is offered).
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Checks `args` (an object) and returns every problem, each naming its field.
    ///
    /// A top-level field set to `null` that the schema does not require counts as
    /// absent: models often send `"start_line": null` for "not given".
    pub fn check(&self, args: &Map<String, Value>) -> Result<(), Vec<String>> {
        let required = |key: &str| {
            self.schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|k| k.as_str() == Some(key)))
        };
        let args: Map<String, Value> = args
            .iter()
            .filter(|(k, v)| !v.is_null() || required(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let args = Value::Object(args);
        let mut problems: Vec<String> = self
            .validator
            .iter_errors(&args)
            .map(|e| self.problem(&e))
            .collect();
        problems.dedup();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// One validation error as a sentence naming the field.
    fn problem(&self, error: &jsonschema::ValidationError<'_>) -> String {
        use jsonschema::error::ValidationErrorKind as K;
        let path = error.instance_path().as_str().trim_start_matches('/');
        let field = if path.is_empty() {
            "the arguments".to_string()
        } else {
            format!("`{path}`")
        };
        let got = describe(error.instance());
        match error.kind() {
            K::Required { property } => {
                let name = property
                    .as_str()
                    .map_or(property.to_string(), str::to_string);
                let name = if path.is_empty() {
                    name
                } else {
                    format!("{path}/{name}")
                };
                format!("missing required field `{name}`")
            }
            K::AdditionalProperties { unexpected } => {
                let allowed = if path.is_empty() {
                    let names: Vec<String> = self
                        .schema
                        .get("properties")
                        .and_then(Value::as_object)
                        .map(|p| p.keys().map(|k| format!("`{k}`")).collect())
                        .unwrap_or_default();
                    if names.is_empty() {
                        " (allowed: none)".to_string()
                    } else {
                        format!(" (allowed: {})", names.join(", "))
                    }
                } else {
                    String::new()
                };
                let prefix = if path.is_empty() {
                    String::new()
                } else {
                    format!("{path}/")
                };
                unexpected
                    .iter()
                    .map(|k| format!("unknown field `{prefix}{k}`{allowed}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
            K::Type { kind } => {
                let expected = match kind {
                    jsonschema::error::TypeKind::Single(t) => article(&t.to_string()),
                    jsonschema::error::TypeKind::Multiple(ts) => {
                        let names: Vec<String> =
                            ts.iter().map(|t| article(&t.to_string())).collect();
                        names.join(" or ")
                    }
                };
                format!("{field} must be {expected}, got {got}")
            }
            K::Minimum { limit } => format!("{field} must be >= {limit}, got {got}"),
            K::Maximum { limit } => format!("{field} must be <= {limit}, got {got}"),
            K::Enum { options } => format!("{field} must be one of {options}, got {got}"),
            K::Constant { expected_value } => {
                format!("{field} must be {expected_value}, got {got}")
            }
            K::Pattern { pattern } => format!("{field} must match /{pattern}/, got {got}"),
            K::MinLength { limit } => {
                format!("{field} must have at least {limit} characters, got {got}")
            }
            K::MaxLength { limit } => {
                format!("{field} must have at most {limit} characters, got {got}")
            }
            K::MinItems { limit } => format!("{field} must have at least {limit} items"),
            K::MaxItems { limit } => format!("{field} must have at most {limit} items"),
            _ => format!("{field}: {error}"),
        }
    }
}

/// `"string"` -> `"a string"`, `"integer"` -> `"an integer"`.
fn article(type_name: &str) -> String {
    match type_name.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {type_name}"),
        _ => format!("a {type_name}"),
    }
}

/// The JSON type of a value, with an article: `a string`, `null`.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A short rendering of a wrong value for an error message: its type, and the value
/// itself when it is a scalar (cut to 40 characters).
pub fn describe(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => {
            let text = value.to_string();
            if text.chars().count() > 40 {
                format!(
                    "{} ({}...)",
                    json_type(value),
                    text.chars().take(37).collect::<String>()
                )
            } else {
                format!("{} ({text})", json_type(value))
            }
        }
        other => json_type(other).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> ArgumentSchema {
        ArgumentSchema::new(json!({
            "type": "object",
            "properties": {
                "check": {"type": "string", "enum": ["tests", "lint"]},
                "times": {"type": "integer", "minimum": 1},
                "label": {"type": "string", "pattern": "^[a-z]+$"},
                "opts": {
                    "type": "object",
                    "properties": {"depth": {"type": "integer"}},
                    "required": ["depth"],
                    "additionalProperties": false
                }
            },
            "required": ["check"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    fn check(args: Value) -> Result<(), Vec<String>> {
        schema().check(args.as_object().unwrap())
    }

    #[test]
    fn valid_arguments_pass_and_optional_nulls_count_as_absent() {
        assert_eq!(check(json!({"check": "tests"})), Ok(()));
        assert_eq!(check(json!({"check": "lint", "times": null})), Ok(()));
    }

    #[test]
    fn every_problem_names_its_field() {
        let problems = check(json!({
            "check": "deploy",
            "times": 0,
            "label": "Bad Label",
            "opts": {"deep": 1},
            "extra": true
        }))
        .unwrap_err();
        let all = problems.join("\n");
        assert!(all.contains("`check` must be one of"), "{all}");
        assert!(all.contains("\"deploy\""), "{all}");
        assert!(
            all.contains("`times` must be >= 1, got a number (0)"),
            "{all}"
        );
        assert!(all.contains("`label` must match /^[a-z]+$/"), "{all}");
        assert!(all.contains("missing required field `opts/depth`"), "{all}");
        assert!(all.contains("unknown field `opts/deep`"), "{all}");
        assert!(
            all.contains("unknown field `extra` (allowed: `check`, `times`, `label`, `opts`)"),
            "{all}"
        );
    }

    #[test]
    fn required_null_is_missing_and_types_are_named() {
        let problems = check(json!({"check": null})).unwrap_err().join("\n");
        assert!(
            problems.contains("`check` must be a string, got null"),
            "{problems}"
        );
        let problems = check(json!({})).unwrap_err().join("\n");
        assert_eq!(problems, "missing required field `check`");
    }

    #[test]
    fn schemas_are_checked_when_built() {
        assert_eq!(
            ArgumentSchema::new(json!({"type": "array"})).unwrap_err(),
            InvalidArgumentSchema::NotAnObject
        );
        let e = ArgumentSchema::new(json!({
            "type": "object",
            "properties": {"x": {"type": "strin"}}
        }))
        .unwrap_err();
        assert!(matches!(e, InvalidArgumentSchema::Invalid(_)), "{e:?}");
        let e = ArgumentSchema::new(json!({
            "type": "object",
            "properties": {"x": {"type": "string", "pattern": "("}}
        }))
        .unwrap_err();
        assert!(matches!(e, InvalidArgumentSchema::Invalid(_)), "{e:?}");
    }

    #[test]
    fn remote_references_are_not_fetched() {
        let e = ArgumentSchema::new(json!({
            "type": "object",
            "properties": {"x": {"$ref": "http://127.0.0.1:9/schema.json"}}
        }));
        assert!(e.is_err(), "a remote $ref must be refused, not fetched");
    }
}
