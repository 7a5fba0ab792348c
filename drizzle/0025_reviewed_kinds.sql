-- Prompts and apps are reviewed like tools (CONTRACT §6.3): every row gets a kind, the ones there are tools, and the key
-- is (upstream, kind, name). Nothing refers to this table, so its copy needs no PRAGMA foreign_keys (which svc's
-- migration transaction could not change anyway).
CREATE TABLE `__new_upstream_tools` (
	`upstream` text NOT NULL,
	`kind` text DEFAULT 'tool' NOT NULL,
	`name` text NOT NULL,
	`definition` text NOT NULL,
	`fingerprint` text NOT NULL,
	`approved_definition` text,
	`approved_fingerprint` text,
	`labels` text,
	`state` text NOT NULL,
	`server` text,
	`held` text,
	`first_seen_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`upstream`, `kind`, `name`)
);
--> statement-breakpoint
INSERT INTO `__new_upstream_tools`("upstream", "kind", "name", "definition", "fingerprint", "approved_definition", "approved_fingerprint", "labels", "state", "server", "held", "first_seen_at", "updated_at") SELECT "upstream", 'tool', "name", "definition", "fingerprint", "approved_definition", "approved_fingerprint", "labels", "state", "server", "held", "first_seen_at", "updated_at" FROM `upstream_tools`;--> statement-breakpoint
DROP TABLE `upstream_tools`;--> statement-breakpoint
ALTER TABLE `__new_upstream_tools` RENAME TO `upstream_tools`;
