import { sparkline } from '../sparkline';

describe('sparkline', () => {
  it('scales readings into the box, oldest left, highest at the top', () => {
    const line = sparkline([0, 50, 100], 100, 10, 0, 100);
    expect(line.points).toBe('0,10 50,5 100,0');
    expect([line.min, line.max, line.last]).toEqual([0, 100, 100]);
  });
  it('skips gaps but keeps their place on the time axis', () => {
    expect(sparkline([10, null, 30], 100, 10).points).toBe('0,10 100,0');
  });
  it('draws a flat line inside a widened range', () => {
    expect(sparkline([50, 50], 10, 10, 0, 100).points).toBe('0,5 10,5');
  });
  it('draws nothing from fewer than two readings', () => {
    expect(sparkline([null, 42, null], 10, 10)).toEqual({ points: '', min: 42, max: 42, last: 42 });
    expect(sparkline([], 10, 10)).toEqual({ points: '', min: null, max: null, last: null });
  });
});
