//! The planner of a workflow run's progress, as pure functions of the
//! graph and its nodes' statuses: which pending nodes start now, which can
//! never run (skipped), and — once every node ended — how the run ends.
//!
//! An edge *passes* once its parent ended as the edge asks (`success`:
//! succeeded; `failure`: failed; `always`: succeeded or failed); it is
//! *dead* once its parent ended otherwise (a skipped parent's edges are
//! all dead); an edge with a `when` passes only if its condition also
//! holds, and a condition that cannot be evaluated (a path that leads
//! nowhere) fails the node it leads to, naming why. A node with no
//! incoming edge starts at once; otherwise its
//! join rule decides: `all_passed` starts when every incoming edge passed
//! and is skipped when one is dead; `any_passed` starts when one passed
//! and is skipped when all are dead; `all_done` waits for every parent,
//! then starts if any edge passed. So a node with two parents runs once.

use cronbox_api::{EdgeCondition, JoinRule, NodeStatus, WorkflowRunStatus};

use super::definition::Graph;

/// What to do with a pending node now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Render its input and write its run.
    Start(usize),
    /// It can never run; the message says why.
    Skip(usize, String),
    /// An incoming edge's condition could not be evaluated; the message
    /// says why.
    Fail(usize, String),
}

/// Evaluates edge `i`'s `when` (called only for an edge that has one,
/// once its parent ended as the edge asks).
pub type WhenHolds<'a> = dyn Fn(usize) -> Result<bool, String> + 'a;

fn passes(on: EdgeCondition, parent: NodeStatus) -> Option<bool> {
    if !parent.is_done() {
        return None;
    }
    Some(match on {
        EdgeCondition::Success => parent == NodeStatus::Succeeded,
        EdgeCondition::Failure => parent == NodeStatus::Failed,
        EdgeCondition::Always => {
            matches!(parent, NodeStatus::Succeeded | NodeStatus::Failed)
        }
    })
}

/// Whether edge `i` passed (`None` while its parent runs); `Err` when its
/// condition could not be evaluated.
fn edge_passes(
    graph: &Graph,
    i: usize,
    status: &[NodeStatus],
    when: &WhenHolds<'_>,
) -> Option<Result<bool, String>> {
    let edge = &graph.edges[i];
    match passes(edge.on, status[edge.from])? {
        true if edge.when.is_some() => Some(when(i)),
        passed => Some(Ok(passed)),
    }
}

/// The steps due for the run whose nodes are at `status` (indexed as the
/// graph's nodes), edges' conditions evaluated by `when`.
pub fn next_steps(graph: &Graph, status: &[NodeStatus], when: &WhenHolds<'_>) -> Vec<Step> {
    let mut steps = Vec::new();
    for (node, incoming) in graph.incoming.iter().enumerate() {
        if status[node] != NodeStatus::Pending {
            continue;
        }
        if incoming.is_empty() {
            steps.push(Step::Start(node));
            continue;
        }
        let mut edges: Vec<Option<bool>> = Vec::with_capacity(incoming.len());
        let mut unevaluated = None;
        for &edge in incoming {
            match edge_passes(graph, edge, status, when) {
                None => edges.push(None),
                Some(Ok(passed)) => edges.push(Some(passed)),
                Some(Err(why)) => {
                    let from = &graph.nodes[graph.edges[edge].from].name;
                    unevaluated = Some(format!("the condition of the edge from {from:?}: {why}"));
                    break;
                }
            }
        }
        if let Some(why) = unevaluated {
            steps.push(Step::Fail(node, why));
            continue;
        }
        let passed = edges.iter().filter(|edge| **edge == Some(true)).count();
        let dead = edges.iter().filter(|edge| **edge == Some(false)).count();
        let all = edges.len();
        let rule = graph.nodes[node].join;
        let step = match rule {
            JoinRule::AllPassed if passed == all => Some(Step::Start(node)),
            JoinRule::AllPassed if dead > 0 => Some(Step::Skip(
                node,
                "a parent did not end as its edge asks (join: all_passed)".to_owned(),
            )),
            JoinRule::AnyPassed if passed > 0 => Some(Step::Start(node)),
            JoinRule::AnyPassed if dead == all => Some(Step::Skip(
                node,
                "no parent ended as its edge asks (join: any_passed)".to_owned(),
            )),
            JoinRule::AllDone if passed + dead == all && passed > 0 => Some(Step::Start(node)),
            JoinRule::AllDone if dead == all => Some(Step::Skip(
                node,
                "no parent ended as its edge asks (join: all_done)".to_owned(),
            )),
            _ => None,
        };
        steps.extend(step);
    }
    steps
}

/// How the run ends, once every node has ended (`None` before): failed if
/// a node failed and no edge out of it passed (nothing handled the
/// failure), succeeded otherwise.
pub fn outcome(
    graph: &Graph,
    status: &[NodeStatus],
    when: &WhenHolds<'_>,
) -> Option<WorkflowRunStatus> {
    if !status.iter().all(|status| status.is_done()) {
        return None;
    }
    let unhandled = (0..graph.nodes.len()).any(|node| {
        status[node] == NodeStatus::Failed
            && !(0..graph.edges.len()).any(|edge| {
                graph.edges[edge].from == node
                    && edge_passes(graph, edge, status, when) == Some(Ok(true))
            })
    });
    Some(if unhandled {
        WorkflowRunStatus::Failed
    } else {
        WorkflowRunStatus::Succeeded
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use NodeStatus::{Failed, Pending, Running, Skipped, Succeeded};
    use cronbox_api::{WorkflowEdge, WorkflowNode, WorkflowSpec};

    /// No edge of these graphs has a condition.
    fn no_when(_: usize) -> Result<bool, String> {
        unreachable!("no edge has a condition")
    }

    fn next_steps(graph: &Graph, status: &[NodeStatus]) -> Vec<Step> {
        super::next_steps(graph, status, &no_when)
    }

    fn outcome(graph: &Graph, status: &[NodeStatus]) -> Option<WorkflowRunStatus> {
        super::outcome(graph, status, &no_when)
    }

    fn graph(nodes: &[(&str, JoinRule)], edges: &[(&str, &str, EdgeCondition)]) -> Graph {
        Graph::check(&WorkflowSpec {
            description: String::new(),
            schedule: None,
            deadline_ms: None,
            nodes: nodes
                .iter()
                .map(|(name, join)| WorkflowNode {
                    name: name.to_string(),
                    job: "j".to_owned(),
                    join: *join,
                    ..WorkflowNode::default()
                })
                .collect(),
            edges: edges
                .iter()
                .map(|(from, to, on)| WorkflowEdge {
                    from: from.to_string(),
                    to: to.to_string(),
                    on: *on,
                    when: None,
                })
                .collect(),
        })
        .unwrap()
    }

    fn diamond(join: JoinRule) -> Graph {
        use EdgeCondition::Success;
        graph(
            &[
                ("a", JoinRule::default()),
                ("b", JoinRule::default()),
                ("c", JoinRule::default()),
                ("d", join),
            ],
            &[
                ("a", "b", Success),
                ("a", "c", Success),
                ("b", "d", Success),
                ("c", "d", Success),
            ],
        )
    }

    #[test]
    fn roots_start_then_a_join_of_two_parents_starts_once_both_succeeded() {
        let graph = diamond(JoinRule::AllPassed);
        assert_eq!(
            next_steps(&graph, &[Pending, Pending, Pending, Pending]),
            [Step::Start(0)]
        );
        assert_eq!(
            next_steps(&graph, &[Succeeded, Pending, Pending, Pending]),
            [Step::Start(1), Step::Start(2)]
        );
        assert_eq!(
            next_steps(&graph, &[Succeeded, Succeeded, Running, Pending]),
            []
        );
        assert_eq!(
            next_steps(&graph, &[Succeeded, Succeeded, Succeeded, Pending]),
            [Step::Start(3)]
        );
        assert_eq!(
            outcome(&graph, &[Succeeded, Succeeded, Succeeded, Running]),
            None
        );
        assert_eq!(
            outcome(&graph, &[Succeeded; 4]),
            Some(WorkflowRunStatus::Succeeded)
        );
    }

    #[test]
    fn join_rules_decide_on_a_failed_parent() {
        let failed_b = [Succeeded, Failed, Running, Pending];
        let both_ended = [Succeeded, Failed, Succeeded, Pending];
        // All passed: skipped as soon as one edge is dead.
        assert!(matches!(
            next_steps(&diamond(JoinRule::AllPassed), &failed_b)[..],
            [Step::Skip(3, _)]
        ));
        // Any passed: waits for the other parent, then starts.
        assert_eq!(next_steps(&diamond(JoinRule::AnyPassed), &failed_b), []);
        assert_eq!(
            next_steps(&diamond(JoinRule::AnyPassed), &both_ended),
            [Step::Start(3)]
        );
        // All done: waits for every parent, then starts (one edge passed).
        assert_eq!(next_steps(&diamond(JoinRule::AllDone), &failed_b), []);
        assert_eq!(
            next_steps(&diamond(JoinRule::AllDone), &both_ended),
            [Step::Start(3)]
        );
        // Nothing handled b's failure: the run failed.
        assert_eq!(
            outcome(
                &diamond(JoinRule::AllDone),
                &[Succeeded, Failed, Succeeded, Succeeded]
            ),
            Some(WorkflowRunStatus::Failed)
        );
    }

    #[test]
    fn a_failure_edge_runs_its_handler_and_the_run_succeeds() {
        use EdgeCondition::{Failure, Success};
        let graph = graph(
            &[
                ("load", JoinRule::default()),
                ("next", JoinRule::default()),
                ("notify", JoinRule::default()),
            ],
            &[("load", "next", Success), ("load", "notify", Failure)],
        );
        let steps = next_steps(&graph, &[Failed, Pending, Pending]);
        assert!(
            matches!(steps[..], [Step::Skip(1, _), Step::Start(2)]),
            "{steps:?}"
        );
        assert_eq!(
            outcome(&graph, &[Failed, Skipped, Succeeded]),
            Some(WorkflowRunStatus::Succeeded)
        );
        // On success the handler is skipped, and the run succeeds.
        let steps = next_steps(&graph, &[Succeeded, Pending, Pending]);
        assert!(
            matches!(steps[..], [Step::Start(1), Step::Skip(2, _)]),
            "{steps:?}"
        );
        assert_eq!(
            outcome(&graph, &[Succeeded, Succeeded, Skipped]),
            Some(WorkflowRunStatus::Succeeded)
        );
    }

    #[test]
    fn a_condition_on_an_edge_passes_it_holds_skips_or_fails_its_node() {
        let mut spec = WorkflowSpec {
            nodes: ["check", "big", "small"]
                .iter()
                .map(|name| WorkflowNode {
                    name: name.to_string(),
                    job: "j".to_owned(),
                    ..WorkflowNode::default()
                })
                .collect(),
            ..WorkflowSpec::default()
        };
        for (to, when) in [
            ("big", "nodes.check.output.n > 10"),
            ("small", "nodes.check.output.n <= 10"),
        ] {
            spec.edges.push(WorkflowEdge {
                from: "check".to_owned(),
                to: to.to_owned(),
                on: EdgeCondition::Success,
                when: Some(when.to_owned()),
            });
        }
        let graph = Graph::check(&spec).unwrap();
        // Edge 0 holds, edge 1 does not: big starts, small is skipped.
        let holds = |edge: usize| Ok(edge == 0);
        let steps = super::next_steps(&graph, &[Succeeded, Pending, Pending], &holds);
        assert!(
            matches!(steps[..], [Step::Start(1), Step::Skip(2, _)]),
            "{steps:?}"
        );
        // A condition that cannot be evaluated fails its node, saying why.
        let broken = |_: usize| Err("`nodes.check.output.n` is missing".to_owned());
        let steps = super::next_steps(&graph, &[Succeeded, Pending, Pending], &broken);
        assert_eq!(
            steps[0],
            Step::Fail(
                1,
                "the condition of the edge from \"check\": `nodes.check.output.n` is missing"
                    .to_owned()
            )
        );
        // Not evaluated before its parent ended as the edge asks.
        assert_eq!(
            super::next_steps(&graph, &[Running, Pending, Pending], &broken),
            []
        );
    }
}
