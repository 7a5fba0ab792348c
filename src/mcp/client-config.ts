/** The snippet an MCP client (Claude Code, VS Code, Cursor style) needs to reach svc with a token. */
export function mcpClientConfig(baseUrl: string, token: string): string {
  return JSON.stringify(
    { mcpServers: { svc: { type: 'http', url: `${baseUrl}/mcp`, headers: { Authorization: `Bearer ${token}` } } } },
    null,
    2,
  );
}
