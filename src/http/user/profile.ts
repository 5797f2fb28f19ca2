import { entitlementOf } from '../../accounts/entitlements.js';
import { fairUseStatus } from '../../accounts/fairuse.js';
import { getKey } from '../../state/accounts.js';
import { Unauthorized } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';

/** GET /v1/user/me: who is calling, with which credential, on which plan and limits. */
export const userProfileRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/user/me',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'The caller: user, plan, credential, permissions, limits',
    handler: getProfile,
  }),
];

async function getProfile({ req }: RouteInput, ctx: AppContext) {
  const p = req.principal!;
  const user = await ctx.state.getUser(p.userId);
  if (!user) throw new Unauthorized();
  const ent = await entitlementOf(ctx.state, user);
  const key = p.keyId ? await getKey(ctx.state, p.userId, p.keyId) : undefined;
  return {
    id: user.id,
    user_id: user.id,
    email: user.email,
    created_at: user.created_at,
    plan: ent.plan.id,
    plan_name: ent.plan.name,
    auth_method: p.authMethod ?? (p.keyId ? 'api_key' : 'jwt'),
    key_id: key?.id ?? null,
    key_name: key?.name ?? null,
    key_prefix: key?.key_prefix ?? null,
    permissions: [...p.scopes],
    rate_limit: {
      requests_per_minute: ent.plan.requests_per_minute,
      downloads_per_hour: ent.plan.downloads_per_hour,
      downloads_per_minute: ent.plan.downloads_per_minute,
    },
    subscription: ent.subscription
      ? {
          tier: ent.subscription.tier,
          status: ent.subscription.status,
          current_period_end: ent.subscription.current_period_end,
          cancel_at_period_end: ent.subscription.cancel_at_period_end === 1,
        }
      : null,
    fair_use: await fairUseStatus(ctx.state, user.id),
  };
}
