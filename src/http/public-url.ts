import type { Request } from 'express';
import type { Config } from '../config.js';

/**
 * The base of links the service hands out (checkout pages, and anything else that must point back here).
 * Never taken from a request header unless the operator allowed that host: a client choosing the Host header
 * would otherwise choose where the link sends the next person who follows it. In order:
 *   1. PMLAKE_PUBLIC_URL;
 *   2. the request's Host, only when it is listed in PMLAKE_ALLOWED_HOSTS (as `host` or `host:port`);
 *   3. the listen address: HOST and PORT from the configuration, where a wildcard host (0.0.0.0, ::) or
 *      PORT=0 is read from the socket the request arrived on (the server's own address, not a header).
 */
const WILDCARD = new Set(['0.0.0.0', '::', '[::]', '']);

export function publicBase(config: Config, req: Request): string {
  if (config.publicUrl) return config.publicUrl.replace(/\/+$/, '');
  const host = allowedHost(config, req.get('host'));
  if (host) return `${req.protocol}://${host}`;
  return listenBase(config, req);
}

function allowedHost(config: Config, header: string | undefined): string | null {
  if (!header || config.allowedHosts.length === 0) return null;
  const host = header.trim().toLowerCase();
  const name = host.replace(/:\d{1,5}$/, '');
  // An entry without a port allows that host on any port; an entry with one allows exactly that.
  return config.allowedHosts.includes(host) || config.allowedHosts.includes(name) ? host : null;
}

function listenBase(config: Config, req: Request): string {
  let host = WILDCARD.has(config.host) ? (req.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:/, '') : config.host;
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  const port = config.port || req.socket.localPort || 80;
  return `http://${host}:${port}`;
}
