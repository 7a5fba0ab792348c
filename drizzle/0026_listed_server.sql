-- The server each upstream was last listed from, successfully: `review = auto` approves only what a server's first
-- listing holds, even when that listing had none of a kind. Null until the upstream's next listing; until then its
-- rows, if it has any from this server (or from before svc kept the server), say that it was listed.
ALTER TABLE `upstream_status` ADD `listed_server` text;
