-- name: UserSetPassword :execrows
-- Also re-enables the account: used where someone is handed a fresh login.
UPDATE users SET password_hash = @password_hash, disabled = false WHERE lower(email) = lower(@email);
