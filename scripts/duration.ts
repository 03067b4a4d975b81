/** A duration as the tools take it: `90s`, `10m`, `1h`, `250ms`, or a number of seconds. Undefined when invalid. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  return Math.round(Number(m[1]) * unit);
}
