/**
 * Sparklines: a series of readings as the ``points`` of an SVG polyline in a
 * ``width`` x ``height`` box, oldest at the left; gaps (null readings) are skipped.
 * Pure: the widget draws the string.
 */

export interface ISparkline {
  /** ``x,y x,y ...`` for ``<polyline points>``; '' when there are fewer than two readings. */
  points: string;
  min: number | null;
  max: number | null;
  last: number | null;
}

/**
 * Scale ``values`` into the box. ``floor``/``ceiling`` widen the range (0-100 for
 * percent) so that a flat line does not look like a swing.
 */
export function sparkline(
  values: (number | null)[],
  width: number,
  height: number,
  floor: number | null = null,
  ceiling: number | null = null
): ISparkline {
  const known = values.map((v, i) => [i, v] as const).filter((p): p is readonly [number, number] => p[1] !== null);
  if (!known.length) {
    return { points: '', min: null, max: null, last: null };
  }
  const readings = known.map(p => p[1]);
  const min = Math.min(...readings);
  const max = Math.max(...readings);
  const low = floor === null ? min : Math.min(floor, min);
  const high = ceiling === null ? max : Math.max(ceiling, max);
  const span = high - low || 1;
  const steps = Math.max(values.length - 1, 1);
  const round = (n: number): number => Math.round(n * 10) / 10;
  const points =
    known.length < 2
      ? ''
      : known
          .map(([i, v]) => `${round((i / steps) * width)},${round(height - ((v - low) / span) * height)}`)
          .join(' ');
  return { points, min, max, last: readings[readings.length - 1] };
}
