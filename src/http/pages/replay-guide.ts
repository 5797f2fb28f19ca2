/**
 * The /docs page's guide to the replay WebSocket (it is not in the OpenAPI document: an upgrade, not a request).
 * Static HTML, no user text. Details: docs/api.md, "Replay in the venue's protocol".
 */
export const REPLAY_GUIDE = `<section id="replay">
  <h2>Replay in the venue's protocol</h2>
  <p>Point an existing client of the venue's market channel at
  <code>wss://&lt;host&gt;/v1/replay/ws/market?from=2025-03-02T09:00:00Z&amp;to=2025-03-02T10:00:00Z&amp;speed=60&amp;api_key=&lt;key&gt;</code>
  instead of <code>wss://ws-subscriptions-clob.polymarket.com/ws/market</code>; nothing else changes. It sends the
  venue's subscription (<code>{"assets_ids":[…],"type":"market"}</code>), later <code>subscribe</code>/<code>unsubscribe</code>
  operations and text <code>PING</code> (answered <code>PONG</code>), and receives the recorded frames of its assets in receive
  order, first each asset's book at <code>from</code> (rebuilt from the lake: <code>"hash":"pmlake-rebuilt"</code>).
  <code>speed</code>: 1 = as recorded, 60 = sixty times faster, 0 = as fast as the client reads. At <code>to</code> the socket
  closes with 1000. The key goes in <code>X-API-Key</code>, or in <code>api_key</code> where the client cannot set headers. Needs
  a plan with the raw tape; the bytes sent count against fair use like a download, and each connection counts as one request against the key's rate limit. Refusals before the upgrade are
  the usual JSON <code>{"detail": …}</code>; after it, close codes 4400 (malformed subscription), 4404 (unknown asset),
  4408 (no subscription within 30 s), 4413 (over 500 assets), 4429 (fair use reached), 1011 (server error).</p>
</section>`;
