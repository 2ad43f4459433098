/**
 * `metrics-series` plugin: a small time-series store for the console's plots (one document per
 * minute, series and tenant, kept `METRICS_SERIES_RETENTION_DAYS`), fed by every HTTP answer and
 * every event stored in the log, read through GraphQL `metricsOverview` and the pages' `jobSeries`,
 * `webhookEndpointSeries` and `paymentSeries`. See docs/console.md.
 */
import { definePlugin } from '../../core/plugin.ts';
import { SeriesStore, type MinuteDoc } from './store.ts';
import { SeriesService } from './service.ts';
import { PageSeries } from './pages.ts';
import { seriesGraphql } from './graphql.ts';

export const metricsSeriesPlugin = definePlugin({
  name: 'metrics-series',
  setup({ config, db, services, log }) {
    if (!config.METRICS_SERIES_ENABLED) return {};
    const store = new SeriesStore(db.collection<MinuteDoc>('metric_minutes') as never, {
      retentionDays: config.METRICS_SERIES_RETENTION_DAYS,
      flushMs: config.METRICS_SERIES_FLUSH_MS,
      onError: (err) => log.warn({ err }, 'metrics series flush failed; its counts are lost'),
    });
    const series = new SeriesService(store);
    const pages = new PageSeries(store);
    services.get('metrics').onRequest((status, seconds) => series.request(status, seconds));
    services.get('events').onStored((events) => {
      series.events(events);
      pages.events(events);
    });
    return {
      ready: () => store.start(),
      graphql: (builder) => seriesGraphql(builder, series, pages),
      close: () => store.close(),
    };
  },
});
