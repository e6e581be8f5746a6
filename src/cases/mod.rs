//! Test cases of workflows (`mekara test`): the case files beside the scripts, the scratch
//! project each case runs in, running a case with no agent and comparing what came out with
//! what the case expects. The command itself is `crate::cli::test`.
//!
//! - [`fixture`] makes a case's scratch project (`mekara eval` makes its trials' with it);

pub(crate) mod fixture;
