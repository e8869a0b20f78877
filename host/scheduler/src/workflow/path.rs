//! Paths into a workflow run's values, shared by templates and edge
//! conditions: `input` (the workflow's input), `nodes.NAME.output` (an
//! ancestor's output), and in a fanned-out node `item` (its element) and
//! `index` (the element's place, from 0); then `.field` or `.0` steps into
//! JSON. A path that leads nowhere is an error naming the path and what
//! it found instead, never an empty value.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

/// Where a path starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    Input,
    Node(String),
    Item,
    Index,
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    pub root: Root,
    steps: Vec<String>,
    written: String,
}

/// Why a path does not parse or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error(
        "`{0}` names nothing: a path is `input`, `nodes.NAME.output`, `item` or `index`, \
         then `.field` or `.0` steps"
    )]
    BadPath(String),
    #[error("`{path}` is missing: {why}")]
    Missing { path: String, why: String },
}

/// What paths read in one node's run: the workflow's input, the outputs
/// of nodes that ended, and in a fanned-out node its element and the
/// element's index.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    pub input: &'a Value,
    pub outputs: &'a Outputs,
    pub item: Option<(&'a Value, usize)>,
}

/// The outputs of a workflow run's nodes that ended, each parsed once
/// when it is added (JSON text as JSON, other text as a string), so that
/// every hole and condition reading it walks the parsed value instead of
/// parsing the text again.
#[derive(Debug, Clone, Default)]
pub struct Outputs(HashMap<String, Value>);

impl Outputs {
    /// Adds (or replaces) `node`'s output, the text it ended with.
    pub fn insert(&mut self, node: String, output: &str) {
        let value =
            serde_json::from_str(output).unwrap_or_else(|_| Value::String(output.to_owned()));
        self.0.insert(node, value);
    }

    fn get(&self, node: &str) -> Option<&Value> {
        self.0.get(node)
    }
}

impl<N: Into<String>, T: AsRef<str>> FromIterator<(N, T)> for Outputs {
    fn from_iter<I: IntoIterator<Item = (N, T)>>(outputs: I) -> Outputs {
        let mut parsed = Outputs::default();
        for (node, output) in outputs {
            parsed.insert(node.into(), output.as_ref());
        }
        parsed
    }
}

impl Path {
    /// Parses `written` (already trimmed).
    pub fn parse(written: &str) -> Result<Path, PathError> {
        let bad = || PathError::BadPath(written.to_owned());
        let mut words = written.split('.');
        let root = match words.next() {
            Some("input") => Root::Input,
            Some("item") => Root::Item,
            Some("index") => Root::Index,
            Some("nodes") => {
                let node = words
                    .next()
                    .filter(|name| !name.is_empty())
                    .ok_or_else(bad)?;
                if words.next() != Some("output") {
                    return Err(bad());
                }
                Root::Node(node.to_owned())
            }
            _ => return Err(bad()),
        };
        let steps: Vec<String> = words.map(str::to_owned).collect();
        if steps.iter().any(|step| {
            step.is_empty()
                || !step
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }) || (root == Root::Index && !steps.is_empty())
        {
            return Err(bad());
        }
        Ok(Path {
            root,
            steps,
            written: written.to_owned(),
        })
    }

    /// The path as written.
    pub fn written(&self) -> &str {
        &self.written
    }

    /// The node whose output it reads, if any.
    pub fn node(&self) -> Option<&str> {
        match &self.root {
            Root::Node(node) => Some(node),
            _ => None,
        }
    }

    /// Whether it reads a fanned-out node's element or index.
    pub fn reads_item(&self) -> bool {
        matches!(self.root, Root::Item | Root::Index)
    }

    /// The value it leads to in `values`, borrowed from them (a walk of
    /// its steps: nothing is parsed or copied).
    pub fn read<'v>(&self, values: &Values<'v>) -> Result<Cow<'v, Value>, PathError> {
        let missing = |why: String| PathError::Missing {
            path: self.written.clone(),
            why,
        };
        let mut value: &'v Value = match &self.root {
            Root::Input => values.input,
            Root::Node(node) => values
                .outputs
                .get(node)
                .ok_or_else(|| missing(format!("node {node:?} has no output")))?,
            Root::Item => {
                values
                    .item
                    .ok_or_else(|| missing("only a fanned-out node has an item".to_owned()))?
                    .0
            }
            Root::Index => {
                let (_, index) = values
                    .item
                    .ok_or_else(|| missing("only a fanned-out node has an index".to_owned()))?;
                return Ok(Cow::Owned(Value::from(index)));
            }
        };
        for step in &self.steps {
            let next = match value {
                Value::Object(fields) => fields.get(step),
                Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            value = next.ok_or_else(|| missing(format!("no `{step}` in {}", describe(value))))?;
        }
        Ok(Cow::Borrowed(value))
    }
}

/// A value in a few words, for a message about it.
pub fn describe(value: &Value) -> String {
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
