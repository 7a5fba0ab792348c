CREATE TABLE `oauth_assertions` (
	`id` text PRIMARY KEY NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `oauth_assertions_expiry` ON `oauth_assertions` (`expires_at`);