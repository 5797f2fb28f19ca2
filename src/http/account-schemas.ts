import { z } from 'zod';

/**
 * Response shapes of the account, billing and order endpoints, for /v1/openapi.json. Names and fields follow
 * the anchor's schemas (ApiKeyResponse, UsageResponse, BalanceResponse, ...); extra fields pmlake adds are
 * listed too. Handlers build these objects; the schemas document them.
 */
// Timestamps are sent as ISO 8601 text: typed date-time, as the anchor's schemas type them, so generated clients parse dates.
const ts = z.string().meta({ format: 'date-time', description: 'ISO 8601, UTC' });
const nts = ts.nullable();

export const ApiKeyResponse = z
  .object({
    id: z.string(),
    name: z.string(),
    key_prefix: z.string(),
    created_at: ts,
    last_used_at: nts,
    scheduled_revoke_at: nts.describe('Set on a rotated key: it stops working then'),
    expires_at: nts,
    permissions: z.array(z.enum(['read', 'download'])),
  })
  .meta({ id: 'ApiKeyResponse' });

export const ApiKeyCreatedResponse = z
  .object({
    id: z.string(),
    name: z.string(),
    key: z.string().describe('The plaintext key: shown this once, never again'),
    key_prefix: z.string(),
    created_at: ts,
    expires_at: nts,
    permissions: z.array(z.enum(['read', 'download'])),
  })
  .meta({ id: 'ApiKeyCreatedResponse' });

export const UsageResponse = z
  .object({
    user_id: z.string(),
    period: z.record(z.string(), z.unknown()),
    total_requests: z.number().int(),
    total_bytes: z.number().int(),
    total_mb: z.number(),
    total_downloads: z.number().int(),
    estimated_cost: z.number().describe('Reference cost at the per-MB rates; not charged'),
    daily: z.array(z.record(z.string(), z.unknown())),
    requests_by_key: z.array(z.object({ key_id: z.string().nullable(), requests: z.number().int() })),
  })
  .meta({ id: 'UsageResponse' });

export const DownloadHistoryResponse = z
  .object({
    id: z.string(),
    market_id: z.string(),
    data_type: z.string(),
    format: z.string(),
    file_name: z.string(),
    record_count: z.number().int().nullable(),
    size_bytes: z.number().int().nullable(),
    cost: z.number().meta({ default: 0 }),
    status: z.enum(['pending', 'completed', 'failed']).meta({ default: 'completed' }),
    timeframe: z.string().nullable(),
    start_date: nts,
    end_date: nts,
    created_at: ts,
    kind: z.enum(['download', 'export']),
    description: z.string(),
    finished_at: nts,
  })
  .meta({ id: 'DownloadHistoryResponse' });

export const BalanceResponse = z
  .object({
    user_id: z.string(),
    balance: z.number(),
    currency: z.literal('USD'),
    lifetime_credits: z.number(),
    lifetime_usage: z.number(),
    lifetime_refunds: z.number().meta({ default: 0 }),
    plan: z.record(z.string(), z.unknown()).nullable(),
    note: z.string().nullable(),
  })
  .meta({ id: 'BalanceResponse' });

export const TransactionResponse = z
  .object({
    id: z.string(),
    type: z.enum(['credit_purchase', 'usage_charge', 'refund', 'adjustment']),
    amount: z.number().describe('Signed: credits positive, charges negative; the sum of all is the balance'),
    currency: z.literal('USD'),
    status: z.string(),
    description: z.string(),
    created_at: ts,
    metadata: z.record(z.string(), z.unknown()).nullable(),
  })
  .meta({ id: 'TransactionResponse' });

export const CheckoutResponse = z.object({ checkout_id: z.string(), checkout_url: z.string(), amount: z.number() }).meta({ id: 'CheckoutResponse' });

export const OrderItemResponse = z
  .object({
    id: z.string(),
    market_id: z.string(),
    series_id: z.string().nullable(),
    data_type: z.string(),
    format: z.string(),
    timeframe: z.string().nullable(),
    start_date: nts,
    end_date: nts,
    record_count: z.number().int().nullable(),
    size_bytes: z.number().int().nullable(),
    cost: z.number(),
    status: z.enum(['paid', 'completed']),
    expires_at: ts,
  })
  .meta({ id: 'OrderItemResponse' });

export const OrderResponse = z
  .object({
    order_id: z.string(),
    created_at: ts,
    total_cost: z.number(),
    minimum_applied: z.boolean(),
    idempotency_key: z.string().nullable(),
    items: z.array(OrderItemResponse),
  })
  .meta({ id: 'OrderResponse' });
