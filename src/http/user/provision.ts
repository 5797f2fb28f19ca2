import { z } from 'zod';
import { provisionKey } from '../../state/accounts.js';
import { Forbidden } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';
import { ApiKeyCreatedResponse } from '../account-schemas.js';
import { createdView } from './key-views.js';

/** POST /v1/user/provision: the dashboard's login, which replaces the user's auto-provisioned key. */

const ProvisionBody = z.object({
  email: z.string().min(3).max(320),
  name: z.string().min(1).max(100).default('Default'),
});

export const userProvisionRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: '/v1/user/provision',
    cost: 'cheap',
    auth: 'key',
    credentials: 'jwt',
    tag: 'User',
    summary: "Dashboard login: replace the user's auto-provisioned key (bearer JWT only; email must match the token)",
    body: ProvisionBody.meta({ id: 'ProvisionKeyRequest' }),
    response: ApiKeyCreatedResponse,
    handler: provisionUser,
  }),
];

async function provisionUser({ body, req }: RouteInput<{ body: typeof ProvisionBody }>, ctx: AppContext) {
  const p = req.principal!;
  // Only the identity provider's token may do this: an API key must not mint keys by email.
  if (p.authMethod !== 'jwt') throw new Forbidden('This endpoint needs the dashboard bearer token');
  if (body.email.trim().toLowerCase() !== p.email) throw new Forbidden("The email does not match the token's email claim");
  const { row, plaintext } = await provisionKey(ctx.state, p.userId, body.name, ctx.config.keyPrefix);
  req.log.info({ key_id: row.id, user: p.userId }, 'api key provisioned');
  return createdView(row, plaintext);
}
