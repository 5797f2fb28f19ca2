import type { Authenticator } from '../accounts/principal.js';
import type { Core } from '../compose.js';

/**
 * What HTTP handlers get: the core services (src/compose.ts: configuration, the read-only lake database, the
 * logger, the state store, the meter, market resolution, exports) and the authenticator of the API role.
 * Built once in src/server.ts; tests build it the same way. Only src/http/ sees this bag: the core takes
 * explicit dependencies.
 */
export type AppContext = Omit<Core, 'close'> & { readonly auth: Authenticator };
