ALTER TABLE `oauth_refresh_tokens` ADD `parent_id` text;--> statement-breakpoint
CREATE INDEX `oauth_refresh_parent` ON `oauth_refresh_tokens` (`parent_id`);