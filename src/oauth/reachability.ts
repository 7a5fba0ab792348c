// Whether svc can fetch the metadata documents of today's best-known MCP clients. Claude and Codex sign in with a
// document on claude.ai or chatgpt.com whenever svc advertises documents, and never fall back to registration, so
// an svc without egress to those hosts stops every such sign-in at an error page: `svc check` says so ahead.

export const WELL_KNOWN_METADATA_HOSTS = ['claude.ai', 'chatgpt.com', 'vscode.dev'] as const;

/** Hosts that gave no HTTPS answer at all within `timeoutMs` (any status counts as an answer); checked at once. */
export async function unreachableHosts(hosts: readonly string[] = WELL_KNOWN_METADATA_HOSTS, timeoutMs = 3000): Promise<string[]> {
  const answers = await Promise.all(
    hosts.map((host) =>
      fetch(`https://${host}/`, { method: 'HEAD', redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) }).then(
        (res) => {
          void res.body?.cancel();
          return true;
        },
        () => false,
      ),
    ),
  );
  return hosts.filter((_, i) => !answers[i]);
}
