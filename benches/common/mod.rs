//! What the benches share: the statistics and the verdicts they print.
#![allow(dead_code)]

pub mod stdio;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// "ok", or how far above the target a figure is.
pub fn verdict(value: f64, target: f64, unit: &str, decimals: usize) -> String {
    if value <= target {
        "ok".to_string()
    } else {
        format!(
            "MISS by {:.decimals$} {unit} ({:.1}x)",
            value - target,
            value / target
        )
    }
}

pub fn find_in_path(path: &OsString, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
