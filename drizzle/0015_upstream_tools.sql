CREATE TABLE `upstream_tools` (
	`upstream` text NOT NULL,
	`name` text NOT NULL,
	`definition` text NOT NULL,
	`fingerprint` text NOT NULL,
	`approved_definition` text,
	`approved_fingerprint` text,
	`labels` text,
	`state` text NOT NULL,
	`first_seen_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`upstream`, `name`)
);
