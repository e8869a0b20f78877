//! A workflow definition checked into a [`Graph`]: names valid and unique,
//! edges between nodes that exist, no cycle, within the bounds, and each
//! node's input template, fan-out path and incoming edges' conditions
//! reading only the workflow's input and the node's own ancestors (and
//! `item`/`index` only in a fanned-out node's input). Every refusal names
//! the node or edge at fault. Whether each
//! node's job exists is the service's to check (it reads the store).

use std::collections::{HashMap, HashSet, VecDeque};

use cronbox_api::{EdgeCondition, JoinRule, WorkflowSpec};

use super::condition::Condition;
use super::path::Path;
use super::template::Template;

/// A checked definition: nodes by index, edges between indices.
#[derive(Debug, Clone)]
pub struct Graph {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
    /// Each node's incoming edges (indices into `edges`).
    pub incoming: Vec<Vec<usize>>,
}

#[derive(Debug, Clone)]
pub struct GraphNode {
    pub name: String,
    /// The name of the job it runs (empty for a module node: see
    /// [`GraphNode::job_name`]).
    pub job: String,
    /// The module it runs as a job the workflow owns, if it is a module
    /// node.
    pub module: Option<String>,
    pub param: Option<Template>,
    pub join: JoinRule,
    /// Fan-out: the array it runs its job once per element of.
    pub for_each: Option<Path>,
    /// With `for_each`: most of its runs in progress at once.
    pub concurrency: usize,
}

#[derive(Debug, Clone)]
pub struct GraphEdge {
    pub from: usize,
    pub to: usize,
    pub on: EdgeCondition,
    /// And only when this holds.
    pub when: Option<Condition>,
}

/// The name of the job a module node `node` of workflow `workflow` runs
/// as: the workflow owns it.
pub fn owned_job_name(workflow: &str, node: &str) -> String {
    format!("{workflow}.{node}")
}

impl GraphNode {
    /// The name of the job the node runs, in workflow `workflow`.
    pub fn job_name(&self, workflow: &str) -> String {
        match self.module {
            Some(_) => owned_job_name(workflow, &self.name),
            None => self.job.clone(),
        }
    }
}

/// A definition refused: `field` names the node or edge (`nodes[2].name`,
/// `edges[4].to`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DefinitionError {
    pub field: String,
    pub message: String,
}

fn refuse(field: impl Into<String>, message: impl Into<String>) -> DefinitionError {
    DefinitionError {
        field: field.into(),
        message: message.into(),
    }
}

/// Whether `name` may name a node (or a workflow): 1 to 64 letters,
/// digits, `-` or `_`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Graph {
    /// Checks `spec`.
    pub fn check(spec: &WorkflowSpec) -> Result<Graph, DefinitionError> {
        if spec.nodes.is_empty() {
            return Err(refuse("nodes", "a workflow needs at least one node"));
        }
        if spec.nodes.len() > WorkflowSpec::MAX_NODES {
            return Err(refuse(
                "nodes",
                format!(
                    "{} nodes; a workflow has at most {}",
                    spec.nodes.len(),
                    WorkflowSpec::MAX_NODES
                ),
            ));
        }
        if spec.edges.len() > WorkflowSpec::MAX_EDGES {
            return Err(refuse(
                "edges",
                format!(
                    "{} edges; a workflow has at most {}",
                    spec.edges.len(),
                    WorkflowSpec::MAX_EDGES
                ),
            ));
        }
        let mut index = HashMap::new();
        let mut nodes = Vec::with_capacity(spec.nodes.len());
        for (i, node) in spec.nodes.iter().enumerate() {
            if !valid_name(&node.name) {
                return Err(refuse(
                    format!("nodes[{i}].name"),
                    format!(
                        "node name {:?} must be 1 to 64 letters, digits, '-' or '_'",
                        node.name
                    ),
                ));
            }
            if index.insert(node.name.as_str(), i).is_some() {
                return Err(refuse(
                    format!("nodes[{i}].name"),
                    format!("two nodes are named {:?}", node.name),
                ));
            }
            match (node.job.trim().is_empty(), &node.module) {
                (true, None) => {
                    return Err(refuse(
                        format!("nodes[{i}].job"),
                        format!("node {:?} names no job (nor a module)", node.name),
                    ));
                }
                (false, Some(_)) => {
                    return Err(refuse(
                        format!("nodes[{i}].module"),
                        format!("node {:?} names a job and a module: give one", node.name),
                    ));
                }
                (false, None) if node.settings.is_some() => {
                    return Err(refuse(
                        format!("nodes[{i}].settings"),
                        format!(
                            "node {:?}: settings go with a module (a job has its own)",
                            node.name
                        ),
                    ));
                }
                _ => {}
            }
            let param = match &node.param {
                Some(text) if text.len() > WorkflowSpec::MAX_INPUT_BYTES => {
                    return Err(refuse(
                        format!("nodes[{i}].param"),
                        format!(
                            "node {:?}: the param is over {} bytes",
                            node.name,
                            WorkflowSpec::MAX_INPUT_BYTES
                        ),
                    ));
                }
                Some(text) => Some(Template::parse(text).map_err(|error| {
                    refuse(
                        format!("nodes[{i}].param"),
                        format!("node {:?}: {error}", node.name),
                    )
                })?),
                None => None,
            };
            let field = |what: &str| format!("nodes[{i}].{what}");
            let for_each = match &node.for_each {
                None => None,
                Some(written) => {
                    let bare = written
                        .trim()
                        .strip_prefix("{{")
                        .and_then(|rest| rest.strip_suffix("}}"))
                        .unwrap_or(written)
                        .trim();
                    let path = Path::parse(bare).map_err(|error| {
                        refuse(field("for_each"), format!("node {:?}: {error}", node.name))
                    })?;
                    if path.reads_item() {
                        return Err(refuse(
                            field("for_each"),
                            format!(
                                "node {:?}: for_each reads `input` or `nodes.NAME.output`, not \
                                 its own item",
                                node.name
                            ),
                        ));
                    }
                    Some(path)
                }
            };
            let concurrency = match (node.concurrency, &for_each) {
                (None, _) => WorkflowSpec::DEFAULT_CONCURRENCY,
                (Some(_), None) => {
                    return Err(refuse(
                        field("concurrency"),
                        format!(
                            "node {:?}: concurrency applies to a fanned-out node (with for_each)",
                            node.name
                        ),
                    ));
                }
                (Some(n), Some(_)) if (1..=WorkflowSpec::MAX_CONCURRENCY).contains(&n) => n,
                (Some(n), Some(_)) => {
                    return Err(refuse(
                        field("concurrency"),
                        format!(
                            "node {:?}: concurrency {n} is outside 1-{}",
                            node.name,
                            WorkflowSpec::MAX_CONCURRENCY
                        ),
                    ));
                }
            };
            if for_each.is_none()
                && let Some(path) = param
                    .iter()
                    .flat_map(Template::paths)
                    .find(|path| path.reads_item())
            {
                return Err(refuse(
                    field("param"),
                    format!(
                        "node {:?}: `{}` is read only in a fanned-out node (with for_each)",
                        node.name,
                        path.written()
                    ),
                ));
            }
            nodes.push(GraphNode {
                name: node.name.clone(),
                job: node.job.clone(),
                module: node.module.clone(),
                param,
                join: node.join,
                for_each,
                concurrency: concurrency as usize,
            });
        }
        let mut edges = Vec::with_capacity(spec.edges.len());
        let mut incoming = vec![Vec::new(); nodes.len()];
        let mut seen = HashSet::new();
        for (i, edge) in spec.edges.iter().enumerate() {
            let end = |name: &str, side: &str| {
                index.get(name).copied().ok_or_else(|| {
                    refuse(
                        format!("edges[{i}].{side}"),
                        format!("edge {} → {}: no node {name:?}", edge.from, edge.to),
                    )
                })
            };
            let (from, to) = (end(&edge.from, "from")?, end(&edge.to, "to")?);
            if from == to {
                return Err(refuse(
                    format!("edges[{i}]"),
                    format!(
                        "edge {} → {}: a node cannot follow itself",
                        edge.from, edge.to
                    ),
                ));
            }
            if !seen.insert((from, to)) {
                return Err(refuse(
                    format!("edges[{i}]"),
                    format!("edge {} → {} is given twice", edge.from, edge.to),
                ));
            }
            let when = match &edge.when {
                None => None,
                Some(text) if text.len() > WorkflowSpec::MAX_CONDITION_BYTES => {
                    return Err(refuse(
                        format!("edges[{i}].when"),
                        format!(
                            "edge {} → {}: the condition is over {} bytes",
                            edge.from,
                            edge.to,
                            WorkflowSpec::MAX_CONDITION_BYTES
                        ),
                    ));
                }
                Some(text) => {
                    let condition = Condition::parse(text).map_err(|error| {
                        refuse(
                            format!("edges[{i}].when"),
                            format!("edge {} → {}: {error}", edge.from, edge.to),
                        )
                    })?;
                    if let Some(path) = condition.paths().into_iter().find(|p| p.reads_item()) {
                        return Err(refuse(
                            format!("edges[{i}].when"),
                            format!(
                                "edge {} → {}: a condition cannot read `{}`",
                                edge.from,
                                edge.to,
                                path.written()
                            ),
                        ));
                    }
                    Some(condition)
                }
            };
            incoming[to].push(edges.len());
            edges.push(GraphEdge {
                from,
                to,
                on: edge.on,
                when,
            });
        }
        let graph = Graph {
            nodes,
            edges,
            incoming,
        };
        graph.refuse_cycles()?;
        graph.refuse_reads_of_non_ancestors()?;
        Ok(graph)
    }

    /// The nodes in an order where every node comes after its parents, or
    /// the refusal naming a node on a cycle (Kahn's algorithm).
    fn refuse_cycles(&self) -> Result<(), DefinitionError> {
        let mut waiting: Vec<usize> = self.incoming.iter().map(Vec::len).collect();
        let mut ready: VecDeque<usize> =
            (0..self.nodes.len()).filter(|&n| waiting[n] == 0).collect();
        let mut placed = 0;
        while let Some(node) = ready.pop_front() {
            placed += 1;
            for edge in self.edges.iter().filter(|edge| edge.from == node) {
                waiting[edge.to] -= 1;
                if waiting[edge.to] == 0 {
                    ready.push_back(edge.to);
                }
            }
        }
        if placed == self.nodes.len() {
            return Ok(());
        }
        let on_cycle = (0..self.nodes.len())
            .find(|&n| waiting[n] > 0)
            .unwrap_or_default();
        Err(refuse(
            "edges",
            format!(
                "the edges form a cycle through node {:?}",
                self.nodes[on_cycle].name
            ),
        ))
    }

    /// The ancestors of `node` (every node with a path to it).
    pub fn ancestors(&self, node: usize) -> HashSet<usize> {
        let mut found = HashSet::new();
        let mut next = vec![node];
        while let Some(current) = next.pop() {
            for &edge in &self.incoming[current] {
                let parent = self.edges[edge].from;
                if found.insert(parent) {
                    next.push(parent);
                }
            }
        }
        found
    }

    fn refuse_reads_of_non_ancestors(&self) -> Result<(), DefinitionError> {
        for (i, node) in self.nodes.iter().enumerate() {
            let ancestors = self.ancestors(i);
            let is_ancestor = |read: &str| {
                self.node(read)
                    .is_some_and(|other| ancestors.contains(&other))
            };
            let reads = node
                .param
                .iter()
                .flat_map(Template::paths)
                .map(|path| ("param", path))
                .chain(node.for_each.iter().map(|path| ("for_each", path)));
            for (field, path) in reads {
                if let Some(read) = path.node()
                    && !is_ancestor(read)
                {
                    return Err(refuse(
                        format!("nodes[{i}].{field}"),
                        format!(
                            "node {:?} reads the output of {read:?}, which is not one of its ancestors",
                            node.name
                        ),
                    ));
                }
            }
            for &edge in &self.incoming[i] {
                let condition = self.edges[edge].when.iter().flat_map(Condition::paths);
                for read in condition.filter_map(Path::node) {
                    if !is_ancestor(read) {
                        return Err(refuse(
                            format!("edges[{edge}].when"),
                            format!(
                                "edge {} → {}: the condition reads the output of {read:?}, \
                                 which is not an ancestor of {:?}",
                                self.nodes[self.edges[edge].from].name, node.name, node.name
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The index of the node named `name`.
    pub fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|node| node.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronbox_api::{WorkflowEdge, WorkflowNode};

    pub(crate) fn spec(nodes: &[(&str, Option<&str>)], edges: &[(&str, &str)]) -> WorkflowSpec {
        WorkflowSpec {
            description: String::new(),
            schedule: None,
            deadline_ms: None,
            nodes: nodes
                .iter()
                .map(|(name, param)| WorkflowNode {
                    name: name.to_string(),
                    job: format!("job-{name}"),
                    param: param.map(str::to_owned),
                    ..WorkflowNode::default()
                })
                .collect(),
            edges: edges
                .iter()
                .map(|(from, to)| WorkflowEdge {
                    from: from.to_string(),
                    to: to.to_string(),
                    on: EdgeCondition::default(),
                    when: None,
                })
                .collect(),
        }
    }

    fn refusal(spec: &WorkflowSpec) -> String {
        Graph::check(spec).unwrap_err().to_string()
    }

    #[test]
    fn a_diamond_is_accepted_with_its_incoming_edges() {
        let graph = Graph::check(&spec(
            &[
                ("a", None),
                ("b", None),
                ("c", None),
                ("d", Some("{{ nodes.a.output }}")),
            ],
            &[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
        ))
        .unwrap();
        assert_eq!(graph.incoming[3].len(), 2);
        assert_eq!(graph.ancestors(3).len(), 3);
    }

    #[test]
    fn each_refusal_names_the_node_or_edge_at_fault() {
        assert_eq!(
            refusal(&spec(
                &[("a", None), ("b", None)],
                &[("a", "b"), ("b", "a")]
            )),
            "edges: the edges form a cycle through node \"a\""
        );
        assert_eq!(
            refusal(&spec(&[("a", None)], &[("a", "zz")])),
            "edges[0].to: edge a → zz: no node \"zz\""
        );
        assert_eq!(
            refusal(&spec(&[("a", None), ("a", None)], &[])),
            "nodes[1].name: two nodes are named \"a\""
        );
        assert_eq!(
            refusal(&spec(&[("a b", None)], &[])),
            "nodes[0].name: node name \"a b\" must be 1 to 64 letters, digits, '-' or '_'"
        );
        assert_eq!(
            refusal(&spec(
                &[("a", None), ("b", None)],
                &[("a", "b"), ("a", "b")]
            )),
            "edges[1]: edge a → b is given twice"
        );
        assert_eq!(
            refusal(&spec(
                &[("a", None), ("b", Some("{{ nodes.a.output }}"))],
                &[]
            )),
            "nodes[1].param: node \"b\" reads the output of \"a\", which is not one of its ancestors"
        );
        assert!(
            refusal(&spec(&[("a", Some("{{ oops"))], &[]))
                .starts_with("nodes[0].param: node \"a\": a `{{`")
        );
        assert_eq!(
            refusal(&spec(&[], &[])),
            "nodes: a workflow needs at least one node"
        );
        let many: Vec<String> = (0..=WorkflowSpec::MAX_NODES)
            .map(|i| format!("n{i}"))
            .collect();
        let many: Vec<(&str, Option<&str>)> =
            many.iter().map(|name| (name.as_str(), None)).collect();
        assert_eq!(
            refusal(&spec(&many, &[])),
            "nodes: 201 nodes; a workflow has at most 200"
        );
    }

    #[test]
    fn fan_out_and_conditions_are_refused_naming_the_field() {
        let mut fanned = spec(&[("a", None), ("b", Some("{{ item.id }}"))], &[("a", "b")]);
        assert_eq!(
            refusal(&fanned),
            "nodes[1].param: node \"b\": `item.id` is read only in a fanned-out node (with for_each)"
        );
        fanned.nodes[1].for_each = Some("nodes.a.output.rows".to_owned());
        assert!(Graph::check(&fanned).is_ok());
        fanned.nodes[1].concurrency = Some(0);
        assert_eq!(
            refusal(&fanned),
            "nodes[1].concurrency: node \"b\": concurrency 0 is outside 1-100"
        );
        fanned.nodes[1].concurrency = None;
        fanned.nodes[1].for_each = Some("item".to_owned());
        assert!(refusal(&fanned).starts_with("nodes[1].for_each: node \"b\": for_each reads"));
        fanned.nodes[1].for_each = Some("nodes.b.output".to_owned());
        assert_eq!(
            refusal(&fanned),
            "nodes[1].for_each: node \"b\" reads the output of \"b\", which is not one of its ancestors"
        );
        let mut conditional = spec(&[("a", None), ("b", None), ("c", None)], &[("a", "b")]);
        conditional.edges[0].when = Some("nodes.c.output > 1".to_owned());
        assert_eq!(
            refusal(&conditional),
            "edges[0].when: edge a → b: the condition reads the output of \"c\", which is not an ancestor of \"b\""
        );
        conditional.edges[0].when = Some("nodes.a.output >".to_owned());
        assert!(refusal(&conditional).starts_with("edges[0].when: edge a → b: at byte 16"));
        conditional.nodes[2].concurrency = Some(3);
        conditional.edges[0].when = None;
        assert!(
            refusal(&conditional)
                .starts_with("nodes[2].concurrency: node \"c\": concurrency applies")
        );
    }
}
