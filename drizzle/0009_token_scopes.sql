ALTER TABLE `tokens` ADD `scopes` text DEFAULT 'mcp' NOT NULL;--> statement-breakpoint
-- Tokens made before scopes existed keep what they could do then: personal tokens the token API (and, for an
-- admin owner without a label restriction, the admin API) besides MCP; OAuth access tokens only MCP.
UPDATE `tokens` SET `scopes` = CASE
  WHEN `grant_id` IS NOT NULL THEN 'mcp'
  WHEN `labels` IS NULL AND (SELECT `admin` FROM `users` WHERE `users`.`id` = `tokens`.`user_id`) = 1 THEN 'mcp api admin'
  ELSE 'mcp api'
END;
