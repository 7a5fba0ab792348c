CREATE TABLE `server_keys` (
	`name` text PRIMARY KEY NOT NULL,
	`key` text NOT NULL
);
--> statement-breakpoint
-- The MCP session id key for configurations without a session secret: random, made here, never leaves the database.
INSERT INTO server_keys (name, key) VALUES ('mcp-session-id', lower(hex(randomblob(32))));
--> statement-breakpoint
-- Uids are unique and reserved regardless of letter case (CONTRACT §4): every uid ever made is in `uids`, and a
-- new user whose uid matches one of them in any case is refused. Existing users whose uids differ only by case
-- are left as they are (removing or renaming either would break someone's sign-in); no new one can be added.
DROP TRIGGER users_uid_reserved;
--> statement-breakpoint
CREATE TRIGGER users_uid_reserved BEFORE INSERT ON users
BEGIN
  SELECT RAISE(ABORT, 'svc: uid reserved') WHERE EXISTS (SELECT 1 FROM uids WHERE uid = NEW.uid COLLATE NOCASE);
END;
--> statement-breakpoint
CREATE INDEX uids_nocase ON uids (uid COLLATE NOCASE);
--> statement-breakpoint
CREATE INDEX users_uid_nocase ON users (uid COLLATE NOCASE);
