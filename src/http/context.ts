import type { Authenticator } from '../accounts/principal.js';
import type { Core } from '../compose.js';
import type { LakeSession } from '../lake/session.js';

/**
 * What HTTP handlers get: the core services (src/compose.ts: configuration, the read-only lake database, the
 * logger, the state store, the meter, market resolution, exports) and the authenticator of the API role.
 * Built once in src/server.ts; tests build it the same way. Only src/http/ sees this bag: the core takes
 * explicit dependencies.
 */
export type AppContext = Omit<Core, 'close'> & { readonly auth: Authenticator };

/**
 * What one request's handler gets: the application's context and the request's lake session (`lake`, opened by
 * the gate): one DuckDB and one lake version for everything the request reads.
 */
export type RequestContext = AppContext & { readonly lake: LakeSession };
