import { formatClock, formatMemory, formatReading, formatSpan, plural, secondsUntil, shortModel } from '../format';
import { NOW, iso } from './builders';

describe('formatSpan', () => {
  const cases: [string, number, boolean, string][] = [
    ['zero', 0, false, '0s'],
    ['negative is zero', -5, false, '0s'],
    ['seconds', 30, false, '30s'],
    ['minutes and seconds', 125, false, '2m05s'],
    ['hours hide seconds', 4325, false, '1h12m'],
    ['a countdown shows seconds', 4325, true, '1h12m05s'],
    ['whole hours', 7200, false, '2h'],
    ['days', 2 * 86400 + 3 * 3600 + 59, false, '2d3h'],
    ['rounds', 59.6, false, '1m']
  ];
  it.each(cases)('%s', (_, seconds, precise, want) => {
    expect(formatSpan(seconds, precise)).toBe(want);
  });
});

describe('formatClock in the browser time zone (Europe/Berlin in these tests)', () => {
  it('shows hours and minutes on the same day', () => {
    // 12:20 UTC is 14:20 in Berlin in May (CEST)
    expect(formatClock('2024-05-14T12:20:00Z', NOW)).toBe('14:20');
  });
  it('names the weekday within a week', () => {
    expect(formatClock('2024-05-16T07:05:00Z', NOW)).toBe('Thu 09:05');
  });
  it('gives the date further away', () => {
    expect(formatClock('2024-06-30T22:30:00Z', NOW)).toBe('2024-07-01 00:30');
  });
});

describe('small formats', () => {
  it('counts seconds until a time', () => {
    expect(secondsUntil(iso(90), NOW)).toBe(90);
    expect(secondsUntil(iso(-10), NOW)).toBe(-10);
  });
  it('plurals', () => {
    expect(plural(1, 'GPU')).toBe('1 GPU');
    expect(plural(3, 'node')).toBe('3 nodes');
  });
  it('shortens NVIDIA model names', () => {
    expect(shortModel('NVIDIA H100 80GB HBM3')).toBe('H100 80GB HBM3');
    expect(shortModel('H100')).toBe('H100');
  });
  it('formats readings and missing ones', () => {
    expect(formatReading(61.4, ' °C')).toBe('61 °C');
    expect(formatReading(null, '%')).toBe('–');
    expect(formatMemory(40960)).toBe('40.0 GiB');
    expect(formatMemory(null)).toBe('–');
  });
});
