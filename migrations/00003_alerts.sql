-- +goose Up
-- Alert state: one row per alert (a rule, a project and a scope such as a service and model),
-- pending, firing or resolved. It outlives a restart, so a new leader neither re-pages nor forgets.
-- labels are the alert's full label set; figures the numbers of the last evaluation that found it.
CREATE TABLE alert_state (
    fingerprint      text PRIMARY KEY,
    rule             text NOT NULL,
    kind             text NOT NULL,
    severity         text NOT NULL,
    project_id       bigint NOT NULL REFERENCES projects (id),
    state            text NOT NULL CHECK (state IN ('pending', 'firing', 'resolved')),
    labels           jsonb NOT NULL,
    summary          text NOT NULL,
    description      text NOT NULL,
    figures          jsonb NOT NULL,
    active_since     timestamptz NOT NULL,
    fired_at         timestamptz,
    resolved_at      timestamptz,
    evaluated_at     timestamptz NOT NULL,
    last_notified_at timestamptz
);
CREATE INDEX alert_state_rule ON alert_state (rule, project_id);
CREATE INDEX alert_state_project ON alert_state (project_id, state);

-- The notification log: per alert and receiver, the last status sent and how it went
-- (delivered, rejected by a 4xx, or failed after every retry). Deduplication reads it.
CREATE TABLE alert_notifications (
    fingerprint text NOT NULL,
    receiver    text NOT NULL,
    status      text NOT NULL CHECK (status IN ('firing', 'resolved')),
    outcome     text NOT NULL CHECK (outcome IN ('delivered', 'rejected', 'failed')),
    at          timestamptz NOT NULL,
    PRIMARY KEY (fingerprint, receiver)
);

-- Every time an alert fired or resolved, for GET /v1/alerts.
CREATE TABLE alert_history (
    project_id   bigint NOT NULL REFERENCES projects (id),
    id           bigint GENERATED ALWAYS AS IDENTITY,
    fingerprint  text NOT NULL,
    rule         text NOT NULL,
    kind         text NOT NULL,
    severity     text NOT NULL,
    status       text NOT NULL CHECK (status IN ('firing', 'resolved')),
    at           timestamptz NOT NULL,
    active_since timestamptz NOT NULL,
    labels       jsonb NOT NULL,
    summary      text NOT NULL,
    description  text NOT NULL,
    figures      jsonb NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX alert_history_recent ON alert_history (project_id, at DESC);

-- How each receiver's deliveries went, by name only (never its URL). last_error is redacted.
CREATE TABLE alert_receivers (
    name            text PRIMARY KEY,
    kind            text NOT NULL,
    sent            bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    last_success_at timestamptz,
    last_failure_at timestamptz,
    last_error      text NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE alert_receivers;
DROP TABLE alert_history;
DROP TABLE alert_notifications;
DROP TABLE alert_state;
