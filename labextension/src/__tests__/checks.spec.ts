import {
  checkDuration,
  checkLabel,
  checkLine,
  checksKey,
  checksSummary,
  checksToAsk,
  checkTooltip,
  checkValues
} from '../checks';
import { checkRun, gpr, provisioned } from './builders';

describe('checksToAsk', () => {
  const held = provisioned({ id: 1 });
  const cases: [string, Parameters<typeof checksToAsk>, number[]][] = [
    ['a GPR holding nodes, never asked', [[held], {}, {}], [1]],
    ['not a queued or cancelled GPR', [[gpr({ id: 2 }), gpr({ id: 3, status: 'cancelled' })], {}, {}], []],
    ['not again while the GPR is unchanged and its checks ended', [[held], { 1: [checkRun()] }, { 1: checksKey(held) }], []],
    [
      'again while a check is pending',
      [[held], { 1: [checkRun({ status: 'pending', duration: null })] }, { 1: checksKey(held) }],
      [1]
    ],
    ['again when the GPR changed', [[held], { 1: [checkRun()] }, { 1: 'provisioning ' }], [1]]
  ];
  it.each(cases)('%s', (_, args, want) => {
    expect(checksToAsk(...args).map(g => g.id)).toEqual(want);
  });
});

describe('check text', () => {
  it('says how long a check ran, or that it still runs', () => {
    expect(checkDuration(checkRun({ duration: 0.4242 }))).toBe('0.42 s');
    expect(checkDuration(checkRun({ duration: 125 }))).toBe('2m05s');
    expect(checkDuration(checkRun({ status: 'running', duration: null }))).toBe('running…');
    expect(checkDuration(checkRun({ status: 'skipped', duration: null }))).toBe('');
  });

  it('lists measured values and names the node only when the GPR has several', () => {
    expect(checkValues(checkRun({ values: { max_temperature_c: 61, driver: '550.54' } }))).toBe(
      'max_temperature_c=61, driver=550.54'
    );
    expect(checkLabel(checkRun({ phase: 'exit' }), false)).toBe('gpu-health exit');
    expect(checkLabel(checkRun({ phase: 'exit' }), true)).toBe('node-1 gpu-health exit');
  });

  it('puts the log under the line in the tooltip', () => {
    const run = checkRun({ status: 'skipped', duration: 0, values: {}, log: 'no GPU metrics source' });
    expect(checkLine(run)).toBe('gpu-health at entry on node-1: skipped · 0.00 s');
    expect(checkTooltip(run)).toBe('gpu-health at entry on node-1: skipped · 0.00 s\nno GPU metrics source');
    expect(checkTooltip(checkRun({ values: {} }))).toBe('gpu-health at entry on node-1: passed · 0.42 s');
  });

  it('counts the checks by status, failed first', () => {
    const runs = [checkRun(), checkRun({ id: 2, status: 'failed' }), checkRun({ id: 3 })];
    expect(checksSummary(runs)).toBe('1 failed, 2 passed');
  });
});
