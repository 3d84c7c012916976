/** A ping on a `/mcp` session by its id, as a client that still holds the id would send it. */
export async function pingSession(url: URL, sessionId: string, key: string): Promise<{ status: number; body: { error?: { message: string } } }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  return { status: res.status, body: (await res.json()) as { error?: { message: string } } };
}
