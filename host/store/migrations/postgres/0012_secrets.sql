-- Tenants' secrets, sealed (XChaCha20-Poly1305 under the admin's key, the
-- tenant and name as associated data); nonce and ciphertext in hex.
CREATE TABLE tenant_secret (
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    nonce TEXT NOT NULL,
    ciphertext TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);
-- The names of the secrets a job references (a JSON array).
ALTER TABLE job ADD COLUMN secrets TEXT NOT NULL DEFAULT '[]';
