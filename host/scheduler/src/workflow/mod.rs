//! Workflows as pure values: a definition checked into a [`Graph`]
//! (`definition`), the paths into a run's values (`path`), the small
//! template language a node's input is written in (`template`), an
//! edge's condition (`condition`), the planner of a workflow run's
//! progress (`progress`): from the nodes' statuses, which start, which
//! are skipped or fail, and how the run ends; a fanned-out node's
//! elements (`fan_out`); and a schedule's fires (`firing`). No I/O
//! here: the scheduler drives them (`scheduler/workflows.rs`) and the
//! store keeps what they decide.

pub mod condition;
pub mod definition;
pub mod fan_out;
pub mod firing;
pub mod path;
pub mod progress;
pub mod template;

pub use definition::{DefinitionError, Graph};
pub use progress::{Step, WhenHolds, next_steps, outcome};
pub use template::{Template, TemplateError};
