CREATE INDEX `oauth_codes_grant` ON `oauth_codes` (`grant_id`);--> statement-breakpoint
CREATE INDEX `oauth_refresh_grant` ON `oauth_refresh_tokens` (`grant_id`);