CREATE TABLE `audit` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` integer NOT NULL,
	`actor` text,
	`via` text NOT NULL,
	`action` text NOT NULL,
	`target` text,
	`detail` text,
	`peer` text
);
--> statement-breakpoint
CREATE INDEX `audit_at` ON `audit` (`at`);