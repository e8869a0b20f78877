-- People: a login name unique across tenants, the tenant and role it acts
-- as, the password as an argon2id PHC string.
CREATE TABLE app_user (
    name           TEXT    PRIMARY KEY,
    tenant         TEXT    NOT NULL,
    role           TEXT    NOT NULL,
    password_hash  TEXT    NOT NULL,
    created_at_ms  BIGINT  NOT NULL
);
CREATE INDEX app_user_by_tenant ON app_user (tenant, name);
-- Logged-in sessions, by the sha256 of the cookie's value; the CSRF token
-- every state-changing request of the session carries.
CREATE TABLE user_session (
    id_hash        TEXT    PRIMARY KEY,
    user_name      TEXT    NOT NULL,
    csrf_token     TEXT    NOT NULL,
    created_at_ms  BIGINT  NOT NULL,
    expires_at_ms  BIGINT  NOT NULL
);
CREATE INDEX user_session_by_user ON user_session (user_name);
-- A token carries a role; a user's own tokens name the user (the
-- operator's tenant tokens, made before roles, are tenant admins).
ALTER TABLE api_token ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE api_token ADD COLUMN user_name TEXT;
