//! The file store's index of runs, kept beside the journals so that listing runs costs what
//! is listed, not every byte ever journaled (docs/design.md, "The runs index"):
//!
//! It is the folder `index/` among the journals:
//!
//! - `open/RUN_ID`: an empty marker for each run not known to have ended, made before its
//!   journal and again whenever a run is taken up to be driven. `status` and `resume {}`
//!   summarize only these runs.
//! - `ended.jsonl`: the summary of each run that ended, one line each, written when it ends
//!   (its last line for an id wins), with the length and time of change its journal had
//!   then. `mekara runs` takes an ended run's line instead of reading its journal, unless
//!   the run has a marker (it was taken up again) or its journal changed since.
//!
//! Everything here is a cache of what the journals say: a marker whose run turns out to have
//! ended is cleared when it is read, a run with no marker and no line is read from its
//! journal (and then indexed when it has ended), and a project with no `open/` folder (its
//! runs made before the index) has the index built from its journals at the first listing.
//! Only a run that a mekara without the index starts while the index exists is missed by
//! `status` until it ends; `mekara runs` still lists it from its journal.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::runs::RunSummary;

/// A line of `ended.jsonl`.
#[derive(Serialize, Deserialize)]
struct Ended {
    /// The journal's length and time of change (ns since the epoch) when it ended.
    len: u64,
    changed: u128,
    summary: RunSummary,
}

/// A journal's length and time of change, to tell whether it changed since it was indexed.
pub(crate) fn stamp(journal: &Path) -> Option<(u64, u128)> {
    let meta = std::fs::metadata(journal).ok()?;
    let changed = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some((meta.len(), changed))
}

/// The index of the runs in one folder.
pub(crate) struct RunsIndex {
    /// `index/` in the runs' folder.
    dir: PathBuf,
}

impl RunsIndex {
    /// The index of the runs in `runs`.
    pub(crate) fn of(runs: &Path) -> RunsIndex {
        RunsIndex {
            dir: runs.join("index"),
        }
    }

    fn open_dir(&self) -> PathBuf {
        self.dir.join("open")
    }

    fn ended_file(&self) -> PathBuf {
        self.dir.join("ended.jsonl")
    }

    /// Notes that run `id` may be going on (it is made, or taken up), when the index is
    /// kept. A failure only costs the index (the run is read from its journal then).
    pub(crate) fn going_on(&self, id: &str) {
        let open = self.open_dir();
        if open.is_dir()
            && let Err(e) = std::fs::File::create(open.join(id))
        {
            tracing::debug!("runs index: cannot mark {id} open: {e}");
        }
    }

    /// Notes the summary of a run that ended, with its journal's [`stamp`], then clears its
    /// marker.
    pub(crate) fn ended(&self, summary: &RunSummary, journal: &Path) {
        if !summary.state.has_ended() || !self.open_dir().is_dir() {
            return;
        }
        let Some((len, changed)) = stamp(journal) else {
            return;
        };
        let line = Ended {
            len,
            changed,
            summary: summary.clone(),
        };
        if let Err(e) = append_line(&self.ended_file(), &line) {
            tracing::debug!("runs index: cannot note {} ended: {e}", summary.id);
            return;
        }
        let _ = std::fs::remove_file(self.open_dir().join(&summary.id));
    }

    /// Forgets run `id` (it was removed): its marker goes; its line is left, and ignored
    /// with no journal beside it.
    pub(crate) fn forget(&self, id: &str) {
        let _ = std::fs::remove_file(self.open_dir().join(id));
    }

    /// The runs marked as going on; `None` when the index is not kept here yet.
    pub(crate) fn going_on_ids(&self) -> Option<HashSet<String>> {
        let entries = std::fs::read_dir(self.open_dir()).ok()?;
        Some(
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect(),
        )
    }

    /// The summaries of the runs noted as ended, by id, each with the [`stamp`] its
    /// journal had then: of every run, or only of the runs `wanted` (whose lines alone are
    /// parsed, so that listing the newest runs does not parse the whole history).
    pub(crate) fn ended_summaries(
        &self,
        wanted: Option<&HashSet<&str>>,
    ) -> HashMap<String, ((u64, u128), RunSummary)> {
        let Ok(text) = std::fs::read_to_string(self.ended_file()) else {
            return HashMap::new();
        };
        // A torn last line (a killed writer) does not parse, and is left out.
        text.lines()
            .filter(|line| {
                wanted.is_none_or(|wanted| line_id(line).is_none_or(|id| wanted.contains(id)))
            })
            .filter_map(|line| serde_json::from_str::<Ended>(line).ok())
            .map(|e| (e.summary.id.clone(), ((e.len, e.changed), e.summary)))
            .collect()
    }

    /// Builds the index from `runs` (in `journals`), every run of the folder summarized from
    /// its journal:
    /// the markers are made in a folder of their own, which then becomes `open/` in one
    /// rename, so that a reader sees the whole index or none.
    pub(crate) fn build(&self, runs: &[RunSummary], journals: &Path) {
        let building = self
            .dir
            .join(format!("open.building-{}", std::process::id()));
        let built = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(&building)?;
            // Lines of an earlier index that lost its markers are read again from the
            // journals.
            let _ = std::fs::remove_file(self.ended_file());
            let mut ended = String::new();
            for run in runs {
                let stamped = stamp(&journals.join(format!("{}.jsonl", run.id)));
                if let (true, Some((len, changed))) = (run.state.has_ended(), stamped) {
                    let line = Ended {
                        len,
                        changed,
                        summary: run.clone(),
                    };
                    ended.push_str(&serde_json::to_string(&line).map_err(std::io::Error::other)?);
                    ended.push('\n');
                } else {
                    std::fs::File::create(building.join(&run.id))?;
                }
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.ended_file())?
                .write_all(ended.as_bytes())?;
            std::fs::rename(&building, self.open_dir())
        })();
        if let Err(e) = built {
            // Another process built it first, or the folder is read-only: runs are then
            // read from their journals, as before the index.
            tracing::debug!("runs index: not built in {}: {e}", self.dir.display());
            let _ = std::fs::remove_dir_all(&building);
        }
    }
}

/// The run id of a line of `ended.jsonl`, read without parsing the line: serde writes
/// [`Ended`]'s fields in order, so the summary's `id` is the first `"id":"` of the line. `None`
/// for a line not of that shape, which is then parsed whole.
fn line_id(line: &str) -> Option<&str> {
    let start = line.find(r#""summary":{"id":""#)? + r#""summary":{"id":""#.len();
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// Appends `ended` as one line, with one write.
fn append_line(path: &Path, ended: &Ended) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(ended).map_err(std::io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id read from a line without parsing it is the id serde wrote, so a line the
    /// newest runs want is never skipped.
    #[test]
    fn line_id_reads_the_id_serde_writes() {
        let summary: RunSummary = serde_json::from_value(serde_json::json!({
            "id": "20261126-223512-0a1f", "script": "one", "state": "Completed",
            "started_at": 1, "steps": 2, "last_at": 3, "bytes": 4,
        }))
        .expect("a summary");
        let line = serde_json::to_string(&Ended {
            len: 10,
            changed: 11,
            summary,
        })
        .expect("json");
        assert_eq!(line_id(&line), Some("20261126-223512-0a1f"));
        assert_eq!(line_id(r#"{"len":1}"#), None);
    }
}
