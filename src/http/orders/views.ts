import type { OrderItemRow, OrderRow } from '../../state/billing.js';
import { usd } from '../billing/money.js';

/** OrderResponse and OrderItemResponse (src/http/account-schemas.ts) from the stored rows. */

function itemView(i: OrderItemRow) {
  return {
    id: i.id,
    market_id: i.market_id,
    series_id: i.series_id,
    data_type: i.data_type,
    format: i.format,
    timeframe: i.timeframe,
    start_date: i.start_date,
    end_date: i.end_date,
    record_count: i.record_count,
    size_bytes: i.size_bytes,
    cost: usd(i.cost_cents),
    status: i.status,
    expires_at: i.expires_at,
  };
}

export function orderView(o: OrderRow, items: OrderItemRow[]) {
  return {
    order_id: o.id,
    created_at: o.created_at,
    total_cost: usd(o.total_cost_cents),
    minimum_applied: o.minimum_applied === 1,
    idempotency_key: o.idempotency_key,
    items: items.map(itemView),
  };
}
