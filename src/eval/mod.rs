//! Evals (`mekara eval`): what an eval is made of and keeps, apart from running it. The case
//! file ([`cases`]), the eval's folder with its plan and each trial's result ([`record`]),
//! and what the results add up to ([`stats`]). The command line runs the trials
//! (`crate::cli`); the viewer shows the folder (`crate::ui`). Nothing here starts a process.

pub(crate) mod cases;
pub(crate) mod record;
pub(crate) mod stats;
