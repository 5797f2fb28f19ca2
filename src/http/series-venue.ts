import type { RequestContext } from './context.js';
import type { Row } from '../lake/values.js';
import { venueSpanQuery } from '../query/series.js';
import { CATALOGUE_SERIES } from '../markets/series-ids.js';

/** The venue every catalogue series spans (series-catalogue.ts names the same one for the market series). */
const BROKER = 'polymarket';
const BROKER_DISPLAY = 'Polymarket';

/**
 * The whole-venue catalogue series (src/markets/series-ids.ts). The served ones count every market and those
 * with trades, over the span of trade data; the ones pmlake does not serve hold nothing and say so.
 */
export async function catalogueSeriesRows(ctx: RequestContext): Promise<Row[]> {
  const span = (await ctx.lake.one(venueSpanQuery(ctx.lake.sources))) ?? {};
  return CATALOGUE_SERIES.map((c) => {
    const served = !c.insteadOf;
    const latest = served ? ((span.latest as string | null) ?? null) : null;
    return {
      series_id: c.id,
      broker: BROKER,
      broker_display: BROKER_DISPLAY,
      asset_class: 'catalogue',
      category: 'catalogue',
      asset: '',
      asset_symbol: '',
      timeframe: c.timeframeSeconds === 3600 ? '1h' : c.timeframeSeconds === 86400 ? '1d' : '',
      name: c.name,
      description: served
        ? `${c.description}; data_type=${c.dataType} only (GET /v1/download/series?series_id=${c.id}&data_type=${c.dataType})`
        : `${c.description}; ${c.insteadOf}`,
      catalogued_markets: served ? Number(span.catalogued_markets ?? 0) : 0,
      shoppable_markets: served ? Number(span.shoppable_markets ?? 0) : 0,
      earliest: served ? ((span.earliest as string | null) ?? null) : null,
      latest,
      data_current_through: latest ? latest.slice(0, 10) : null,
      coming_soon: false,
    };
  });
}
