-- +goose Up
-- Dashboard sessions, in the table scs/pgxstore documents: the token is the cookie
-- value, data is scs's encoded map, expiry is when the session dies.
CREATE TABLE sessions (
	token TEXT PRIMARY KEY,
	data BYTEA NOT NULL,
	expiry TIMESTAMPTZ NOT NULL
);

CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- Failed sign-ins counted per key ("account:<email>" or "address:<ip>") over a
-- window, so every oncehook process shares one count: throttling that lived in one
-- process's memory would give an attacker a fresh budget per process and restart.
CREATE TABLE login_throttle (
    key          text        PRIMARY KEY,
    failures     integer     NOT NULL DEFAULT 0,
    window_start timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE login_throttle;
DROP TABLE sessions;
