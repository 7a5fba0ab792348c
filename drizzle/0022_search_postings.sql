CREATE TABLE `search_docs` (
	`item_seq` integer PRIMARY KEY NOT NULL,
	`item_id` text NOT NULL,
	`set_id` integer NOT NULL,
	`length` integer NOT NULL,
	`terms` text NOT NULL,
	FOREIGN KEY (`item_seq`) REFERENCES `items`(`seq`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `search_docs_item_id` ON `search_docs` (`item_id`);--> statement-breakpoint
CREATE TABLE `search_sets` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`labels` text NOT NULL,
	`docs` integer NOT NULL,
	`length` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `search_sets_labels_unique` ON `search_sets` (`labels`);--> statement-breakpoint
-- The postings: one row per (term, label set, item) with the term's count in the item and the item's length, so a
-- search reads only the label sets its caller may see and scores every match with BM25 over what that caller sees.
-- svc adds them (store/search.ts) with its own tokenizer; items written before this migration are indexed in the
-- background once svc serves.
CREATE TABLE `search_postings` (
	`term` text NOT NULL,
	`set_id` integer NOT NULL,
	`item_seq` integer NOT NULL,
	`tf` integer NOT NULL,
	`len` integer NOT NULL,
	PRIMARY KEY (`term`, `set_id`, `item_seq`)
) WITHOUT ROWID;
--> statement-breakpoint
-- How many items of each label set hold a term: a search's word weights and the order its words are joined in.
-- Keyed by label set first, so the counts one item changes lie close together.
CREATE TABLE `search_terms` (
	`set_id` integer NOT NULL,
	`term` text NOT NULL,
	`docs` integer NOT NULL,
	PRIMARY KEY (`set_id`, `term`)
) WITHOUT ROWID;
--> statement-breakpoint
-- Items to index: every item an svc without the index wrote, and any item written by another writer than svc (an
-- older svc during an upgrade, plain SQL). svc's background job indexes them; svc's own writes index at once.
CREATE TABLE `search_pending` (
	`item_seq` integer PRIMARY KEY NOT NULL REFERENCES `items`(`seq`) ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO search_pending (item_seq) SELECT seq FROM items;
--> statement-breakpoint
-- FTS5 is no longer used: its index read every match of a word, hidden ones included, before the access rule.
DROP TRIGGER `items_after_insert`;
--> statement-breakpoint
DROP TRIGGER `items_after_update_text`;
--> statement-breakpoint
DROP TRIGGER `items_after_delete`;
--> statement-breakpoint
DROP TABLE `items_fts`;
--> statement-breakpoint
-- Labels are text, whoever writes them: a label set read back as bytes would stop every search. Items plain SQL
-- stored otherwise are made text first (their item_labels follow, by the trigger on labels).
UPDATE items SET labels = CAST(labels AS TEXT) WHERE typeof(labels) <> 'text';
--> statement-breakpoint
CREATE TRIGGER items_labels_text BEFORE INSERT ON items WHEN typeof(NEW.labels) <> 'text'
BEGIN
  SELECT RAISE(ABORT, 'items.labels must be text: ACL labels joined by commas');
END;
--> statement-breakpoint
CREATE TRIGGER items_labels_text_update BEFORE UPDATE OF labels ON items WHEN typeof(NEW.labels) <> 'text'
BEGIN
  SELECT RAISE(ABORT, 'items.labels must be text: ACL labels joined by commas');
END;
--> statement-breakpoint
-- item_labels and the search index are keyed by seq: an item whose seq changed (foreign keys off) would lose its
-- labels, and so be readable by everyone.
CREATE TRIGGER items_seq_stable BEFORE UPDATE OF seq ON items WHEN NEW.seq IS NOT OLD.seq
BEGIN
  SELECT RAISE(ABORT, 'items.seq cannot change: the ACL labels and the search index are kept by it');
END;
--> statement-breakpoint
-- An inserted item has no index rows yet. Any left for its seq, or for its id under another seq (a REPLACE by a
-- writer with foreign keys off deletes the old row without its triggers or the cascade), go.
CREATE TRIGGER items_after_insert AFTER INSERT ON items
BEGIN
  INSERT INTO item_labels (item_seq, label)
    SELECT NEW.seq, value FROM json_each('["' || replace(NEW.labels, ',', '","') || '"]') WHERE NEW.labels <> '';
  DELETE FROM search_docs WHERE item_seq = NEW.seq;
  DELETE FROM search_docs WHERE item_id = NEW.id;
  INSERT INTO search_pending (item_seq) SELECT NEW.seq WHERE NOT EXISTS (SELECT 1 FROM search_pending WHERE item_seq = NEW.seq);
END;
--> statement-breakpoint
-- An item's index rows go when its words or labels change or it goes, whoever writes it (an older svc, plain SQL),
-- by the words it was indexed under (search_docs.terms): so no row outlives what it stands for. svc adds the new ones.
CREATE TRIGGER search_docs_after_delete AFTER DELETE ON search_docs
BEGIN
  DELETE FROM search_postings
    WHERE term IN (SELECT value FROM json_each(OLD.terms)) AND set_id = OLD.set_id AND item_seq = OLD.item_seq;
  UPDATE search_terms SET docs = docs - 1 WHERE set_id = OLD.set_id AND term IN (SELECT value FROM json_each(OLD.terms));
  DELETE FROM search_terms WHERE set_id = OLD.set_id AND term IN (SELECT value FROM json_each(OLD.terms)) AND docs <= 0;
  UPDATE search_sets SET docs = docs - 1, length = length - OLD.length WHERE id = OLD.set_id;
  DELETE FROM search_sets WHERE id = OLD.set_id AND docs <= 0;
END;
--> statement-breakpoint
CREATE TRIGGER items_unindex_after_update AFTER UPDATE OF id, title, text, labels ON items
WHEN OLD.id IS NOT NEW.id OR OLD.title IS NOT NEW.title OR OLD.text IS NOT NEW.text OR OLD.labels IS NOT NEW.labels
BEGIN
  DELETE FROM search_docs WHERE item_seq = OLD.seq;
  INSERT INTO search_pending (item_seq) SELECT NEW.seq WHERE NOT EXISTS (SELECT 1 FROM search_pending WHERE item_seq = NEW.seq);
END;
--> statement-breakpoint
CREATE TRIGGER items_after_delete AFTER DELETE ON items
BEGIN
  DELETE FROM item_labels WHERE item_seq = OLD.seq;
  DELETE FROM search_docs WHERE item_seq = OLD.seq;
END;
