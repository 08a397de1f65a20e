-- name: SessionDeleteExpired :execrows
-- scs/pgxstore reads and writes the rows; this only sweeps the dead ones.
DELETE FROM sessions WHERE expiry < now();
