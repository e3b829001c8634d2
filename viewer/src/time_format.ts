// How the page writes times, in one place. Two kinds of figure:
//   - a duration (how long): four significant digits in the unit that fits ("6.000 µs");
//   - a time (where on the trace: ns since its first event): as many decimals as it takes to show
//     `resolution` ns apart, so that ruler ticks and a span's begin and end never print alike
//     at any zoom, down to the nanosecond ("3.322140 ms").

const UNITS: [number, string][] = [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs'], [1, 'ns']];

export function formatDuration(ns: number): string {
  const magnitude = Math.abs(ns);
  if (magnitude < 1e3) return `${ns.toFixed(0)} ns`;
  if (magnitude < 1e6) return `${(ns / 1e3).toPrecision(4)} µs`;
  if (magnitude < 1e9) return `${(ns / 1e6).toPrecision(4)} ms`;
  return `${(ns / 1e9).toPrecision(5)} s`;
}

// `resolution`: the smallest difference the reader must see (1: the nanosecond, every time the
// trace holds is a whole number of them).
export function formatTime(ns: number, resolution = 1): string {
  const [scale, unit] = UNITS.find(([size]) => Math.abs(ns) >= size) ?? UNITS[UNITS.length - 1];
  const step = Math.max(resolution, 1);
  // The decimals of `unit` that one step needs; the tolerance keeps 1e6 / 100 at 4, not 5.
  const decimals = Math.min(Math.max(Math.ceil(Math.log10(scale / step) - 1e-9), 0), Math.log10(scale));
  return `${(ns / scale).toFixed(decimals)} ${unit}`;
}

// A whole count with thousands separators ("5,842,139"); any other number with at most
// `digits` significant digits, never in exponent form below 1e21 ("0.9866").
export function formatNumber(value: number, digits = 4): string {
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  return value.toLocaleString('en-US', { maximumSignificantDigits: digits });
}
