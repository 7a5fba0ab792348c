-- Invariants enforced by the database itself, for every writer and every driver.
-- A uid is reserved forever: every created uid is recorded in `uids`, and no user may take a recorded uid.
CREATE TRIGGER users_uid_reserved BEFORE INSERT ON users
BEGIN
  SELECT RAISE(ABORT, 'svc: uid reserved') WHERE EXISTS (SELECT 1 FROM uids WHERE uid = NEW.uid);
END;
--> statement-breakpoint
CREATE TRIGGER users_uid_record AFTER INSERT ON users
BEGIN
  INSERT INTO uids (uid, reserved_at) VALUES (NEW.uid, NEW.created_at);
END;
--> statement-breakpoint
CREATE TRIGGER users_uid_stable BEFORE UPDATE OF uid ON users WHEN NEW.uid IS NOT OLD.uid
BEGIN
  SELECT RAISE(ABORT, 'svc: uid is stable');
END;
--> statement-breakpoint
-- Removing a user ends everything that acts as them, whether or not PRAGMA foreign_keys is on for this connection.
CREATE TRIGGER users_cascade AFTER DELETE ON users
BEGIN
  DELETE FROM sessions WHERE user_id = OLD.id;
  DELETE FROM tokens WHERE user_id = OLD.id;
  DELETE FROM identities WHERE user_id = OLD.id;
END;
--> statement-breakpoint
-- Full-text index over items, kept in step by triggers.
CREATE VIRTUAL TABLE items_fts USING fts5(title, text, content='items', content_rowid='seq', tokenize='unicode61 remove_diacritics 2');
--> statement-breakpoint
-- item_labels is derived from items.labels (canonical: [a-z0-9_.:-] joined by commas, so the JSON built here is safe).
CREATE TRIGGER items_after_insert AFTER INSERT ON items
BEGIN
  INSERT INTO items_fts (rowid, title, text) VALUES (NEW.seq, NEW.title, NEW.text);
  INSERT INTO item_labels (item_seq, label)
    SELECT NEW.seq, value FROM json_each('["' || replace(NEW.labels, ',', '","') || '"]') WHERE NEW.labels <> '';
END;
--> statement-breakpoint
CREATE TRIGGER items_after_update_text AFTER UPDATE OF title, text ON items
BEGIN
  INSERT INTO items_fts (items_fts, rowid, title, text) VALUES ('delete', OLD.seq, OLD.title, OLD.text);
  INSERT INTO items_fts (rowid, title, text) VALUES (NEW.seq, NEW.title, NEW.text);
END;
--> statement-breakpoint
CREATE TRIGGER items_after_update_labels AFTER UPDATE OF labels ON items
BEGIN
  DELETE FROM item_labels WHERE item_seq = OLD.seq;
  INSERT INTO item_labels (item_seq, label)
    SELECT NEW.seq, value FROM json_each('["' || replace(NEW.labels, ',', '","') || '"]') WHERE NEW.labels <> '';
END;
--> statement-breakpoint
CREATE TRIGGER items_after_delete AFTER DELETE ON items
BEGIN
  INSERT INTO items_fts (items_fts, rowid, title, text) VALUES ('delete', OLD.seq, OLD.title, OLD.text);
  DELETE FROM item_labels WHERE item_seq = OLD.seq;
END;
