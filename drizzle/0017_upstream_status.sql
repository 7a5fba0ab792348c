CREATE TABLE `upstream_status` (
	`upstream` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`checked_at` integer NOT NULL
);
