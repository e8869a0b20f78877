//! A fanned-out node as pure decisions: its elements' inputs from the
//! array its `for_each` reads (each rendered from its param with `item`
//! and `index`, or the element itself without a param), what its
//! elements' ends make of it, and its output — their outputs as one JSON
//! array, in order. Bounded: at most [`WorkflowSpec::MAX_FAN_OUT`]
//! elements, and [`WorkflowSpec::MAX_FAN_OUT_BYTES`] of inputs and of
//! output.

use cronbox_api::{ItemCounts, ItemRun, NodeStatus, WorkflowSpec};
use serde_json::Value;

use super::definition::GraphNode;
use super::path::{Values, describe};

/// The inputs of `node`'s elements, or why it cannot fan out (the node
/// fails saying so).
pub fn expand(node: &GraphNode, values: &Values<'_>) -> Result<Vec<String>, String> {
    let Some(path) = &node.for_each else {
        return Err("it has no for_each".to_owned());
    };
    let array = path
        .read(values)
        .map_err(|error| format!("for_each: {error}"))?;
    let Value::Array(items) = &*array else {
        return Err(format!(
            "for_each: `{}` is {}, not an array",
            path.written(),
            describe(&array)
        ));
    };
    if items.len() > WorkflowSpec::MAX_FAN_OUT {
        return Err(format!(
            "for_each: `{}` has {} elements; a node fans out over at most {}",
            path.written(),
            items.len(),
            WorkflowSpec::MAX_FAN_OUT
        ));
    }
    let mut inputs = Vec::with_capacity(items.len());
    let mut total = 0;
    for (index, item) in items.iter().enumerate() {
        let input = match &node.param {
            Some(template) => template
                .render(&Values {
                    item: Some((item, index)),
                    ..*values
                })
                .map_err(|error| format!("element {index}: its input does not render: {error}"))?,
            None => match item {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            },
        };
        total += input.len();
        if total > WorkflowSpec::MAX_FAN_OUT_BYTES {
            return Err(format!(
                "its elements' inputs are over {} bytes in all",
                WorkflowSpec::MAX_FAN_OUT_BYTES
            ));
        }
        inputs.push(input);
    }
    Ok(inputs)
}

/// What a fanned-out node's elements make of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FanOut {
    /// Start more elements (while fewer than the concurrency run).
    Fill,
    /// An element failed: start no more; the node fails once those
    /// running end.
    Draining,
    /// Every element ended: the node ends.
    Done,
}

/// Where a fanned-out node with `counts` is.
pub fn state(counts: &ItemCounts) -> FanOut {
    let ended = counts.total - counts.running - pending(counts);
    if counts.failed > 0 {
        if counts.running == 0 {
            FanOut::Done
        } else {
            FanOut::Draining
        }
    } else if ended == counts.total {
        FanOut::Done
    } else {
        FanOut::Fill
    }
}

fn pending(counts: &ItemCounts) -> i64 {
    // Skipped and cancelled elements are neither running nor counted
    // as ended by success or failure; they only follow a failure.
    counts.total - counts.running - counts.succeeded - counts.failed
}

/// How a fanned-out node whose elements all ended (or drained after a
/// failure) ends: succeeded with their outputs as a JSON array in order
/// (an output that is JSON text as JSON, other text as a string), or
/// failed naming the first element that failed.
pub fn gather(items: &[ItemRun]) -> Result<String, String> {
    if let Some(failed) = items.iter().find(|item| item.status == NodeStatus::Failed) {
        return Err(format!(
            "element {} of {} failed{}",
            failed.index,
            items.len(),
            failed
                .message
                .as_deref()
                .map(|message| format!(": {message}"))
                .unwrap_or_default()
        ));
    }
    let mut outputs = Vec::with_capacity(items.len());
    for item in items {
        let text = item.output.as_deref().unwrap_or_default();
        outputs.push(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())));
    }
    let output = Value::Array(outputs).to_string();
    if output.len() > WorkflowSpec::MAX_FAN_OUT_BYTES {
        return Err(format!(
            "its elements' outputs are {} bytes as one array, over the {} a fanned-out node's \
             output may have",
            output.len(),
            WorkflowSpec::MAX_FAN_OUT_BYTES
        ));
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::Graph;
    use crate::workflow::path::Outputs;
    use cronbox_api::{WorkflowNode, WorkflowSpec};
    use serde_json::json;

    fn node(for_each: &str, param: Option<&str>) -> GraphNode {
        let spec = WorkflowSpec {
            nodes: vec![WorkflowNode {
                name: "each".to_owned(),
                job: "j".to_owned(),
                param: param.map(str::to_owned),
                for_each: Some(for_each.to_owned()),
                ..WorkflowNode::default()
            }],
            ..WorkflowSpec::default()
        };
        Graph::check(&spec).unwrap().nodes.remove(0)
    }

    fn expand_over(node: &GraphNode, input: Value) -> Result<Vec<String>, String> {
        expand(
            node,
            &Values {
                input: &input,
                outputs: &Outputs::default(),
                item: None,
            },
        )
    }

    #[test]
    fn each_element_gets_its_input_from_the_param_or_itself() {
        let input = json!({"days": ["mon", {"d": "tue"}, 3]});
        assert_eq!(
            expand_over(&node("input.days", None), input.clone()).unwrap(),
            ["mon", r#"{"d":"tue"}"#, "3"]
        );
        assert_eq!(
            expand_over(
                &node("{{ input.days }}", Some("{{ index }}: {{ item }}")),
                input
            )
            .unwrap(),
            ["0: mon", r#"1: {"d":"tue"}"#, "2: 3"]
        );
    }

    #[test]
    fn what_cannot_fan_out_says_why() {
        assert_eq!(
            expand_over(&node("input.days", None), json!({"days": 3})).unwrap_err(),
            "for_each: `input.days` is a number, not an array"
        );
        assert!(
            expand_over(&node("input.days", None), json!({}))
                .unwrap_err()
                .starts_with("for_each: `input.days` is missing")
        );
        let many: Vec<i64> = (0..=WorkflowSpec::MAX_FAN_OUT as i64).collect();
        assert_eq!(
            expand_over(&node("input.days", None), json!({"days": many})).unwrap_err(),
            "for_each: `input.days` has 1001 elements; a node fans out over at most 1000"
        );
        assert!(
            expand_over(
                &node("input.days", Some("{{ item.x }}")),
                json!({"days": [{"x": 1}, {"y": 2}]})
            )
            .unwrap_err()
            .starts_with("element 1: its input does not render: `{{ item.x }}` is missing")
        );
    }

    fn item(index: i64, status: NodeStatus, output: Option<&str>) -> ItemRun {
        ItemRun {
            index,
            status,
            run_id: None,
            input: String::new(),
            output: output.map(str::to_owned),
            message: (status == NodeStatus::Failed).then(|| "boom".to_owned()),
        }
    }

    #[test]
    fn outputs_gather_in_order_and_a_failure_fails_the_node_after_draining() {
        use NodeStatus::{Failed, Skipped, Succeeded};
        assert_eq!(
            gather(&[
                item(0, Succeeded, Some(r#"{"n": 1}"#)),
                item(1, Succeeded, Some("two")),
                item(2, Succeeded, Some("[3]")),
            ])
            .unwrap(),
            r#"[{"n":1},"two",[3]]"#
        );
        assert_eq!(
            gather(&[
                item(0, Succeeded, Some("1")),
                item(1, Failed, None),
                item(2, Skipped, None)
            ])
            .unwrap_err(),
            "element 1 of 3 failed: boom"
        );
        let counts = |running, succeeded, failed| ItemCounts {
            total: 5,
            running,
            succeeded,
            failed,
        };
        assert_eq!(state(&counts(2, 1, 0)), FanOut::Fill);
        assert_eq!(state(&counts(2, 1, 1)), FanOut::Draining);
        assert_eq!(state(&counts(0, 1, 1)), FanOut::Done);
        assert_eq!(state(&counts(0, 5, 0)), FanOut::Done);
    }
}
