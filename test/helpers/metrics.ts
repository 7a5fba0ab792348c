// Scrapes /metrics and reads it with a Prometheus text-format parser, so the tests judge what a Prometheus server
// would see, not svc's own idea of its output.
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

interface Family {
  name: string;
  type: string;
  metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string>; count?: string }[];
}

export interface Scrape {
  readonly text: string;
  readonly families: Map<string, Family>;
  /** the sample's value whose labels include all of `labels` (summed over the rest); 0 when there is none */
  value(name: string, labels?: Record<string, string>): number;
  /** a histogram's observation count for the series matching `labels` */
  count(name: string, labels?: Record<string, string>): number;
}

export async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`scrape ${url}: ${res.status} ${await res.text()}`);
  const text = await res.text();
  const families = new Map((parsePrometheusTextFormat(text) as Family[]).map((f) => [f.name, f]));
  // The parser folds a histogram's labelled series into one; its _count series are read again as a counter family.
  for (const [name, family] of [...families]) {
    if (family.type !== 'HISTOGRAM') continue;
    const lines = text.split('\n').filter((l) => l.startsWith(`${name}_count{`) || l.startsWith(`${name}_count `));
    const [counts] = parsePrometheusTextFormat(`# TYPE ${name}_count counter\n${lines.join('\n')}\n`) as Family[];
    if (counts) families.set(`${name}_count`, counts);
  }
  const matching = (name: string, labels: Record<string, string>) =>
    (families.get(name)?.metrics ?? []).filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return {
    text,
    families,
    value: (name, labels = {}) => matching(name, labels).reduce((sum, m) => sum + Number(m.value), 0),
    count: (name, labels = {}) => matching(`${name}_count`, labels).reduce((sum, m) => sum + Number(m.value), 0),
  };
}
