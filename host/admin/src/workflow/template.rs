//! The template language of a node's input: literal text with `{{ path }}`
//! holes, where a path is `input` or `nodes.NAME.output`, followed by
//! `.field` or `.0` steps into JSON. Nothing else: no code, no filters, no
//! loops. A value that is text is written as it is, any other JSON value
//! as compact JSON. A path that leads nowhere fails the render naming the
//! path (never an empty string), and so does a render past
//! [`WorkflowSpec::MAX_INPUT_BYTES`].

use std::collections::HashMap;

use cronbox_api::WorkflowSpec;
use serde_json::Value;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Hole(Path),
}

/// Where a hole reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    /// `None`: the workflow's input; `Some(node)`: that node's output.
    pub node: Option<String>,
    steps: Vec<String>,
    written: String,
}

/// Why a template does not parse or render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("a `{{{{` at byte {0} is not closed by `}}}}`")]
    Unclosed(usize),
    #[error(
        "`{{{{ {0} }}}}` names nothing: a path is `input` or `nodes.NAME.output`, \
         then `.field` or `.0` steps"
    )]
    BadPath(String),
    #[error("`{{{{ {path} }}}}` is missing: {why}")]
    Missing { path: String, why: String },
    #[error("the rendered input is over {0} bytes")]
    TooLarge(usize),
}

impl Template {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = text;
        let mut offset = 0;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or(TemplateError::Unclosed(offset + open))?;
            parts.push(Part::Hole(Path::parse(after[..close].trim())?));
            let consumed = open + 2 + close + 2;
            offset += consumed;
            rest = &rest[consumed..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Template { parts })
    }

    /// The nodes whose outputs the template reads, one per hole.
    pub fn nodes_read(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Hole(path) => path.node.as_deref(),
            Part::Text(_) => None,
        })
    }

    /// Renders with the workflow's `input` and the `outputs` of nodes
    /// (as text: JSON text is read as JSON, other text as a string).
    pub fn render(
        &self,
        input: &Value,
        outputs: &HashMap<String, String>,
    ) -> Result<String, TemplateError> {
        let mut rendered = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => rendered.push_str(text),
                Part::Hole(path) => {
                    let output;
                    let root = match &path.node {
                        None => input,
                        Some(node) => {
                            let text = outputs.get(node).ok_or_else(|| TemplateError::Missing {
                                path: path.written.clone(),
                                why: format!("node {node:?} has no output"),
                            })?;
                            output = serde_json::from_str(text)
                                .unwrap_or_else(|_| Value::String(text.clone()));
                            &output
                        }
                    };
                    match path.follow(root)? {
                        Value::String(text) => rendered.push_str(text),
                        other => rendered.push_str(&other.to_string()),
                    }
                }
            }
            if rendered.len() > WorkflowSpec::MAX_INPUT_BYTES {
                return Err(TemplateError::TooLarge(WorkflowSpec::MAX_INPUT_BYTES));
            }
        }
        Ok(rendered)
    }
}

impl Path {
    fn parse(written: &str) -> Result<Path, TemplateError> {
        let bad = || TemplateError::BadPath(written.to_owned());
        let mut words = written.split('.');
        let node = match words.next() {
            Some("input") => None,
            Some("nodes") => {
                let node = words
                    .next()
                    .filter(|name| !name.is_empty())
                    .ok_or_else(bad)?;
                if words.next() != Some("output") {
                    return Err(bad());
                }
                Some(node.to_owned())
            }
            _ => return Err(bad()),
        };
        let steps: Vec<String> = words.map(str::to_owned).collect();
        if steps.iter().any(|step| {
            step.is_empty()
                || !step
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }) {
            return Err(bad());
        }
        Ok(Path {
            node,
            steps,
            written: written.to_owned(),
        })
    }

    fn follow<'v>(&self, root: &'v Value) -> Result<&'v Value, TemplateError> {
        let mut value = root;
        for step in &self.steps {
            let next = match value {
                Value::Object(fields) => fields.get(step),
                Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            value = next.ok_or_else(|| TemplateError::Missing {
                path: self.written.clone(),
                why: format!("no `{step}` in {}", describe(value)),
            })?;
        }
        Ok(value)
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Object(fields) if fields.is_empty() => "an empty object".to_owned(),
        Value::Object(fields) => format!(
            "an object with {}",
            fields
                .keys()
                .take(8)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Array(items) => format!("an array of {}", items.len()),
        Value::String(_) => "a string".to_owned(),
        Value::Number(_) => "a number".to_owned(),
        Value::Bool(_) => "a boolean".to_owned(),
        Value::Null => "null".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outputs(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(node, output)| (node.to_string(), output.to_string()))
            .collect()
    }

    #[test]
    fn holes_read_the_input_and_ancestors_outputs_as_json_or_text() {
        let template =
            Template::parse("day={{ input.day }} rows={{nodes.extract.output.rows}} first={{ nodes.extract.output.items.0 }} note={{ nodes.say.output }}")
                .unwrap();
        let rendered = template
            .render(
                &json!({ "day": "2026-11-28" }),
                &outputs(&[
                    ("extract", r#"{"rows": 3, "items": [{"id": 7}]}"#),
                    ("say", "hello there"),
                ]),
            )
            .unwrap();
        assert_eq!(
            rendered,
            r#"day=2026-11-28 rows=3 first={"id":7} note=hello there"#
        );
        let read: Vec<&str> = template.nodes_read().collect();
        assert_eq!(read, ["extract", "extract", "say"]);
    }

    #[test]
    fn a_missing_field_fails_naming_the_path_never_an_empty_string() {
        let template = Template::parse("{{ nodes.extract.output.rows }}").unwrap();
        let error = template
            .render(&json!({}), &outputs(&[("extract", r#"{"count": 3}"#)]))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`{{ nodes.extract.output.rows }}` is missing: no `rows` in an object with count"
        );
        let error = template.render(&json!({}), &outputs(&[])).unwrap_err();
        assert!(
            error.to_string().contains("node \"extract\" has no output"),
            "{error}"
        );
    }

    #[test]
    fn bad_templates_are_refused_when_parsed() {
        for (text, expected) in [
            ("{{ input", "is not closed"),
            ("{{ env.HOME }}", "names nothing"),
            ("{{ nodes.a.input }}", "names nothing"),
            ("{{ input..x }}", "names nothing"),
            ("{{ input.a b }}", "names nothing"),
        ] {
            let error = Template::parse(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        assert_eq!(
            Template::parse("plain")
                .unwrap()
                .render(&json!({}), &outputs(&[]))
                .unwrap(),
            "plain"
        );
    }

    #[test]
    fn a_render_past_the_bound_fails() {
        let big = "x".repeat(40 * 1024);
        let template = Template::parse("{{ input.a }}{{ input.a }}").unwrap();
        let error = template
            .render(&json!({ "a": big }), &outputs(&[]))
            .unwrap_err();
        assert_eq!(
            error,
            TemplateError::TooLarge(WorkflowSpec::MAX_INPUT_BYTES)
        );
    }
}
