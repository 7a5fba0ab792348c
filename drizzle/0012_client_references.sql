CREATE INDEX `oauth_grants_client` ON `oauth_grants` (`client_id`);--> statement-breakpoint
CREATE INDEX `oauth_requests_client` ON `oauth_requests` (`client_id`);