-- Schema version 1: runs and their events.
--
-- A run belongs to a project (the same id on every host with a checkout of it) and records
-- the host and user that created it. Its events are the lines of its journal file, kept as
-- the same text (`body`, without the newline), numbered from 1 as the file's lines are: a
-- new event kind needs no change here, and an exported run is byte for byte its file.
CREATE TABLE mekara_runs (
    project text NOT NULL,
    id text NOT NULL,
    host text NOT NULL,
    os_user text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, id)
);

CREATE TABLE mekara_events (
    project text NOT NULL,
    run_id text NOT NULL,
    line integer NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (project, run_id, line),
    FOREIGN KEY (project, run_id) REFERENCES mekara_runs (project, id) ON DELETE CASCADE
);
