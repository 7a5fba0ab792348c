ALTER TABLE `upstream_accounts` ADD `listed_tools` text;--> statement-breakpoint
ALTER TABLE `upstream_accounts` ADD `listed_at` integer;