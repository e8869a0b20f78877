//! The template language of a node's input: literal text with `{{ path }}`
//! holes (a path as `super::path` reads it: `input`, `nodes.NAME.output`,
//! and in a fanned-out node `item` and `index`, then `.field` or `.0`
//! steps into JSON). Nothing else: no code, no filters, no loops. A value
//! that is text is written as it is, any other JSON value as compact JSON.
//! A path that leads nowhere fails the render naming the path (never an
//! empty string), and so does a render past
//! [`WorkflowSpec::MAX_INPUT_BYTES`]. A template holds at most
//! [`WorkflowSpec::MAX_TEMPLATE_HOLES`] holes, and a hole reads a value
//! parsed once per run (see `path::Outputs`): rendering costs a walk of
//! each hole's steps and the bytes it writes.

use cronbox_api::WorkflowSpec;
use serde_json::Value;

use super::path::{Path, PathError, Values};

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

/// Why a template does not parse or render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("a `{{{{` at byte {0} is not closed by `}}}}`")]
    Unclosed(usize),
    #[error(
        "`{{{{ {0} }}}}` names nothing: a path is `input`, `nodes.NAME.output`, `item` or \
         `index`, then `.field` or `.0` steps"
    )]
    BadPath(String),
    #[error("`{{{{ {path} }}}}` is missing: {why}")]
    Missing { path: String, why: String },
    #[error("the rendered input is over {0} bytes")]
    TooLarge(usize),
    #[error("it has more than {0} `{{{{ }}}}` holes")]
    TooManyHoles(usize),
}

impl From<PathError> for TemplateError {
    fn from(error: PathError) -> TemplateError {
        match error {
            PathError::BadPath(path) => TemplateError::BadPath(path),
            PathError::Missing { path, why } => TemplateError::Missing { path, why },
        }
    }
}

impl Template {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut holes = 0;
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
            holes += 1;
            if holes > WorkflowSpec::MAX_TEMPLATE_HOLES {
                return Err(TemplateError::TooManyHoles(
                    WorkflowSpec::MAX_TEMPLATE_HOLES,
                ));
            }
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

    /// The paths of its holes.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.parts.iter().filter_map(|part| match part {
            Part::Hole(path) => Some(path),
            Part::Text(_) => None,
        })
    }

    /// Renders with `values`.
    pub fn render(&self, values: &Values<'_>) -> Result<String, TemplateError> {
        let mut rendered = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => rendered.push_str(text),
                Part::Hole(path) => match &*path.read(values)? {
                    Value::String(text) => rendered.push_str(text),
                    other => rendered.push_str(&other.to_string()),
                },
            }
            if rendered.len() > WorkflowSpec::MAX_INPUT_BYTES {
                return Err(TemplateError::TooLarge(WorkflowSpec::MAX_INPUT_BYTES));
            }
        }
        Ok(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::super::path::Outputs;
    use super::*;
    use serde_json::json;

    fn outputs(pairs: &[(&str, &str)]) -> Outputs {
        pairs.iter().copied().collect()
    }

    fn render(
        template: &Template,
        input: &Value,
        outputs: &Outputs,
    ) -> Result<String, TemplateError> {
        template.render(&Values {
            input,
            outputs,
            item: None,
        })
    }

    #[test]
    fn holes_read_the_input_and_ancestors_outputs_as_json_or_text() {
        let template =
            Template::parse("day={{ input.day }} rows={{nodes.extract.output.rows}} first={{ nodes.extract.output.items.0 }} note={{ nodes.say.output }}")
                .unwrap();
        let rendered = render(
            &template,
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
        let read: Vec<&str> = template.paths().filter_map(Path::node).collect();
        assert_eq!(read, ["extract", "extract", "say"]);
    }

    #[test]
    fn a_missing_field_fails_naming_the_path_never_an_empty_string() {
        let template = Template::parse("{{ nodes.extract.output.rows }}").unwrap();
        let error = render(
            &template,
            &json!({}),
            &outputs(&[("extract", r#"{"count": 3}"#)]),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`{{ nodes.extract.output.rows }}` is missing: no `rows` in an object with count"
        );
        let error = render(&template, &json!({}), &outputs(&[])).unwrap_err();
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
            render(
                &Template::parse("plain").unwrap(),
                &json!({}),
                &outputs(&[])
            )
            .unwrap(),
            "plain"
        );
    }

    #[test]
    fn a_template_holds_a_bounded_number_of_holes() {
        let at_most = "{{ input.a }}".repeat(WorkflowSpec::MAX_TEMPLATE_HOLES);
        assert!(Template::parse(&at_most).is_ok());
        let error = Template::parse(&format!("{at_most}{{{{ input.a }}}}")).unwrap_err();
        assert_eq!(
            error,
            TemplateError::TooManyHoles(WorkflowSpec::MAX_TEMPLATE_HOLES)
        );
        assert_eq!(error.to_string(), "it has more than 1000 `{{ }}` holes");
    }

    #[test]
    fn a_render_past_the_bound_fails() {
        let big = "x".repeat(40 * 1024);
        let template = Template::parse("{{ input.a }}{{ input.a }}").unwrap();
        let error = render(&template, &json!({ "a": big }), &outputs(&[])).unwrap_err();
        assert_eq!(
            error,
            TemplateError::TooLarge(WorkflowSpec::MAX_INPUT_BYTES)
        );
    }
}
