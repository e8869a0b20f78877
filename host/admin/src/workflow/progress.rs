//! The planner of a workflow run's progress, as pure functions of the
//! graph and its nodes' statuses: which pending nodes start now, which can
//! never run (skipped), and — once every node ended — how the run ends.
//!
//! An edge *passes* once its parent ended as the edge asks (`success`:
//! succeeded; `failure`: failed; `always`: succeeded or failed); it is
//! *dead* once its parent ended otherwise (a skipped parent's edges are
//! all dead). A node with no incoming edge starts at once; otherwise its
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
}

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

/// The steps due for the run whose nodes are at `status` (indexed as the
/// graph's nodes).
pub fn next_steps(graph: &Graph, status: &[NodeStatus]) -> Vec<Step> {
    let mut steps = Vec::new();
    for (node, incoming) in graph.incoming.iter().enumerate() {
        if status[node] != NodeStatus::Pending {
            continue;
        }
        if incoming.is_empty() {
            steps.push(Step::Start(node));
            continue;
        }
        let edges: Vec<Option<bool>> = incoming
            .iter()
            .map(|&edge| {
                let edge = graph.edges[edge];
                passes(edge.on, status[edge.from])
            })
            .collect();
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
pub fn outcome(graph: &Graph, status: &[NodeStatus]) -> Option<WorkflowRunStatus> {
    if !status.iter().all(|status| status.is_done()) {
        return None;
    }
    let unhandled = (0..graph.nodes.len()).any(|node| {
        status[node] == NodeStatus::Failed
            && !graph
                .edges
                .iter()
                .any(|edge| edge.from == node && passes(edge.on, NodeStatus::Failed) == Some(true))
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
                    param: None,
                    join: *join,
                })
                .collect(),
            edges: edges
                .iter()
                .map(|(from, to, on)| WorkflowEdge {
                    from: from.to_string(),
                    to: to.to_string(),
                    on: *on,
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
}
