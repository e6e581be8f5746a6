//! The ids a store lists: only those that can be a run's id.

/// Whether `id`, found at `place` (a runs folder, the shared store), can be a run's id. A
/// store lists only those: an id is spliced into file names, links and messages, and one
/// made by other means than mekara (a file copied in, a row inserted by hand) with markup,
/// a `/`, a space or a newline in it is no run of mekara's. Such an id is skipped with a
/// warning that says why and what to do, once per id and process (a viewer lists the store
/// every half second).
pub(crate) fn listed_id(id: &str, place: &str) -> bool {
    /// The ids warned about: the first thousand (a folder of junk warns no more after them).
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if crate::engine::runs::is_run_id(id) {
        return true;
    }
    let first = WARNED.lock().is_ok_and(|mut warned| {
        let first = warned.len() < 1000 && !warned.iter().any(|w| w == id);
        if first {
            warned.push(id.to_string());
        }
        first
    });
    if first {
        tracing::warn!(
            "skipped `{}` in {place}: it is not a run id (ASCII letters, digits, `-` and `_`, at most 64), so mekara did not make it; rename or remove it",
            id.escape_debug()
        );
    }
    false
}
