CREATE TABLE `upstream_revocations` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`user_id` integer NOT NULL,
	`upstream` text NOT NULL,
	`server` text NOT NULL,
	`issuer` text NOT NULL,
	`client_id` text NOT NULL,
	`access_sealed` text NOT NULL,
	`refresh_sealed` text,
	`queued_at` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `upstream_revocations_next` ON `upstream_revocations` (`next_at`);