-- Schema version 3: the database checks run ids too.
--
-- mekara makes ids of ASCII letters, digits, `-` and `_`, at most 64 (`engine::runs::is_run_id`),
-- and names files, links and lock keys after them: a row written by other means with any other
-- id (markup, a `/`, a space, a non-ASCII letter) is refused here. `mekara_events.run_id`
-- follows `mekara_runs.id` by its foreign key. `NOT VALID`: the rows already there are not
-- checked, so the migration never fails on old data; mekara skips such a row when it lists
-- runs, with a warning that names it.
ALTER TABLE mekara_runs ADD CONSTRAINT mekara_runs_id_is_a_run_id
    CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$') NOT VALID;

ALTER TABLE mekara_queue ADD CONSTRAINT mekara_queue_run_id_is_a_run_id
    CHECK (run_id ~ '^[A-Za-z0-9_-]{1,64}$') NOT VALID;
