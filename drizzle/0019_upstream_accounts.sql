CREATE TABLE `upstream_accounts` (
	`user_id` integer NOT NULL,
	`upstream` text NOT NULL,
	`server` text NOT NULL,
	`issuer` text NOT NULL,
	`client_id` text NOT NULL,
	`access_sealed` text NOT NULL,
	`refresh_sealed` text,
	`expires_at` integer,
	`scope` text NOT NULL,
	`state` text NOT NULL,
	`connected_at` integer NOT NULL,
	`last_used_at` integer,
	`refreshed_at` integer,
	PRIMARY KEY(`user_id`, `upstream`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `upstream_accounts_upstream` ON `upstream_accounts` (`upstream`);--> statement-breakpoint
CREATE TABLE `upstream_clients` (
	`upstream` text PRIMARY KEY NOT NULL,
	`server` text NOT NULL,
	`issuer` text NOT NULL,
	`client_id` text NOT NULL,
	`client_secret_sealed` text,
	`kind` text NOT NULL,
	`registered_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `upstream_connects` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` integer NOT NULL,
	`session_id` text,
	`upstream` text NOT NULL,
	`verifier_sealed` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `upstream_connects_user` ON `upstream_connects` (`user_id`);