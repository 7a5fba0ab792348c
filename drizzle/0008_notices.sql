CREATE TABLE `notice_cursor` (
	`id` integer PRIMARY KEY NOT NULL,
	`audit_id` integer NOT NULL,
	`expiry_until` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `notices` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`key` text NOT NULL,
	`user_id` integer NOT NULL,
	`kind` text NOT NULL,
	`detail` text NOT NULL,
	`created_at` integer NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`claimed_until` integer,
	`done_at` integer,
	`outcome` text,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `notices_key_unique` ON `notices` (`key`);--> statement-breakpoint
CREATE INDEX `notices_due` ON `notices` (`done_at`,`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `tokens_expiry` ON `tokens` (`expires_at`);