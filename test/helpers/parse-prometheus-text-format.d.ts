/** Types of `parse-prometheus-text-format` (the package ships none); its output follows prom2json's. */
declare module 'parse-prometheus-text-format' {
  /** One sample of a family: `value` for counters, gauges and untyped; `buckets`/`count`/`sum` for histograms; `quantiles` for summaries. */
  export interface ParsedMetric {
    labels?: Record<string, string>;
    value?: string;
    buckets?: Record<string, string>;
    quantiles?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  export interface ParsedFamily {
    name: string;
    help: string;
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: ParsedMetric[];
  }
  /** Parses a Prometheus text exposition; throws on malformed input. */
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
