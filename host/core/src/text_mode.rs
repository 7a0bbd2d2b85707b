//! The text fallback for models without native tool calling: the tools and
//! the ` ```action ` block format are described in the user message, and the
//! model's free text is parsed back into a tool call.

use serde_json::{Map, Value};
use serde_yaml_ng::Value as Yaml;

use crate::model::{ModelReply, ToolSpec};

/// The block format, as shown to the model (and repeated in error messages).
const FORMAT_EXAMPLE: &str =
    "```action\nname: <tool name>\nparameters:\n  <parameter name>: <value>\n```";

/// Parse the first fenced ` ```action ` block of `text`:
///
/// ````text
/// ```action
/// name: read_file
/// parameters:
///   path: src/lib.rs
/// ```
/// ````
///
/// The block content is YAML with a string `name` and a `parameters` mapping
/// (`arguments` is accepted as a synonym; absent or empty means no
/// arguments). When neither is present, the keys next to `name` are taken as
/// the parameters. A missing closing fence is tolerated (the block runs to
/// the end of the text), and a block indented as a whole is dedented. Later
/// blocks are ignored.
///
/// Returns [`ModelReply::ToolCall`]; [`ModelReply::NoToolCall`] with the
/// whole text when there is no action block; or
/// [`ModelReply::MalformedArguments`] with the block content as `raw` and an
/// `error` explaining what is wrong and the expected format.
pub fn parse_action_block(text: &str) -> ModelReply {
    let Some(block) = find_action_block(text) else {
        return ModelReply::NoToolCall {
            text: text.to_string(),
        };
    };
    let malformed = |name: String, error: String| ModelReply::MalformedArguments {
        name,
        raw: block.clone(),
        error: format!("{error}. Expected exactly one block in this format:\n{FORMAT_EXAMPLE}"),
    };
    if block.trim().is_empty() {
        return malformed(String::new(), "the ```action block is empty".to_string());
    }
    // The closing fence ends the last line: keep its line break so a final
    // `|` block scalar ends with a newline like the others.
    let yaml: Yaml = match serde_yaml_ng::from_str(&format!("{block}\n")) {
        Ok(v) => v,
        Err(e) => {
            return malformed(
                guess_name(&block),
                format!("the ```action block is not valid YAML ({e}); use a `|` block scalar for multi-line text and quote values that contain `: `"),
            )
        }
    };
    let Value::Object(mut map) = yaml_to_json(yaml) else {
        return malformed(
            guess_name(&block),
            "the ```action block must be a YAML mapping with `name` and `parameters`".to_string(),
        );
    };
    let name = match map.remove("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(other) if !other.is_null() && !other.is_object() && !other.is_array() => {
            // A bare number or boolean name; keep it as text.
            other.to_string()
        }
        _ => {
            return malformed(
                String::new(),
                "the ```action block has no `name:` (the tool to call)".to_string(),
            )
        }
    };
    let params_key = ["parameters", "arguments"]
        .into_iter()
        .find(|k| map.contains_key(*k));
    let arguments = match params_key {
        Some(key) => {
            let params = map.remove(key).unwrap_or(Value::Null);
            if let Some(extra) = map.keys().next() {
                return malformed(
                    name,
                    format!("unexpected key `{extra}` next to `name` and `{key}`: put every argument under `{key}:`"),
                );
            }
            match params {
                Value::Null => Value::Object(Map::new()),
                v @ Value::Object(_) => v,
                other => {
                    return malformed(
                        name,
                        format!(
                            "`{key}` must be a mapping of parameter names to values, got {}",
                            crate::model::json_type_name(&other)
                        ),
                    )
                }
            }
        }
        None => Value::Object(map),
    };
    ModelReply::ToolCall { name, arguments }
}

/// The content of the first ` ```action ` block, dedented, or `None`.
fn find_action_block(text: &str) -> Option<String> {
    let mut lines = text.lines();
    loop {
        let line = lines.next()?;
        let t = line.trim();
        if let Some(info) = t.strip_prefix("```") {
            if info
                .trim_start_matches('`')
                .trim()
                .eq_ignore_ascii_case("action")
            {
                break;
            }
        }
    }
    let body: Vec<&str> = lines
        .take_while(|l| !l.trim_start().starts_with("```"))
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    let dedented: Vec<&str> = body
        .iter()
        .map(|l| l.get(indent..).unwrap_or_else(|| l.trim_start()))
        .collect();
    Some(dedented.join("\n"))
}

/// A best-effort tool name from a block that is not valid YAML.
fn guess_name(block: &str) -> String {
    block
        .lines()
        .find_map(|l| l.trim().strip_prefix("name:"))
        .map(|v| v.trim().trim_matches(['"', '\'']).to_string())
        .unwrap_or_default()
}

/// Convert YAML to JSON: non-string keys become their text, tags are
/// dropped, non-finite floats become `null`.
fn yaml_to_json(v: Yaml) -> Value {
    match v {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(seq) => Value::Array(seq.into_iter().map(yaml_to_json).collect()),
        Yaml::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match yaml_to_json(k) {
                    Value::String(s) => s,
                    Value::Null => "null".to_string(),
                    other => other.to_string(),
                };
                out.insert(key, yaml_to_json(v));
            }
            Value::Object(out)
        }
        Yaml::Tagged(t) => yaml_to_json(t.value),
    }
}

/// The instruction text appended to the user message in text mode: the
/// block format and every tool with its description and parameters (name,
/// type, required or optional, description), in the given order.
/// Deterministic: the same tools always give the same text.
pub fn text_mode_instructions(tools: &[ToolSpec]) -> String {
    let mut out = String::new();
    out.push_str("## How to act\n\n");
    out.push_str(
        "You cannot call tools directly. Answer with exactly one action block in this format:\n\n",
    );
    out.push_str(FORMAT_EXAMPLE);
    out.push_str("\n\n");
    out.push_str(
        "The block content is YAML: use a `|` block scalar for multi-line text (such as file \
         contents) and quote values that contain `: ` or start with a special character. \
         Write exactly one block; anything after it is ignored.\n\n",
    );
    out.push_str("Available tools:\n");
    if tools.is_empty() {
        out.push_str("\n(none)\n");
    }
    for tool in tools {
        out.push_str(&format!("\n- {}", tool.name));
        let desc = tool.description.trim();
        if !desc.is_empty() {
            out.push_str(": ");
            out.push_str(&desc.lines().collect::<Vec<_>>().join("\n  "));
        }
        out.push('\n');
        let props = tool
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .filter(|p| !p.is_empty());
        let Some(props) = props else {
            out.push_str("  parameters: none\n");
            continue;
        };
        let required: Vec<&str> = tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out.push_str("  parameters:\n");
        for (name, schema) in props {
            let ty = schema_type(schema);
            let req = if required.contains(&name.as_str()) {
                "required"
            } else {
                "optional"
            };
            out.push_str(&format!("    - {name} ({ty}, {req})"));
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                let d = d.trim();
                if !d.is_empty() {
                    out.push_str(": ");
                    out.push_str(&d.lines().collect::<Vec<_>>().join(" "));
                }
            }
            out.push('\n');
        }
    }
    out
}

/// A short type description of a property schema.
fn schema_type(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = values
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        return format!("one of: {}", vals.join(", "));
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items").map(schema_type) {
            Some(item) if item != "any" => format!("array of {item}"),
            _ => "array".to_string(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> ModelReply {
        ModelReply::ToolCall {
            name: name.into(),
            arguments: args,
        }
    }

    fn malformed_error(r: &ModelReply) -> (&str, &str, &str) {
        match r {
            ModelReply::MalformedArguments { name, raw, error } => (name, raw, error),
            other => panic!("expected MalformedArguments, got {other:?}"),
        }
    }

    #[test]
    fn parses_the_seed_format() {
        let text =
            "I will read it.\n\n```action\nname: read_file\nparameters:\n  path: src/lib.rs\n```\n";
        assert_eq!(
            parse_action_block(text),
            call("read_file", json!({"path": "src/lib.rs"}))
        );
    }

    #[test]
    fn multiline_block_scalars_and_types() {
        let text = "```action\nname: write_file\nparameters:\n  path: a.txt\n  content: |\n    line 1\n      indented: yes\n    line 3\n  count: 3\n  ratio: 0.5\n  flag: true\n  tags: [a, b]\n  nothing: null\n```";
        assert_eq!(
            parse_action_block(text),
            call(
                "write_file",
                json!({
                    "path": "a.txt",
                    "content": "line 1\n  indented: yes\nline 3\n",
                    "count": 3, "ratio": 0.5, "flag": true, "tags": ["a", "b"], "nothing": null
                })
            )
        );
    }

    #[test]
    fn final_block_scalar_keeps_its_newline() {
        let text =
            "```action\nname: write_file\nparameters:\n  path: a\n  content: |\n    x\n    y\n```";
        assert_eq!(
            parse_action_block(text),
            call("write_file", json!({"path": "a", "content": "x\ny\n"}))
        );
    }

    #[test]
    fn no_block_is_no_tool_call() {
        for text in [
            "",
            "I am thinking.",
            "```rust\nfn main() {}\n```",
            "```\nname: x\n```",
        ] {
            assert_eq!(
                parse_action_block(text),
                ModelReply::NoToolCall {
                    text: text.to_string()
                },
                "{text:?}"
            );
        }
    }

    #[test]
    fn first_block_wins_and_fence_variants() {
        let text = "```Action\nname: a\nparameters: {}\n```\nthen\n```action\nname: b\n```";
        assert_eq!(parse_action_block(text), call("a", json!({})));
        // Indented block (e.g. in a list), unclosed fence, no parameters.
        let text = "1. do it\n   ```action\n   name: list_dir\n   parameters:\n     path: .\n";
        assert_eq!(
            parse_action_block(text),
            call("list_dir", json!({"path": "."}))
        );
        assert_eq!(
            parse_action_block("```action\nname: done\n```"),
            call("done", json!({}))
        );
        assert_eq!(
            parse_action_block("````action\nname: x\narguments:\n  a: 1\n````"),
            call("x", json!({"a": 1}))
        );
    }

    #[test]
    fn parameters_at_top_level_are_accepted() {
        let text = "```action\nname: read_file\npath: src/main.rs\n```";
        assert_eq!(
            parse_action_block(text),
            call("read_file", json!({"path": "src/main.rs"}))
        );
    }

    #[test]
    fn invalid_yaml_is_malformed_with_name_and_help() {
        let text = "```action\nname: edit_file\nparameters:\n  old: a: b: c\n  new: [unclosed\n```";
        let r = parse_action_block(text);
        let (name, raw, error) = malformed_error(&r);
        assert_eq!(name, "edit_file");
        assert_eq!(
            raw,
            "name: edit_file\nparameters:\n  old: a: b: c\n  new: [unclosed"
        );
        assert!(error.contains("not valid YAML"), "{error}");
        assert!(error.contains("```action\nname: <tool name>"), "{error}");
    }

    #[test]
    fn structural_problems_are_malformed() {
        let r = parse_action_block("```action\nparameters:\n  path: x\n```");
        let (name, _, error) = malformed_error(&r);
        assert_eq!(name, "");
        assert!(error.contains("no `name:`"), "{error}");

        let r = parse_action_block("```action\nname: read_file\nparameters: src/lib.rs\n```");
        let (name, _, error) = malformed_error(&r);
        assert_eq!(name, "read_file");
        assert!(error.contains("must be a mapping"), "{error}");

        let r = parse_action_block("```action\nname: a\nparameters:\n  x: 1\nthought: hmm\n```");
        assert!(malformed_error(&r).2.contains("unexpected key `thought`"));

        let r = parse_action_block("```action\n- name: a\n```");
        assert!(malformed_error(&r).2.contains("YAML mapping"));

        let r = parse_action_block("```action\n\n```");
        assert!(malformed_error(&r).2.contains("empty"));
    }

    #[test]
    fn instructions_list_tools_deterministically() {
        let tools = vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Read a file.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Relative path."},
                        "start_line": {"type": "integer"},
                        "mode": {"enum": ["a", "b"]},
                        "globs": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["path"]
                }),
            },
            ToolSpec {
                name: "done".into(),
                description: "Finish.".into(),
                input_schema: json!({"type": "object"}),
            },
        ];
        let a = text_mode_instructions(&tools);
        assert_eq!(a, text_mode_instructions(&tools));
        assert!(a.contains(FORMAT_EXAMPLE));
        assert!(a.contains("- read_file: Read a file.\n  parameters:\n    - path (string, required): Relative path.\n    - start_line (integer, optional)\n    - mode (one of: a, b, optional)\n    - globs (array of string, optional)\n"), "{a}");
        assert!(a.contains("- done: Finish.\n  parameters: none\n"), "{a}");
        assert!(a.find("read_file").unwrap() < a.find("- done").unwrap());
    }
}
