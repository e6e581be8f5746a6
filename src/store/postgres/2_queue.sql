-- Schema version 2: the queue of unattended runs that `mekara submit` adds and `mekara worker`
-- drains.
--
-- A queued run has its id from the start (`mekara submit` prints it), and a row in
-- `mekara_runs` only once a worker has started it, so there is no foreign key between them.
-- A worker claims a row by taking a session-level advisory lock on it and marking it
-- `claimed`: the lock, not the row, says the worker is alive (the server drops it when the
-- worker's connection ends), so a claim whose lock is free is taken up by the next worker.
-- `heartbeat_at` is for people (`mekara runs`) and for hosts whose connection hangs.
CREATE TABLE mekara_queue (
    project text NOT NULL,
    run_id text NOT NULL,
    queue text NOT NULL,
    script text NOT NULL,
    arguments text NOT NULL,
    -- The flags of `mekara run` that name the agent (`--agent claude`, `--agent-command CMD`)
    -- and the limits given to `mekara submit`, as the words of its command line.
    agent text[] NOT NULL,
    limits text[] NOT NULL,
    state text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'claimed', 'done', 'failed', 'cancelled')),
    cancel_requested boolean NOT NULL DEFAULT false,
    submitted_host text NOT NULL,
    submitted_user text NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    worker_host text,
    worker text,
    claimed_at timestamptz,
    heartbeat_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    finished_at timestamptz,
    -- Why it failed or was cancelled, in a line.
    note text,
    PRIMARY KEY (project, run_id)
);

-- The claim's scan: the oldest queued rows of a project's queue.
CREATE INDEX mekara_queue_waiting ON mekara_queue (project, queue, submitted_at)
    WHERE state IN ('queued', 'claimed');
