CREATE TABLE `signing_keys` (
	`kid` text PRIMARY KEY NOT NULL,
	`private_sealed` text NOT NULL,
	`public_jwk` text NOT NULL,
	`created_at` integer NOT NULL,
	`retired_at` integer
);
