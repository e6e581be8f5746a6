//! Test cases of workflows (`mekara test`): the case files beside the scripts, the scratch
//! project each case runs in, the answers an in-process stand-in for the agent gives, and
//! the comparison of what came out with what the case expects. The command itself (finding
//! the cases, running them in parallel, the report) is `crate::cli::test`.
//!
//! - [`case`] reads and checks a case file; [`find`] finds the project's and the bundled ones;
//! - [`fixture`] makes a case's scratch project (`mekara eval` makes its trials' with it);
//! - [`run`] holds the stand-ins for the agent and the person, and a run's report;
//! - [`compare`] holds a report against what the case expects; [`update`] writes a report
//!   into the case file (`--update`);
//! - [`cassette`] turns a VCR cassette into a case.

pub(crate) mod case;
pub(crate) mod cassette;
pub(crate) mod compare;
pub(crate) mod find;
pub(crate) mod fixture;
pub(crate) mod run;
pub(crate) mod update;
